package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// Group commit (agentd.Store, docs/storage.md): writes that arrive while a
// commit is in flight share the next commit; each caller learns its own
// sequence numbers, positions and error after that commit; a failed commit
// fails every caller in it and writes nothing of theirs; one caller's own
// failure (a conditional transition's ECONFLICT, an ENOTFOUND) fails no
// other caller of its group.
//
// The cases steer the backend's commits through Backend.BeforeCommit: a
// gate holds one commit in flight while the writers of a burst arrive, so
// they queue for the next commit together, and may fail a chosen commit.
// Without BeforeCommit the bursts still run concurrently, unheld, and the
// forced-failure case is skipped.

// errForced is the error the gate fails a commit with.
var errForced = errors.New("storetest: commit failed on purpose")

// gate is the suite's hook before each commit (Backend.BeforeCommit).
type gate struct {
	mu sync.Mutex
	// hold, when set, is the next commit's hold: held is closed when the
	// commit reaches it, and it waits until release is closed.
	hold          bool
	held, release chan struct{}
	// failAtLeast, when > 0, fails the next commit shared by at least that
	// many callers; failed records the size of each commit failed so.
	failAtLeast int
	failed      []int
	largest     int // the most callers any commit had
}

// newGate installs a gate on s, or returns nil when b cannot steer commits.
func newGate(t *testing.T, b Backend, s agentd.Store) *gate {
	if b.BeforeCommit == nil {
		return nil
	}
	g := &gate{}
	b.BeforeCommit(t, s, g.before)
	return g
}

func (g *gate) before(n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.largest = max(g.largest, n)
	if g.hold { // the held commit is never failed
		g.hold = false
		held, release := g.held, g.release
		g.mu.Unlock()
		close(held)
		<-release
		g.mu.Lock()
		return nil
	}
	if g.failAtLeast > 0 && n >= g.failAtLeast {
		g.failAtLeast = 0
		g.failed = append(g.failed, n)
		return errForced
	}
	return nil
}

// burst runs work(0..n-1) on n goroutines and waits for them. With a gate,
// it first holds a commit of conv in flight and releases it only once
// every goroutine has started, so their writes queue behind it and go into
// the next commits together.
func burst(t *testing.T, s agentd.Store, g *gate, conv string, n int, work func(i int)) {
	t.Helper()
	var held, release, heldDone chan struct{}
	if g != nil {
		held, release, heldDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
		g.mu.Lock()
		g.hold, g.held, g.release = true, held, release
		g.mu.Unlock()
		go func() {
			defer close(heldDone)
			if _, err := s.AppendEvents(context.Background(), []agentd.EventDraft{draft(conv, "held", `{}`)}); err != nil {
				t.Errorf("the held commit: %v", err)
			}
		}()
		select {
		case <-held:
		case <-heldDone: // the held append failed before its commit
			t.Fatalf("the held commit never reached the gate")
		}
	}
	var started, wg sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			started.Done()
			work(i)
		})
	}
	started.Wait()
	runtime.Gosched()
	if g != nil {
		close(release)
		<-heldDone
	}
	wg.Wait()
}

// wantShared fails unless some commit of the gate was shared by at least
// two callers.
func (g *gate) wantShared(t *testing.T) {
	t.Helper()
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.largest < 2 {
		t.Fatalf("no commit was shared by two writers (largest group %d): writes that arrive while a commit is in flight must share the next", g.largest)
	}
}

// groupWrite is what one call of a group-commit case wrote and was told.
type groupWrite struct {
	drafts []agentd.EventDraft
	evs    []agentd.Event
	msg    *agentd.Message // AddMessage's message, else nil
	err    error
	// missing: the write was to a conversation that does not exist.
	missing bool
}

