package loop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/tools"
)

// eventsModel answers by the conversation's first user message: "pay"
// makes a step with text and three calls (confirm, auto, unknown), then
// ends; "park" parks one call; "fail" fails.
type eventsModel struct{}

func (eventsModel) Generate(_ context.Context, req agentd.ModelRequest, onDelta func(string)) (*agentd.ModelResponse, error) {
	steps := 0
	for _, m := range req.Messages {
		if m.Role == agentd.ModelRoleAssistant {
			steps++
		}
	}
	switch first := req.Messages[0].Content; {
	case first == "fail":
		return nil, agentd.Errorf(agentd.EUNAVAILABLE, "the provider is overloaded")
	case first == "park" && steps == 0:
		return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{"amount":1}`)}}}, nil
	case first == "pay" && steps == 0:
		onDelta("paying")
		return &agentd.ModelResponse{Text: "paying", StopReason: "tool_calls", ToolCalls: []agentd.ModelToolCall{
			{Name: "pay", Arguments: json.RawMessage(`{"amount":3}`)},
			{Name: "record", Arguments: json.RawMessage(`{}`)},
			{Name: "nosuch", Arguments: json.RawMessage(`{}`)},
		}}, nil
	}
	onDelta("done")
	return &agentd.ModelResponse{Text: "done", StopReason: "end_turn"}, nil
}

// newEventsEngine is an engine with eventsModel and the test tools.
func newEventsEngine(t *testing.T) (*loop.Engine, *sqlite.DB, *recorder, *fakeClock) {
	t.Helper()
	ts, _ := writeTools(t)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	clock := &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	engine := loop.New(st, rec, &loop.Agent{Name: "a", Model: eventsModel{}, Tools: registered(t, tools.NewSource(ts)), MaxTurns: 5},
		loop.Options{Clock: clock, ExpireEvery: -1})
	if err := engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close(); st.Close() })
	return engine, st, rec, clock
}

// TestEveryEventDecodes runs conversations that produce every event type
// the loop emits and decodes each event of their logs with
// agentd.DecodeEvent.
func TestEveryEventDecodes(t *testing.T) {
	engine, st, rec, clock := newEventsEngine(t)
	ctx := context.Background()
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	send := func(content string) string {
		t.Helper()
		conv, err := engine.CreateConversation(ctx, p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Send(ctx, p, conv.ID, content); err != nil {
			t.Fatal(err)
		}
		return conv.ID
	}
	parked := func(n int) *agentd.ConfirmationRequiredPayload {
		t.Helper()
		ev := rec.wait(t, agentd.EventConfirmationRequired, n)
		pl, err := agentd.DecodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		return pl.(*agentd.ConfirmationRequiredPayload)
	}

	convs := []string{send("pay")}
	cr := parked(1)
	rec.wait(t, agentd.EventRunWaiting, 1)
	if _, err := engine.Decide(ctx, p, cr.ToolCallID, agentd.DecisionRequest{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, agentd.EventRunFinished, 1)
	convs = append(convs, send("fail"))
	rec.wait(t, agentd.EventRunFinished, 2)
	convs = append(convs, send("park"))
	if _, err := engine.Cancel(ctx, p, parked(2).RunID); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	for _, conv := range convs {
		evs, err := st.Events(ctx, conv, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			pl, err := agentd.DecodeEvent(e)
			if err != nil {
				t.Fatalf("event %d: %v: %s", e.Seq, err, e.Data)
			}
			if h := pl.Header(); pl.EventType() != e.Type || h.ConversationID != conv || !h.Timestamp.Equal(clock.Now()) {
				t.Fatalf("event %d %s: header %+v", e.Seq, e.Type, h)
			}
			seen[e.Type]++
		}
	}
	for _, typ := range []string{
		agentd.EventRunStarted, agentd.EventTextDelta, agentd.EventMessage, agentd.EventToolCallStarted,
		agentd.EventConfirmationRequired, agentd.EventConfirmationResolved, agentd.EventToolCallRefused,
		agentd.EventToolCallResult, agentd.EventRunWaiting, agentd.EventRunFinished, agentd.EventError,
	} {
		if seen[typ] == 0 {
			t.Errorf("no %s event among %v", typ, seen)
		}
	}
	if len(seen) != 11 {
		t.Errorf("event types %v, want the 11 above", seen)
	}
}
