package seed_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/seed"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
)

// markTool is a requires-confirmation tool that does nothing.
type markTool struct{}

func (markTool) Tools() []toolset.Tool {
	return []toolset.Tool{{
		Spec:        agentd.ToolSpec{Name: "mark", Description: "mark", Parameters: json.RawMessage(`{"type":"object"}`)},
		Confirm:     &confirm.Tool{Name: "mark", ServerID: "tools", Exposure: confirm.ExposureRequiresConfirmation},
		LLMCallable: true,
	}}
}
func (markTool) Execute(context.Context, agentd.ToolCall) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

// callMark calls mark once per run.
type callMark struct{}

func (callMark) Generate(_ context.Context, req agentd.ModelRequest, _ func(string)) (*agentd.ModelResponse, error) {
	return &agentd.ModelResponse{StopReason: "tool_calls", ToolCalls: []agentd.ModelToolCall{{Name: "mark", Arguments: json.RawMessage(`{}`)}}}, nil
}

// waiter is a Publisher that lets the test wait for run_waiting.
type waiter struct {
	once sync.Once
	ch   chan struct{}
}

func (w *waiter) Publish(e agentd.Event) {
	if e.Type == agentd.EventRunWaiting {
		w.once.Do(func() { close(w.ch) })
	}
}

// parkWithLoop parks one call of mark through the real loop and returns
// the conversation id.
func parkWithLoop(t *testing.T, path string, now time.Time) string {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := &waiter{ch: make(chan struct{})}
	e := loop.New(st, w, &loop.Agent{Name: "a", Model: callMark{}, Tools: markTool{}},
		loop.Options{Clock: fixedClock{now}, ExpireEvery: -1})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := e.CreateConversation(context.Background(), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Send(context.Background(), p, conv.ID, "go"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not park the call")
	}
	return conv.ID
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// parkedRun is what the store holds of a parked run, without ids and times.
type parkedRun struct {
	run    agentd.Run
	msgs   []agentd.Message
	call   agentd.ToolCall
	events []string
}

func read(t *testing.T, st agentd.Store, convID string) parkedRun {
	t.Helper()
	ctx := context.Background()
	calls, err := st.ToolCalls(ctx, convID)
	if err != nil || len(calls) != 1 {
		t.Fatalf("calls of %s: %v %v", convID, calls, err)
	}
	run, err := st.Run(ctx, calls[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := st.Messages(ctx, convID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(ctx, convID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := parkedRun{run: *run, msgs: msgs, call: calls[0]}
	for _, e := range evs {
		if _, err := agentd.DecodeEvent(e); err != nil {
			t.Errorf("event %d of %s: %v", e.Seq, convID, err)
		}
		out.events = append(out.events, e.Type)
	}
	return out
}

// TestSeededRunsAreParkedRuns checks that a seeded run reads back through
// the store as a run the loop parked, and that the store sees the seeded
// calls as parked.
func TestSeededRunsAreParkedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	loopConv := parkWithLoop(t, path, now)
	ids, err := seed.Parked{TenantID: "t1", ProjectID: "p1", CreatedBy: "k1", Agent: "a", Tool: "mark", Now: now, Batch: 2,
		Deadline: func(i int) time.Time { return now.Add(time.Duration(15-i) * time.Minute) }}.Write(context.Background(), path, 3)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	want := read(t, st, loopConv)
	for _, id := range ids {
		c, err := st.ToolCall(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := read(t, st, c.ConversationID)
		r, w := got.run, want.run
		if r.Status != w.Status || r.Step != w.Step || r.StopReason != w.StopReason || r.TenantID != w.TenantID || r.CorrelationID != got.call.CorrelationID {
			t.Errorf("seeded run %+v, the loop's %+v", r, w)
		}
		if len(got.msgs) != len(want.msgs) || got.msgs[0].Content != want.msgs[0].Content || got.msgs[1].Role != want.msgs[1].Role ||
			got.msgs[1].Content != want.msgs[1].Content || got.call.MessageID != got.msgs[1].ID {
			t.Errorf("seeded messages %+v, the loop's %+v", got.msgs, want.msgs)
		}
		g, l := got.call, want.call
		if g.Name != l.Name || g.ServerID != l.ServerID || string(g.Arguments) != string(l.Arguments) || g.ArgumentsSHA256 != l.ArgumentsSHA256 ||
			g.Tier != l.Tier || g.Reason != l.Reason || g.Method != l.Method || g.Endpoint != l.Endpoint || g.Status != l.Status ||
			g.Step != l.Step || g.Index != l.Index || !slices.Equal(g.AllowedDecisions, l.AllowedDecisions) || g.RunID != r.ID {
			t.Errorf("seeded call %+v, the loop's %+v", g, l)
		}
		if !slices.Equal(got.events, want.events) {
			t.Errorf("seeded log %v, the loop's %v", got.events, want.events)
		}
	}
	if runs, err := st.RunsToDrive(ctx); err != nil || len(runs) != 0 {
		t.Errorf("RunsToDrive = %v, %v; want none", runs, err)
	}
	if next, err := st.NextDeadline(ctx, time.Time{}); err != nil || !next.Equal(now.Add(13*time.Minute)) {
		t.Errorf("NextDeadline = %v, %v; want the third seeded call's", next, err)
	}
	pending, err := st.PendingToolCalls(ctx, agentd.PendingFilter{TenantID: "t1", ProjectID: "p1", CreatedBy: "k1", Limit: 10})
	if err != nil || len(pending) != 4 {
		t.Errorf("PendingToolCalls = %d calls, %v; want 4", len(pending), err)
	}
}