// groupWriter makes call w of round r of a burst: an AppendEvents of
// events to the shared conversation and to the writer's own one, or two
// events to its own one only, or an AddMessage to its own one with one
// event; every seventh writer instead appends to a conversation that does
// not exist, which must fail alone (ENOTFOUND) in whatever group it lands.
func groupWriter(s agentd.Store, shared string, own []string, w, r int) groupWrite {
	ctx := context.Background()
	mine := own[w%len(own)]
	data := func(k int) string { return fmt.Sprintf(`{"w":%d,"r":%d,"k":%d}`, w, r, k) }
	var gw groupWrite
	switch {
	case w%7 == 6:
		gw = groupWrite{drafts: []agentd.EventDraft{draft("conv_missing", agentd.EventTextDelta, data(0))}, missing: true}
	case (w+r)%3 == 2:
		m := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: mine, Role: agentd.RoleAssistant,
			Content: data(0), CreatedAt: t0}
		gw = groupWrite{drafts: []agentd.EventDraft{draft(mine, agentd.EventTextDelta, data(0))}, msg: m}
		gw.evs, gw.err = s.AddMessage(ctx, m, gw.drafts)
		return gw
	case (w+r)%3 == 1:
		gw = groupWrite{drafts: []agentd.EventDraft{draft(mine, agentd.EventTextDelta, data(0)), draft(mine, agentd.EventTextDelta, data(1))}}
	default:
		gw = groupWrite{drafts: []agentd.EventDraft{
			draft(shared, agentd.EventTextDelta, data(0)), draft(mine, agentd.EventTextDelta, data(1)), draft(shared, agentd.EventTextDelta, data(2)),
		}}
	}
	gw.evs, gw.err = s.AppendEvents(ctx, gw.drafts)
	return gw
}

// runGroupWrites runs workers×rounds groupWriter calls in bursts of
// workers and returns what each was told.
func runGroupWrites(t *testing.T, s agentd.Store, g *gate, shared string, own []string, workers, rounds int) []groupWrite {
	out := make([]groupWrite, workers*rounds)
	for r := range rounds {
		burst(t, s, g, shared, workers, func(w int) {
			out[r*workers+w] = groupWriter(s, shared, own, w, r)
		})
	}
	return out
}

// checkTold checks one successful call's events against its drafts: its own
// data, in order, each conversation's seqs consecutive within the call
// (no other caller's event between them) and positions increasing.
func checkTold(t *testing.T, gw groupWrite) {
	t.Helper()
	if len(gw.evs) != len(gw.drafts) {
		t.Fatalf("%d events returned for %d drafts", len(gw.evs), len(gw.drafts))
	}
	last := map[string]int64{}
	for i, e := range gw.evs {
		d := gw.drafts[i]
		if e.ConversationID != d.ConversationID || e.Type != d.Type || string(e.Data) != string(d.Data) {
			t.Fatalf("event %d returned = %+v, want this caller's draft %+v", i, e, d)
		}
		if prev, ok := last[e.ConversationID]; ok && e.Seq != prev+1 {
			t.Fatalf("a call's events of %s got seqs %d then %d, want consecutive", e.ConversationID, prev, e.Seq)
		}
		last[e.ConversationID] = e.Seq
		if i > 0 && e.Position <= gw.evs[i-1].Position {
			t.Fatalf("a call's positions %d then %d, want increasing", gw.evs[i-1].Position, e.Position)
		}
	}
}

// checkGroupLog checks the logs against what the calls were told: every
// successful call's events are stored as returned (same conversation, seq,
// position, data) and its message exists; no failed call's event or message
// is stored; each conversation's seqs are 1..n with no gap besides skip
// (events not written by a call of writes, as the held ones); positions are
// unique and, within a conversation, in seq order.
func checkGroupLog(t *testing.T, s agentd.Store, convs []string, writes []groupWrite) {
	t.Helper()
	type key struct {
		conv string
		seq  int64
	}
	told := map[key]agentd.Event{}
	failedData := map[string]bool{}
	msgs := map[string]bool{} // message id → should exist
	for _, gw := range writes {
		if gw.msg != nil {
			msgs[gw.msg.ID] = gw.err == nil
		}
		if gw.err != nil {
			for _, d := range gw.drafts {
				failedData[d.ConversationID+string(d.Data)] = true
			}
			continue
		}
		checkTold(t, gw)
		for _, e := range gw.evs {
			told[key{e.ConversationID, e.Seq}] = e
		}
	}
	positions := map[int64]bool{}
	found := 0
	for _, conv := range convs {
		var lastPos int64
		for i, e := range allEvents(t, s, conv) {
			if e.Seq != int64(i+1) {
				t.Fatalf("%s: event %d has seq %d: a gap", conv, i, e.Seq)
			}
			if positions[e.Position] || e.Position <= lastPos {
				t.Fatalf("%s seq %d: position %d repeated or not after %d", conv, e.Seq, e.Position, lastPos)
			}
			positions[e.Position], lastPos = true, e.Position
			if failedData[conv+string(e.Data)] {
				t.Fatalf("%s seq %d: %s is stored, but its call failed", conv, e.Seq, e.Data)
			}
			if e.Type == "held" {
				continue
			}
			want, ok := told[key{conv, e.Seq}]
			if !ok || want.Position != e.Position || string(want.Data) != string(e.Data) {
				t.Fatalf("%s seq %d: stored %+v, its caller was told %+v", conv, e.Seq, e, want)
			}
			found++
		}
	}
	if found != len(told) {
		t.Fatalf("%d events stored, callers were told of %d", found, len(told))
	}
	checkGroupMessages(t, s, convs, msgs)
}

