package loop_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
)

// slowRead holds the read of a call when armed: the reader keeps its snapshot
// while the world moves on. Only a read whose context carries slowKey is
// held (the decision's, not the run driver's reads of its step's calls).
type slowRead struct {
	*sqlite.DB
	mu    sync.Mutex
	armed chan struct{} // closed to release
	read  chan struct{}
}

type slowKey struct{}

func (s *slowRead) ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error) {
	c, err := s.DB.ToolCall(ctx, id)
	if ctx.Value(slowKey{}) == nil {
		return c, err
	}
	s.mu.Lock()
	gate, read := s.armed, s.read
	s.armed = nil
	s.mu.Unlock()
	if gate != nil {
		close(read)
		<-gate
	}
	return c, err
}

// TestConcurrentRepeatDoesNotDecideTheNewCard: the same approval sent twice
// at once, where the second was planned on card 1 but commits after the
// first was approved and the call parked again (its file changed), is
// ESTALE and decides nothing: the commit is conditional on the card
// (CallUpdate.CardRevision), not only on the status.
func TestConcurrentRepeatDoesNotDecideTheNewCard(t *testing.T) {
	box := &stateBox{s: "s1"}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sr := &slowRead{DB: st}
	tool := &gatedTool{state: box.get}
	billing, _ := newBillingTools(t)
	tools := registered(t, append(billing, tool)...)
	f := &parkFixture{store: st, rec: newRecorder(), clock: &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}, model: &byMessage{}, tool: tool,
		p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	f.engine = loop.New(sr, f.rec, &loop.Agent{Name: "a", Model: f.model, Tools: tools, ApprovalTimeout: 10 * time.Minute, MaxTurns: 5}, loop.Options{Clock: f.clock, ExpireEvery: -1})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer f.engine.Close()
	f.send(t, "pay")
	first := f.card(t, 1)
	box.set("s2")
	req := agentd.DecisionRequest{Decision: "approve", ArgumentsSHA256: first.ArgumentsSHA256}
	gate, read := make(chan struct{}), make(chan struct{})
	sr.mu.Lock()
	sr.armed, sr.read = gate, read
	sr.mu.Unlock()
	type res struct {
		d   *agentd.Decision
		err error
	}
	r2 := make(chan res, 1)
	go func() { // the same click, sent twice (two tabs, a retry)
		d, err := f.engine.Decide(context.WithValue(context.Background(), slowKey{}, true), f.p, first.ToolCallID, req)
		r2 <- res{d, err}
	}()
	<-read
	if _, err := f.engine.Decide(context.Background(), f.p, first.ToolCallID, req); err != nil {
		t.Fatal(err)
	}
	f.card(t, 2) // parked again: the file changed
	close(gate)
	r := <-r2
	if agentd.ErrorCode(r.err) != agentd.ESTALE {
		t.Fatalf("the concurrent repeat of card 1's approval: %+v, %v; want ESTALE (card 2 was never seen)", r.d, r.err)
	}
	c, err := st.ToolCall(context.Background(), first.ToolCallID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != agentd.StatusRequiresConfirmation || len(c.Decisions) != 1 || c.CardRevision() != 2 {
		t.Fatalf("after the refused repeat: status %s with %d decisions (card %d), want card 2 pending", c.Status, len(c.Decisions), c.CardRevision())
	}
}
