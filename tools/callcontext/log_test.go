package callcontext

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// logLines parses the JSON lines zerolog wrote to buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// messages returns the lines of buf whose message is msg.
func messages(t *testing.T, buf *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range logLines(t, buf) {
		if m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// The operator's log has one line per request of the context endpoint: its
// outcome (performed, preview, journaled for a durable call's replayed
// answer, the error's code and reason for a failed one), and the child's
// ordinal only in a durable call (an inline call's requests have none).
func TestRequestLog(t *testing.T) {
	ep, _, ds := durableEndpoint(t)
	var buf bytes.Buffer
	ep.log = zerolog.New(&buf)
	ctx := context.Background()

	env, closeInline := ep.Open(agentd.ToolCall{ID: "call_i", Name: "inline", TenantID: "t1"}, true, nil, false)
	if _, err := ep.Request(ctx, tokenOf(t, env), json.RawMessage(`{"endpoint":"/a"}`)); err != nil {
		t.Fatal(err)
	}
	closeInline()
	call := agentd.ToolCall{ID: "call_d", Name: "sync", TenantID: "t1", ProjectID: "p1"}
	for range 2 { // the second run replays the first request
		run(t, ep, call, func(token string) {
			_, _ = ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/a"}`))
			_, _ = ep.Request(ctx, token, json.RawMessage(`{"preview":true}`))
			_, _ = ep.Request(ctx, token, json.RawMessage(`{"down":true}`))
		})
	}
	if ds.count() != 2 {
		t.Fatalf("%d sent, want 2 (the inline request, the durable one once)", ds.count())
	}
	type want struct {
		call    string
		ordinal float64 // 0: no ordinal field
		outcome string
		reason  string
	}
	wants := []want{
		{"call_i", 0, "performed", ""},
		{"call_d", 1, "performed", ""}, {"call_d", 2, "preview", ""}, {"call_d", 3, agentd.EUNAVAILABLE, `connection "api" failed`},
		{"call_d", 1, "journaled", ""}, {"call_d", 2, "preview", ""}, {"call_d", 3, agentd.EUNAVAILABLE, `connection "api" failed`},
	}
	got := messages(t, &buf, "context endpoint request")
	if len(got) != len(wants) {
		t.Fatalf("%d request lines, want %d:\n%s", len(got), len(wants), buf.String())
	}
	for i, w := range wants {
		g := got[i]
		ordinal, hasOrdinal := g["ordinal"].(float64)
		reason, _ := g["reason"].(string)
		if g["tool_call_id"] != w.call || g["tenant_id"] != "t1" || g["outcome"] != w.outcome ||
			hasOrdinal != (w.ordinal > 0) || ordinal != w.ordinal || !strings.Contains(reason, w.reason) || (w.reason == "") != (reason == "") {
			t.Errorf("line %d = %v, want %+v", i, g, w)
		}
	}
}

// faultyJournal is a journal that can be told to fail its reads or its
// writes; otherwise it keeps its entries in memory.
type faultyJournal struct {
	mu         sync.Mutex
	entries    map[string]agentd.JournalEntry // by call id and ordinal
	readFails  bool
	writeFails bool
}

func (f *faultyJournal) JournaledChild(_ context.Context, _, callID string, ordinal int) (*agentd.JournalEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readFails {
		return nil, errors.New("disk I/O error")
	}
	e, ok := f.entries[fmt.Sprintf("%s#%d", callID, ordinal)]
	if !ok {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "no entry")
	}
	return &e, nil
}

func (f *faultyJournal) JournalChild(_ context.Context, e agentd.JournalEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeFails {
		return errors.New("database is locked")
	}
	f.entries[fmt.Sprintf("%s#%d", e.ToolCallID, e.Ordinal)] = e
	return nil
}

// A journal that cannot be read fails a durable call's child with
// EUNAVAILABLE and sends nothing, on both routes: the endpoint cannot tell
// whether the child was sent before the restart. A journal that cannot be
// written leaves the answer standing and logs an error naming the child's
// ordinal; a journaled answer logs no error.
func TestJournalFailures(t *testing.T) {
	ep, ft, ds := newEndpointWith(t)
	j := &faultyJournal{entries: map[string]agentd.JournalEntry{}}
	ep.WireJournal(j)
	var buf bytes.Buffer
	ep.log = zerolog.New(&buf)
	ctx := context.Background()
	call := agentd.ToolCall{ID: "call_j", Name: "sync", TenantID: "t1", ProjectID: "p1"}
	notJournaled := "durable tool's child request not journaled"

	run(t, ep, call, func(token string) {
		if _, err := ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/a"}`)); err != nil {
			t.Fatal(err)
		}
	})
	if n := len(messages(t, &buf, notJournaled)); n != 0 || len(j.entries) != 1 {
		t.Fatalf("a journaled answer: %d error lines, %d entries; want none and 1", n, len(j.entries))
	}

	j.readFails = true
	run(t, ep, call, func(token string) {
		if out, err := ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/a"}`)); code(err) != agentd.EUNAVAILABLE ||
			!strings.Contains(err.Error(), `the journal of durable tool "sync" could not be read`) || out != nil {
			t.Errorf("request with an unreadable journal: %v %v, want EUNAVAILABLE", out, err)
		}
		if out, err := ep.CallTool(ctx, token, "lookup", nil); code(err) != agentd.EUNAVAILABLE || out != nil {
			t.Errorf("child call with an unreadable journal: %v %v, want EUNAVAILABLE", out, err)
		}
	})
	if ds.count() != 1 || len(ft.calls) != 0 {
		t.Fatalf("%d sent, %d child calls; want the first request only", ds.count(), len(ft.calls))
	}

	j.readFails, j.writeFails = false, true
	run(t, ep, agentd.ToolCall{ID: "call_w", Name: "sync", TenantID: "t1"}, func(token string) {
		if out, err := ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/b"}`)); err != nil || !strings.Contains(asJSON(t, out), `"status":200`) {
			t.Errorf("request with an unwritable journal: %v %v, want its answer", out, err)
		}
	})
	lines := messages(t, &buf, notJournaled)
	if len(lines) != 1 || lines[0]["level"] != "error" || lines[0]["tool_call_id"] != "call_w" || lines[0]["ordinal"] != float64(1) ||
		!strings.Contains(lines[0]["error"].(string), "database is locked") {
		t.Fatalf("an unwritable journal: lines %v, want one error naming call_w's ordinal 1", lines)
	}
}