// checkGroupMessages fails unless exactly the messages marked true in want
// exist among convs' messages.
func checkGroupMessages(t *testing.T, s agentd.Store, convs []string, want map[string]bool) {
	t.Helper()
	stored := map[string]bool{}
	for _, conv := range convs {
		ms, err := s.Messages(context.Background(), conv)
		noErr(t, err, "Messages")
		for _, m := range ms {
			stored[m.ID] = true
		}
	}
	for id, ok := range want {
		if stored[id] != ok {
			t.Fatalf("message %s stored = %v, want %v (its call's outcome)", id, stored[id], ok)
		}
	}
}

// groupConvs creates the shared conversation and n own ones.
func groupConvs(t *testing.T, s agentd.Store, n int) (string, []string, []string) {
	shared := newConversation(t, s).ID
	own := make([]string, n)
	for i := range own {
		own[i] = newConversation(t, s).ID
	}
	return shared, own, append([]string{shared}, own...)
}

// testGroupConcurrentWriters: bursts of writers to one shared and several
// own conversations, each burst queued behind a held commit. Every caller
// is told its own events, with consecutive seqs per conversation; the logs
// are gap-free and hold exactly what callers were told.
func testGroupConcurrentWriters(t *testing.T, b Backend) {
	s := b.Open(t)
	g := newGate(t, b, s)
	shared, own, all := groupConvs(t, s, 5)
	writes := runGroupWrites(t, s, g, shared, own, 24, 3)
	for i, gw := range writes {
		if gw.missing != (gw.err != nil) || gw.missing && agentd.ErrorCode(gw.err) != agentd.ENOTFOUND {
			t.Fatalf("write %d (to a missing conversation: %v): %v", i, gw.missing, gw.err)
		}
	}
	g.wantShared(t)
	checkGroupLog(t, s, all, writes)
}

// testGroupFailedCommit fails the first commit shared by two or more
// callers: every caller of it gets an error and nothing of theirs (events,
// messages) is stored; every other caller succeeds; seqs stay gap-free and
// later writes go on.
func testGroupFailedCommit(t *testing.T, b Backend) {
	s := b.Open(t)
	g := newGate(t, b, s)
	if g == nil {
		t.Skip("the backend cannot fail a commit on purpose (Backend.BeforeCommit)")
	}
	shared, own, all := groupConvs(t, s, 5)
	g.mu.Lock()
	g.failAtLeast = 2
	g.mu.Unlock()
	writes := runGroupWrites(t, s, g, shared, own, 24, 3)
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if len(failed) != 1 {
		t.Fatalf("commits failed on purpose: %v, want one shared by two or more callers", failed)
	}
	errs := 0
	for i, gw := range writes {
		switch {
		case gw.err == nil && !gw.missing, gw.missing && agentd.ErrorCode(gw.err) == agentd.ENOTFOUND:
		case errors.Is(gw.err, errForced):
			errs++
		default:
			t.Fatalf("write %d: %v, want nil or the failed commit's error", i, gw.err)
		}
	}
	if errs != failed[0] {
		t.Fatalf("%d callers got an error, but the failed commit had %d: every caller in it, and no other, must fail", errs, failed[0])
	}
	checkGroupLog(t, s, all, writes)
	evs, err := s.AppendEvents(context.Background(), []agentd.EventDraft{draft(shared, agentd.EventTextDelta, `{"after":true}`)})
	noErr(t, err, "AppendEvents after the failed commit")
	if n := int64(len(allEvents(t, s, shared))); evs[0].Seq != n {
		t.Fatalf("seq after the failed commit = %d, want %d", evs[0].Seq, n)
	}
}

