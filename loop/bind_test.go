package loop_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
)

// stateBox is a tool's mutable outside state (a file's content).
type stateBox struct {
	mu sync.Mutex
	s  string
}

func (b *stateBox) get() string  { b.mu.Lock(); defer b.mu.Unlock(); return b.s }
func (b *stateBox) set(s string) { b.mu.Lock(); b.s = s; b.mu.Unlock() }

// card is the n-th confirmation_required.
func (f *parkFixture) card(t *testing.T, n int) agentd.ConfirmationRequiredPayload {
	t.Helper()
	var p agentd.ConfirmationRequiredPayload
	if err := json.Unmarshal(f.rec.wait(t, agentd.EventConfirmationRequired, n).Data, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// reparked parks a pay call whose state changes after its card, approves
// it with the card's digest and returns the fixture, the call and its first
// card once the call is parked again with its second card.
func reparked(t *testing.T) (*parkFixture, *stateBox, agentd.ConfirmationRequiredPayload) {
	t.Helper()
	box := &stateBox{s: "s1"}
	f := newPark(t, "", parkOpts{tool: &gatedTool{state: box.get}})
	f.send(t, "pay")
	first := f.card(t, 1)
	if first.CardRevision != 0 {
		t.Fatalf("a first card carries card_revision %d", first.CardRevision)
	}
	box.set("s2")
	if _, err := f.engine.Decide(context.Background(), f.p, first.ToolCallID,
		agentd.DecisionRequest{Decision: "approve", ArgumentsSHA256: first.ArgumentsSHA256}); err != nil {
		t.Fatal(err)
	}
	second := f.card(t, 2)
	if second.ToolCallID != first.ToolCallID || second.CardRevision != 2 || second.ArgumentsSHA256 != first.ArgumentsSHA256 {
		t.Fatalf("second card: %+v", second)
	}
	return f, box, first
}

// Issue 17 finding 1: a decision is bound to the card it answers. The
// first card's approval, repeated on any door and in any form, never
// becomes a decision on the card the call was parked again with.
func TestRepeatedApprovalDoesNotDecideTheNewCard(t *testing.T) {
	f, _, first := reparked(t)
	ctx, id, digest := context.Background(), first.ToolCallID, first.ArgumentsSHA256
	for name, req := range map[string]agentd.DecisionRequest{
		"with the digest":      {Decision: "approve", ArgumentsSHA256: digest},
		"bare":                 {Decision: "approve"},
		"naming card 1":        {Decision: "approve", CardRevision: 1, ArgumentsSHA256: digest},
		"a deny of card 1":     {Decision: "deny"},
		"a protocol's answer":  {Decision: "approve", CardRevision: 1, Via: agentd.ViaProtocol},
		"an edit of card 1":    {Decision: "edit", Arguments: json.RawMessage(`{}`)},
		"card 2, other digest": {Decision: "approve", CardRevision: 2, ArgumentsSHA256: "0000000000000000000000000000000000000000000000000000000000000000"},
	} {
		if _, err := f.engine.Decide(ctx, f.p, id, req); agentd.ErrorCode(err) != agentd.ESTALE {
			t.Errorf("%s: %v, want stale", name, err)
		}
	}
	if _, err := f.engine.Decide(ctx, f.p, id, agentd.DecisionRequest{Decision: "approve", CardRevision: 3}); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Errorf("card 3: %v, want conflict", err)
	}
	for _, atomic := range []bool{false, true} {
		res, err := f.engine.DecideBatch(ctx, f.p, []agentd.BatchDecisionItem{{ToolCallID: id, Approve: true, ArgumentsSHA256: digest}}, atomic)
		if err != nil {
			t.Fatal(err)
		}
		wantResults(t, res, []string{id}, agentd.ESTALE)
	}
	c, err := f.engine.ToolCall(ctx, f.p, id)
	if err != nil || c.Status != agentd.StatusRequiresConfirmation || len(c.Decisions) != 1 || f.tool.count() != 0 || c.CardRevision() != 2 {
		t.Fatalf("after the repeats: %+v %v (ran %d)", c, err, f.tool.count())
	}
	// The second card, named, is decided; its repeat is idempotent, the
	// first card's still stale.
	dec, err := f.engine.Decide(ctx, f.p, id, agentd.DecisionRequest{Decision: "approve", CardRevision: 2, ArgumentsSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	again, err := f.engine.Decide(ctx, f.p, id, agentd.DecisionRequest{Decision: "approve", CardRevision: 2})
	if err != nil || again.ID != dec.ID {
		t.Errorf("repeat of card 2: %+v %v, want %s", again, err, dec.ID)
	}
	if _, err := f.engine.Decide(ctx, f.p, id, agentd.DecisionRequest{Decision: "approve", ArgumentsSHA256: digest}); agentd.ErrorCode(err) != agentd.ESTALE {
		t.Errorf("repeat of card 1 after card 2: %v, want stale", err)
	}
	if n := f.tool.count(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

// The bulk door names the card too.
func TestBulkDecisionNamesTheCard(t *testing.T) {
	f, _, first := reparked(t)
	id := first.ToolCallID
	res, err := f.engine.DecideBatch(context.Background(), f.p, []agentd.BatchDecisionItem{{ToolCallID: id, Approve: true, CardRevision: 2}}, true)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, res, []string{id}, agentd.BatchApplied)
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if n := f.tool.count(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}
