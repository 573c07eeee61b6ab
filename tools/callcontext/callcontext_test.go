package callcontext

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// fakeTools is a registry of a few tools that records the calls it runs.
type fakeTools struct {
	mu    sync.Mutex
	defs  map[string]toolset.Tool
	calls []agentd.ToolCall
}

func (f *fakeTools) Tool(name string) (toolset.Tool, bool) {
	d, ok := f.defs[name]
	return d, ok
}

func (f *fakeTools) Execute(_ context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if call.Name == "broken" {
		return nil, errors.New("disk on fire")
	}
	return json.RawMessage(`{"ok":true}`), nil
}

func tool(name, exposure, kind string, tenants []string) toolset.Tool {
	return toolset.Tool{Spec: agentd.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Confirm:   &confirm.Tool{Name: name, ServerID: "tools", Exposure: exposure, Kind: kind},
		TenantIDs: tenants}
}

// recorder is the connections' side: it records who asked what.
type recorder struct {
	callers   []agentd.Principal
	writes    []bool
	delegated []bool
}

func (r *recorder) Inline(_ context.Context, args json.RawMessage, caller agentd.Principal, o RequestOptions) (any, bool, error) {
	r.callers, r.writes = append(r.callers, caller), append(r.writes, o.Writes)
	r.delegated = append(r.delegated, o.Delegated)
	return map[string]any{"status": 200}, false, nil
}

func newEndpoint(t *testing.T) (*Endpoint, *fakeTools, *recorder) {
	t.Helper()
	ft := &fakeTools{defs: map[string]toolset.Tool{}}
	for _, d := range []toolset.Tool{
		tool("lookup", confirm.ExposureOpen, "", nil),
		tool("broken", confirm.ExposureOpen, "", nil),
		tool("acme_only", confirm.ExposureOpen, "", []string{"acme"}),
		// Became requires-confirmation after load (an MCP server's tool
		// whose tier changed): refused at call time all the same.
		tool("pay", confirm.ExposureRequiresConfirmation, "", nil),
		tool("billing__createRefund", confirm.ExposureOpen, confirm.KindOperation, nil),
	} {
		ft.defs[d.Spec.Name] = d
	}
	rec := &recorder{}
	ep := New(zerolog.Nop())
	ep.SetURL("http://127.0.0.1:1/v1/context")
	ep.Wire(ft, rec)
	return ep, ft, rec
}

func tokenOf(t *testing.T, env []string) string {
	t.Helper()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvToken+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %v", EnvToken, env)
	return ""
}

func code(err error) string { return agentd.ErrorCode(err) }