// testGroupConditionalTransitions: n approvals of one parked call, n
// appends to another conversation and n updates of a call that does not
// exist, in one burst queued behind a held commit. Exactly one approval
// wins; the others get ECONFLICT with the current call; the missing call's
// updates get ENOTFOUND; every append succeeds and is stored: no caller's
// own failure undid another's write.
func testGroupConditionalTransitions(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t)
	g := newGate(t, b, s)
	conv := newConversation(t, s)
	other := newConversation(t, s)
	c := newCall(startRun(t, s, conv), 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)

	const n = 12
	type outcome struct {
		call *agentd.ToolCall
		evs  []agentd.Event
		err  error
	}
	out := make([]outcome, 3*n)
	burst(t, s, g, other.ID, 3*n, func(i int) {
		o := &out[i]
		switch by := fmt.Sprintf("approver-%d", i); i % 3 {
		case 0:
			o.call, o.evs, o.err = s.UpdateToolCall(ctx, approval(c.ID, by, at(time.Minute)),
				[]agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, fmt.Sprintf(`{"by":%q}`, by))})
		case 1:
			o.evs, o.err = s.AppendEvents(ctx, []agentd.EventDraft{draft(other.ID, agentd.EventTextDelta, fmt.Sprintf(`{"i":%d}`, i))})
		case 2:
			if i%2 == 0 {
				o.call, o.evs, o.err = s.UpdateToolCall(ctx, approval(agentd.NewID(agentd.PrefixToolCall), by, at(time.Minute)),
					[]agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, `{"missing":true}`)})
				return
			}
			// The message is inserted before the event fails: the
			// failure must take the message with it, and nothing else.
			m := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, Role: agentd.RoleAssistant, CreatedAt: t0}
			o.evs, o.err = s.AddMessage(ctx, m, []agentd.EventDraft{draft(agentd.NewID(agentd.PrefixConversation), agentd.EventTextDelta, `{}`)})
		}
	})
	winner := checkTransitionOutcomes(t, c.ID, func(i int) (*agentd.ToolCall, []agentd.Event, error) {
		return out[i].call, out[i].evs, out[i].err
	}, 3*n)
	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if got.Status != agentd.StatusExecuting || len(got.Decisions) != 1 || got.Decisions[0].DecidedBy != fmt.Sprintf("approver-%d", winner) {
		t.Fatalf("stored call %s with decisions %+v, want executing with approver-%d's one decision", got.Status, got.Decisions, winner)
	}
	wantSeqs(t, "the call's conversation", allEvents(t, s, conv.ID), 1)
	want := n // the appends
	if g != nil {
		want++ // and the held one, with a backend that can hold a commit
	}
	if evs := allEvents(t, s, other.ID); len(evs) != want {
		t.Fatalf("the other conversation has %d events, want %d", len(evs), want)
	}
	ms, err := s.Messages(ctx, conv.ID)
	noErr(t, err, "Messages")
	if len(ms) != 1 { // the run's user message
		t.Fatalf("the call's conversation has %d messages, want 1: a failed AddMessage left its message", len(ms))
	}
	g.wantShared(t)
}

// checkTransitionOutcomes checks testGroupConditionalTransitions' outcomes
// (by index mod 3: approval, append, update of a missing call) and returns
// the winning approval's index.
func checkTransitionOutcomes(t *testing.T, callID string, get func(i int) (*agentd.ToolCall, []agentd.Event, error), n int) int {
	t.Helper()
	winner := -1
	for i := range n {
		call, evs, err := get(i)
		switch {
		case i%3 == 1 && err != nil:
			t.Fatalf("append %d in the group: %v", i, err)
		case i%3 == 2:
			wantCode(t, err, agentd.ENOTFOUND)
		case i%3 == 0 && err == nil:
			if winner >= 0 {
				t.Fatalf("approvals %d and %d both won", winner, i)
			}
			winner = i
			if call.Status != agentd.StatusExecuting || len(evs) != 1 {
				t.Fatalf("the winner got call %s and events %v", call.Status, evs)
			}
		case i%3 == 0:
			wantCode(t, err, agentd.ECONFLICT)
			if call == nil || call.ID != callID || call.Status != agentd.StatusExecuting || len(call.Decisions) != 1 || len(evs) != 0 {
				t.Fatalf("loser %d got call %+v and events %v, want the current executing call with one decision", i, call, evs)
			}
		}
	}
	if winner < 0 {
		t.Fatal("no approval won")
	}
	return winner
}
