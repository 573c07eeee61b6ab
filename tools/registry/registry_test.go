package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// The registry's view is what the loop runs tools through.
var _ toolset.Set = (*Toolset)(nil)

// source is an in-memory tool source that records the calls it runs.
type source struct {
	id   string
	defs []toolset.Tool
	mu   sync.Mutex
	ran  []string
}

func (s *source) ID() string            { return s.id }
func (s *source) Tools() []toolset.Tool { return s.defs }
func (s *source) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	s.mu.Lock()
	s.ran = append(s.ran, call.Name)
	s.mu.Unlock()
	return json.RawMessage(fmt.Sprintf(`{"by":%q}`, s.id)), nil
}

func (s *source) runs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ran)
}

// tool is a def of source id; hidden makes it llm_callable false.
func tool(id, name, origin string, hidden bool) toolset.Tool {
	return toolset.Tool{Spec: agentd.ToolSpec{Name: name}, Confirm: &confirm.Tool{Name: name, ServerID: id},
		LLMCallable: !hidden, Origin: origin}
}

func src(id string, defs ...toolset.Tool) *source { return &source{id: id, defs: defs} }

func TestNewRefusesCollisions(t *testing.T) {
	tests := []struct {
		name    string
		sources []toolset.Source
		want    string
	}{
		{"two sources", []toolset.Source{
			src("tools", tool("tools", "lookup", "tools (tools/lookup/tool.json)", false)),
			src("billing", tool("billing", "lookup", `connection "billing"`, false)),
		}, `tool "lookup" is defined by tools (tools/lookup/tool.json) and connection "billing"`},
		{"a hidden tool collides too", []toolset.Source{
			src("tools", tool("tools", "request", "tools (tools/request/tool.json)", true)),
			src("connections", tool("connections", "request", "connections (the request tool)", false)),
		}, `tool "request" is defined by tools (tools/request/tool.json) and connections (the request tool)`},
		{"no origin names the source", []toolset.Source{
			src("a", tool("a", "x", "", false)), src("b", tool("b", "x", "", false)),
		}, `tool "x" is defined by a and b`},
		{"twice in one source", []toolset.Source{
			src("mcp", tool("mcp", "x", "", false), tool("mcp", "x", "", false)),
		}, `tool "x" is defined twice by mcp`},
		{"no name", []toolset.Source{src("a", tool("a", "", "", false))}, `tool source "a" lists a tool without a name`},
		{"no decision", []toolset.Source{src("a", toolset.Tool{Spec: agentd.ToolSpec{Name: "x"}})}, `tool source "a": tool "x" has no decision`},
		{"decision of another tool", []toolset.Source{src("a", toolset.Tool{Spec: agentd.ToolSpec{Name: "x"}, Confirm: &confirm.Tool{Name: "y", ServerID: "a"}})},
			`tool source "a": tool "x" decides as "y"`},
		{"another server_id", []toolset.Source{src("a", tool("b", "x", "", false))}, `tool source "a": tool "x" has server_id "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.sources...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("New = %v, %v; want %q", r, err, tt.want)
			}
		})
	}
}

func names(s *Toolset) []string {
	var out []string
	for _, d := range s.Tools() {
		out = append(out, d.Spec.Name)
	}
	return out
}

func TestToolset(t *testing.T) {
	r, err := New(
		src("tools", tool("tools", "zeta", "", false), tool("tools", "alpha", "", false), tool("tools", "internal", "", true)),
		nil, // skipped
		src("billing", tool("billing", "billing__pay", "", false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	all, err := r.Toolset(nil)
	if err != nil || !slices.Equal(names(all), []string{"alpha", "billing__pay", "zeta"}) {
		t.Fatalf("every llm_callable tool: %v, %v", names(all), err)
	}
	// agent.json's list, sorted by name as the model sees it.
	listed, err := r.Toolset([]string{"zeta", "billing__pay"})
	if err != nil || !slices.Equal(names(listed), []string{"billing__pay", "zeta"}) {
		t.Fatalf("listed: %v, %v", names(listed), err)
	}
	if none, err := r.Toolset([]string{}); err != nil || len(none.Tools()) != 0 {
		t.Fatalf("[]: %v, %v", names(none), err)
	}
	for _, tt := range []struct {
		list []string
		want string
	}{
		{[]string{"zeta", "request"}, `field "tools[1]": unknown tool "request": no tool source defines it (sources: tools, billing)`},
		{[]string{"internal"}, `field "tools[0]": tool "internal" has llm_callable false, so the model cannot see it`},
		{[]string{"zeta", "zeta"}, `field "tools[1]": tool "zeta" is listed twice`},
		{[]string{"nope", "nope"}, `field "tools[0]": unknown tool "nope"`},
	} {
		if _, err := r.Toolset(tt.list); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.list, err, tt.want)
		}
	}
	empty, _ := New()
	if _, err := empty.Toolset([]string{"x"}); err == nil || !strings.Contains(err.Error(), "(sources: none)") {
		t.Errorf("no sources: %v", err)
	}
}

// Execute hands each call to the source of its tool, also a tool the
// model does not see; an unknown name or a call classified for another
// source runs nothing.
func TestExecute(t *testing.T) {
	tools := src("tools", tool("tools", "lookup", "", false), tool("tools", "internal", "", true))
	billing := src("billing", tool("billing", "billing__pay", "", false))
	r, err := New(tools, billing)
	if err != nil {
		t.Fatal(err)
	}
	set, err := r.Toolset([]string{"lookup"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct{ name, server, by string }{
		{"lookup", "tools", "tools"}, {"billing__pay", "billing", "billing"}, {"internal", "", "tools"},
	} {
		out, err := set.Execute(ctx, agentd.ToolCall{ID: "call_1", Name: c.name, ServerID: c.server})
		if err != nil || string(out) != `{"by":"`+c.by+`"}` {
			t.Errorf("%s: %s, %v", c.name, out, err)
		}
	}
	if _, err := set.Execute(ctx, agentd.ToolCall{Name: "nope"}); err == nil || err.Error() != `tool "nope" is not registered` {
		t.Errorf("unknown: %v", err)
	}
	_, err = set.Execute(ctx, agentd.ToolCall{Name: "lookup", ServerID: "billing"})
	if want := `tool "lookup" was classified as a tool of "billing" and is now one of "tools", so it was not run`; err == nil || err.Error() != want {
		t.Errorf("moved: %v", err)
	}
	if got := tools.runs(); !slices.Equal(got, []string{"lookup", "internal"}) {
		t.Errorf("tools ran %v", got)
	}
	if got := billing.runs(); !slices.Equal(got, []string{"billing__pay"}) {
		t.Errorf("billing ran %v", got)
	}
}

// changingSource is a source whose tools change (toolset.Changing).
type changingSource struct {
	*source
	mu      sync.Mutex
	version uint64
}

func (c *changingSource) Tools() []toolset.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.defs
}

func (c *changingSource) Version() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func (c *changingSource) set(defs ...toolset.Tool) {
	c.mu.Lock()
	c.defs = defs
	c.version++
	c.mu.Unlock()
}

func toolNames(defs []toolset.Tool) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Spec.Name)
	}
	return out
}

// A changing source's tools come and go in every toolset, without taking
// a name another source defines; the other sources' tools stay.
func TestChangingSource(t *testing.T) {
	fixed := src("tools", tool("tools", "notes__clash", "", false), tool("tools", "lookup", "", false))
	mcp := &changingSource{source: src("notes", tool("notes", "notes__search", "", false))}
	reg, err := New(fixed, mcp)
	if err != nil {
		t.Fatal(err)
	}
	all, err := reg.Toolset(nil)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := reg.Toolset([]string{"notes__search", "lookup"})
	if err != nil {
		t.Fatal(err)
	}
	before := all.Tools()
	if got := toolNames(before); !slices.Equal(got, []string{"lookup", "notes__clash", "notes__search"}) {
		t.Fatalf("before: %v", got)
	}
	if again := all.Tools(); &again[0] != &before[0] {
		t.Error("an unchanged toolset lists another slice")
	}

	mcp.set(tool("notes", "notes__add", "", false), tool("notes", "notes__clash", "", false), tool("notes", "notes__hidden", "", true))
	if got := toolNames(all.Tools()); !slices.Equal(got, []string{"lookup", "notes__add", "notes__clash"}) {
		t.Errorf("after the change, every llm_callable tool: %v", got)
	}
	if got := toolNames(listed.Tools()); !slices.Equal(got, []string{"lookup"}) {
		t.Errorf("after the change, the listed tools still defined: %v", got)
	}
	if _, err := all.Execute(context.Background(), agentd.ToolCall{Name: "notes__clash", ServerID: "tools"}); err != nil {
		t.Fatal(err)
	}
	if runs := fixed.runs(); !slices.Equal(runs, []string{"notes__clash"}) {
		t.Errorf("the fixed source lost its name: runs %v", runs)
	}
	if _, err := all.Execute(context.Background(), agentd.ToolCall{Name: "notes__search", ServerID: "notes"}); err == nil || !strings.Contains(err.Error(), "is not registered") {
		t.Errorf("a removed tool: %v", err)
	}
	if _, err := all.Execute(context.Background(), agentd.ToolCall{Name: "notes__add", ServerID: "notes"}); err != nil {
		t.Errorf("an added tool: %v", err)
	}
	mcp.set(tool("notes", "notes__search", "", false))
	if got := toolNames(listed.Tools()); !slices.Equal(got, []string{"lookup", "notes__search"}) {
		t.Errorf("back again: %v", got)
	}
}

// A composite (toolset.Tool.Uses) that uses a requires-confirmation or a
// connection tool, or one no source defines, does not load; the error
// names both tools. A tool an MCP-like source may define later loads.
func TestComposites(t *testing.T) {
	composite := func(uses ...string) toolset.Tool {
		d := tool("tools", "report", "tools (tools/report/tool.json)", false)
		d.Uses = uses
		return d
	}
	pay := tool("tools", "pay", "tools (tools/pay/tool.json)", false)
	pay.Confirm.Exposure = confirm.ExposureRequiresConfirmation
	op := tool("billing", "billing__createRefund", `connection "billing"`, false)
	op.Confirm.Kind = confirm.KindOperation
	lookup := tool("tools", "lookup", "", true)
	for _, tc := range []struct {
		uses []string
		want string
	}{
		{[]string{"lookup", "pay"}, `tools (tools/report/tool.json): field "uses.tools[1]": composite "report" may not use "pay" (tools (tools/pay/tool.json)): it requires confirmation`},
		{[]string{"billing__createRefund"}, `tools (tools/report/tool.json): field "uses.tools[0]": composite "report" may not use "billing__createRefund" (connection "billing"): it is a connection tool`},
		{[]string{"nope"}, `tools (tools/report/tool.json): field "uses.tools[0]": composite "report" uses "nope", which no tool source defines`},
		{[]string{"lookup", "notes__later"}, ""},
	} {
		_, err := New(src("tools", composite(tc.uses...), pay, lookup), src("billing", op), &changingSource{source: src("notes")})
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && !strings.HasPrefix(got, tc.want)) {
			t.Errorf("uses %v: %v, want %q", tc.uses, err, tc.want)
		}
	}
}