// A token works only while its call runs and carries that call's scope:
// its tenant and project reach the connections, its confirm decides
// writes, and its uses.tools the children.
func TestTokenScope(t *testing.T) {
	ep, ft, rec := newEndpoint(t)
	call := agentd.ToolCall{ID: "call_1", Name: "report", TenantID: "t1", ProjectID: "p1", ConversationID: "conv_1", RunID: "run_1"}
	env, closeCtx := ep.Open(call, false, []string{"lookup", "broken", "acme_only", "pay", "billing__createRefund", "missing"}, false)
	if len(env) != 2 || env[0] != EnvURL+"=http://127.0.0.1:1/v1/context" {
		t.Fatalf("env %v", env)
	}
	token := tokenOf(t, env)
	other, closeOther := ep.Open(agentd.ToolCall{ID: "call_2", Name: "other", TenantID: "t2", ProjectID: "p2"}, true, nil, false)
	if tokenOf(t, other) == token {
		t.Fatal("two calls got the same token")
	}
	ctx := context.Background()

	if _, err := ep.Request(ctx, token, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Request(ctx, tokenOf(t, other), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if c := rec.callers[0]; c.TenantID != "t1" || c.ProjectID != "p1" || rec.writes[0] || !rec.writes[1] || rec.callers[1].TenantID != "t2" {
		t.Fatalf("callers %+v, writes %v", rec.callers, rec.writes)
	}

	out, err := ep.CallTool(ctx, token, "lookup", json.RawMessage(`{"q":"tea"}`))
	res, _ := out.(*ChildResult)
	if err != nil || res.Status != agentd.StatusCompleted || string(res.Result) != `{"ok":true}` {
		t.Fatalf("lookup: %+v %v", out, err)
	}
	got := ft.calls[0]
	if got.ID != "call_1.1" || got.TenantID != "t1" || got.ConversationID != "conv_1" || got.RunID != "run_1" || string(got.Arguments) != `{"q":"tea"}` {
		t.Fatalf("child call %+v", got)
	}
	if out, err := ep.CallTool(ctx, token, "broken", nil); err != nil || out.(*ChildResult).Status != agentd.StatusFailed ||
		out.(*ChildResult).Error != "disk on fire" {
		t.Fatalf("broken: %+v %v", out, err)
	}
	for name, want := range map[string]string{
		"pay": "forbidden", "billing__createRefund": "forbidden",
		"acme_only": "not_found", "missing": "not_found", "record": "forbidden",
	} {
		if _, err := ep.CallTool(ctx, token, name, nil); code(err) != want {
			t.Errorf("child %s: %v, want %s", name, err, want)
		}
	}
	if _, err := ep.CallTool(ctx, token, "lookup", json.RawMessage(`[1]`)); code(err) != "invalid" {
		t.Errorf("bad arguments: %v", err)
	}
	if n := len(ft.calls); n != 2 {
		t.Fatalf("%d child calls ran, want 2 (lookup, broken)", n)
	}

	closeCtx()
	if _, err := ep.Request(ctx, token, json.RawMessage(`{}`)); code(err) != "unauthorized" {
		t.Fatalf("after the call: %v", err)
	}
	if _, err := ep.CallTool(ctx, token, "lookup", nil); code(err) != "unauthorized" {
		t.Fatalf("child after the call: %v", err)
	}
	for _, bad := range []string{"", token[:len(token)-1], strings.ToUpper(token)} {
		if _, err := ep.Request(ctx, bad, nil); code(err) != "unauthorized" {
			t.Errorf("token %q: %v", bad, err)
		}
	}
	if ep.OpenCalls() != 1 {
		t.Fatalf("%d open calls, want the other one", ep.OpenCalls())
	}
	closeOther()
	if ep.OpenCalls() != 0 {
		t.Fatal("a context stayed open")
	}
}

// Without a URL (before the server listens) a call gets no variables.
func TestNoURL(t *testing.T) {
	ep := New(zerolog.Nop())
	env, closeCtx := ep.Open(agentd.ToolCall{ID: "c"}, false, nil, false)
	closeCtx()
	if env != nil || ep.OpenCalls() != 0 {
		t.Fatalf("env %v", env)
	}
}

// A delegated call's context is delegated: its requests are asked as
// delegated (connections then apply delegations.escalateConfirm) and its
// child calls are delegated too (their own context endpoints are); a call
// that is not delegated asks as not delegated.
func TestDelegatedCallContext(t *testing.T) {
	ep, ft, rec := newEndpoint(t)
	ctx := context.Background()
	for _, delegated := range []bool{true, false} {
		call := agentd.ToolCall{ID: "call_x", Name: "sync", TenantID: "t1", ProjectID: "p1", Delegated: delegated}
		env, closeCtx := ep.Open(call, true, []string{"lookup"}, false)
		token := tokenOf(t, env)
		if _, err := ep.Request(ctx, token, json.RawMessage(`{"connection":"api","method":"POST","endpoint":"/pay"}`)); err != nil {
			t.Fatal(err)
		}
		if res, err := ep.CallTool(ctx, token, "lookup", nil); err != nil || res.(*ChildResult).Status != agentd.StatusCompleted {
			t.Fatalf("lookup: %v %v", res, err)
		}
		closeCtx()
		n := len(rec.delegated)
		if rec.delegated[n-1] != delegated || ft.calls[len(ft.calls)-1].Delegated != delegated {
			t.Errorf("a call delegated %v: its request asked delegated %v, its child delegated %v",
				delegated, rec.delegated[n-1], ft.calls[len(ft.calls)-1].Delegated)
		}
	}
}