// newEndpointWith is newEndpoint with the downstream of the durable tests
// as its connections and no journal.
func newEndpointWith(t *testing.T) (*Endpoint, *fakeTools, *downstream) {
	t.Helper()
	ep, ft, _ := newEndpoint(t)
	ds := &downstream{}
	ep.Wire(ft, ds)
	return ep, ft, ds
}

// A child whose tool's Prepare refuses the call (a file tool's path
// outside the workspace) is refused EINVALID with Prepare's reason, and
// does not run.
func TestChildPrepareRefuses(t *testing.T) {
	ep, ft, _ := newEndpoint(t)
	edit := tool("edit", confirm.ExposureOpen, "", nil)
	edit.Prepare = func(_ context.Context, args json.RawMessage) (toolset.Preparation, error) {
		if strings.Contains(string(args), "..") {
			return toolset.Preparation{}, errors.New(`path "../etc/passwd" leads outside the workspace`)
		}
		return toolset.Preparation{}, nil
	}
	ft.defs["edit"] = edit
	env, closeCtx := ep.Open(agentd.ToolCall{ID: "call_p", Name: "fix", TenantID: "t1"}, false, []string{"edit"}, false)
	defer closeCtx()
	token := tokenOf(t, env)
	out, err := ep.CallTool(context.Background(), token, "edit", json.RawMessage(`{"path":"../etc/passwd"}`))
	if code(err) != agentd.EINVALID || !strings.Contains(err.Error(), "leads outside the workspace") || out != nil {
		t.Fatalf("a refused preparation: %v %v, want EINVALID with its reason", out, err)
	}
	if len(ft.calls) != 0 {
		t.Fatalf("the refused child ran: %+v", ft.calls)
	}
	if res, err := ep.CallTool(context.Background(), token, "edit", json.RawMessage(`{"path":"a.txt"}`)); err != nil ||
		res.(*ChildResult).Status != agentd.StatusCompleted {
		t.Fatalf("a prepared child: %v %v", res, err)
	}
}
