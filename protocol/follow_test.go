package protocol_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/sse"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fixture is a real SQLite store and hub with one conversation and its
// running run; commit appends events and publishes them, as the loop does.
type fixture struct {
	store *sqlite.DB
	hub   *sse.Hub
	svc   *protocol.Service
	conv  *agentd.Conversation
	run   *agentd.Run
}

func newFixture(t *testing.T, hubBuffer int) *fixture {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hub := sse.NewHub(sse.WithBuffer(hubBuffer))
	t.Cleanup(hub.Close)
	f := &fixture{store: store, hub: hub, svc: protocol.New(nil, store, hub, protocol.Options{})}
	f.conv = &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a", CreatedAt: t0}
	if err := store.CreateConversation(context.Background(), f.conv); err != nil {
		t.Fatal(err)
	}
	f.run = &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: f.conv.ID, TenantID: "t", ProjectID: "p",
		CorrelationID: "c", Status: agentd.RunRunning, CreatedAt: t0, UpdatedAt: t0}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: f.conv.ID, RunID: f.run.ID, Role: agentd.RoleUser, Content: "hi", CreatedAt: t0}
	if _, err := store.StartRun(context.Background(), f.run, msg, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) draft(t *testing.T, p agentd.EventPayload) agentd.EventDraft {
	t.Helper()
	d, err := agentd.NewEventDraft(f.conv.ID, t0, p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) commit(t *testing.T, p agentd.EventPayload) {
	t.Helper()
	evs, err := f.store.AppendEvents(context.Background(), []agentd.EventDraft{f.draft(t, p)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		f.hub.Publish(e)
	}
}

func (f *fixture) finish(t *testing.T) {
	t.Helper()
	_, evs, err := f.store.UpdateRun(context.Background(), agentd.RunUpdate{ID: f.run.ID, Status: agentd.RunCompleted, Reason: "model_stop", Now: t0},
		[]agentd.EventDraft{f.draft(t, &agentd.RunFinishedPayload{RunID: f.run.ID, CorrelationID: "c", Status: agentd.RunCompleted, Reason: "model_stop"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		f.hub.Publish(e)
	}
}

// sink records items; the first Item blocks until release is closed.
type sink struct {
	mu      sync.Mutex
	seqs    []int64
	first   chan struct{}
	release chan struct{}
}

func (s *sink) Item(it protocol.Item) error {
	s.mu.Lock()
	s.seqs = append(s.seqs, it.Event.Seq)
	n := len(s.seqs)
	s.mu.Unlock()
	if n == 1 && s.release != nil {
		close(s.first)
		<-s.release
	}
	return nil
}

func (s *sink) Ping() error { return nil }

// The stream sends every event of the run after its starting point once,
// in order — from the log, then live — also when the hub cut it off while
// it was blocked, and ends at run_finished.
func TestFollowReplayLiveAndCutOff(t *testing.T) {
	f := newFixture(t, 1)
	for i := 0; i < 3; i++ { // before the starting point: not sent
		f.commit(t, &agentd.TextDeltaPayload{RunID: f.run.ID, MessageID: "m0", Delta: "old"})
	}
	after, _ := f.store.LastSeq(context.Background(), f.conv.ID)
	f.commit(t, &agentd.TextDeltaPayload{RunID: f.run.ID, MessageID: "m1", Delta: "in the log"})
	s := &sink{first: make(chan struct{}), release: make(chan struct{})}
	type result struct {
		end protocol.End
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		end, err := f.svc.Follow(ctx, &protocol.Turn{Conversation: f.conv, RunID: f.run.ID, After: after}, s)
		done <- result{end, err}
	}()
	<-s.first
	// While the stream is blocked, more events than its hub buffer: it is cut off.
	for i := 0; i < 20; i++ {
		f.commit(t, &agentd.TextDeltaPayload{RunID: f.run.ID, MessageID: "m1", Delta: "live"})
	}
	close(s.release)
	f.finish(t)
	r := <-done
	if r.err != nil || r.end.Status != agentd.RunCompleted {
		t.Fatalf("Follow = %+v, %v", r.end, r.err)
	}
	last, _ := f.store.LastSeq(context.Background(), f.conv.ID)
	if len(s.seqs) != int(last-after) {
		t.Fatalf("sent %d events (%v), want %d", len(s.seqs), s.seqs, last-after)
	}
	for i, seq := range s.seqs {
		if seq != after+1+int64(i) {
			t.Fatalf("sent %v: not every event after %d once, in order", s.seqs, after)
		}
	}
	if f.hub.CutOffs() == 0 {
		t.Error("the hub never cut the stream off: the test did not test the recovery")
	}
}

// A waiting run ends the stream once every unresolved call of its step is
// parked (here: after the other call's result), with those calls.
func TestFollowEndsWhenParked(t *testing.T) {
	f := newFixture(t, 64)
	ctx := context.Background()
	mk := func(i int, status agentd.CallStatus) *agentd.ToolCall {
		return &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p", ConversationID: f.conv.ID,
			RunID: f.run.ID, Step: 1, Index: i, Name: "x", Arguments: []byte(`{}`), Status: status, Tier: agentd.TierConfirm, CreatedAt: t0, UpdatedAt: t0}
	}
	parked, running := mk(0, agentd.StatusRequiresConfirmation), mk(1, agentd.StatusExecuting)
	if _, err := f.store.RecordStep(ctx, agentd.StepRecord{RunID: f.run.ID, Step: 1, Calls: []*agentd.ToolCall{parked, running}, Now: t0}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.store.UpdateRun(ctx, agentd.RunUpdate{ID: f.run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting, Now: t0}, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := f.store.LastSeq(ctx, f.conv.ID)
	done := make(chan protocol.End, 1)
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() {
		end, err := f.svc.Follow(fctx, &protocol.Turn{Conversation: f.conv, RunID: f.run.ID, After: after}, &sink{})
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
		done <- end
	}()
	// The running call's result ends its step's work: the run is parked now.
	_, evs, err := f.store.UpdateToolCall(ctx, agentd.CallUpdate{ID: running.ID, From: []agentd.CallStatus{agentd.StatusExecuting}, Status: agentd.StatusCompleted, Now: t0},
		[]agentd.EventDraft{f.draft(t, &agentd.ToolCallResultPayload{RunID: f.run.ID, ToolCallID: running.ID, ToolName: "x", Status: agentd.StatusCompleted})})
	if err != nil {
		t.Fatal(err)
	}
	f.hub.Publish(evs[0])
	end := <-done
	if end.Status != agentd.RunWaiting || len(end.Parked) != 1 || end.Parked[0].ID != parked.ID {
		t.Fatalf("end = %+v, want waiting on %s", end, parked.ID)
	}
}
