package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
)

func testEventsSequence(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	a, b := newConversation(t, s), newConversation(t, s)

	evs, err := s.AppendEvents(ctx, []agentd.EventDraft{
		draft(a.ID, agentd.EventRunStarted, `{"n": 1}`),
		draft(b.ID, agentd.EventRunStarted, "{\n\"n\":  2\n}"),
		draft(a.ID, agentd.EventTextDelta, `{"n":3}`),
		{ConversationID: b.ID, Type: agentd.EventError},
	})
	noErr(t, err, "AppendEvents")
	if len(evs) != 4 {
		t.Fatalf("AppendEvents returned %d events, want 4", len(evs))
	}
	want := []struct {
		conv string
		seq  int64
		typ  string
		data json.RawMessage
	}{
		{a.ID, 1, agentd.EventRunStarted, json.RawMessage(`{"n": 1}`)},
		{b.ID, 1, agentd.EventRunStarted, json.RawMessage("{\n\"n\":  2\n}")},
		{a.ID, 2, agentd.EventTextDelta, json.RawMessage(`{"n":3}`)},
		{b.ID, 2, agentd.EventError, nil},
	}
	for i, w := range want {
		e := evs[i]
		if e.ConversationID != w.conv || e.Seq != w.seq || e.Type != w.typ {
			t.Errorf("event %d = %+v, want %s/%d/%s", i, e, w.conv, w.seq, w.typ)
		}
		sameJSON(t, fmt.Sprintf("event %d data", i), e.Data, w.data)
	}

	// Methods that append continue the same per-conversation sequence.
	_, err = s.AddMessage(ctx, &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: a.ID, Role: agentd.RoleUser},
		[]agentd.EventDraft{draft(a.ID, agentd.EventMessage, `{"n":4}`)})
	noErr(t, err, "AddMessage")

	stored := allEvents(t, s, a.ID)
	wantSeqs(t, "conversation a", stored, 1, 2, 3)
	for i, w := range []struct {
		typ  string
		data string
	}{{agentd.EventRunStarted, `{"n": 1}`}, {agentd.EventTextDelta, `{"n":3}`}, {agentd.EventMessage, `{"n":4}`}} {
		if stored[i].Type != w.typ || stored[i].ConversationID != a.ID {
			t.Errorf("stored event %d = %+v, want type %s", i, stored[i], w.typ)
		}
		sameJSON(t, fmt.Sprintf("stored event %d data", i), stored[i].Data, json.RawMessage(w.data))
	}
	stored = allEvents(t, s, b.ID)
	wantSeqs(t, "conversation b", stored, 1, 2)
	sameJSON(t, "b event 1 data", stored[0].Data, json.RawMessage("{\n\"n\":  2\n}"))
	sameJSON(t, "b event 2 data", stored[1].Data, nil)

	// Events of one conversation that follow one another take consecutive
	// numbers, and every event a position after the one before it.
	evs, err = s.AppendEvents(ctx, []agentd.EventDraft{
		draft(a.ID, agentd.EventMessage, `{}`), draft(a.ID, agentd.EventRunFinished, `{}`),
		draft(b.ID, agentd.EventRunStarted, `{}`), draft(a.ID, agentd.EventRunStarted, `{}`), draft(a.ID, agentd.EventTextDelta, `{}`),
	})
	noErr(t, err, "AppendEvents in runs")
	wantSeqs(t, "AppendEvents in runs", evs, 4, 5, 3, 6, 7)
	for i := 1; i < len(evs); i++ {
		if evs[i].Position <= evs[i-1].Position {
			t.Errorf("event %d at position %d, after %d", i, evs[i].Position, evs[i-1].Position)
		}
	}
	wantSeqs(t, "conversation a", allEvents(t, s, a.ID), 1, 2, 3, 4, 5, 6, 7)
	if stored := allEvents(t, s, a.ID); stored[4].Type != agentd.EventRunFinished || stored[5].Type != agentd.EventRunStarted {
		t.Errorf("conversation a's events 5 and 6 are %s and %s", stored[4].Type, stored[5].Type)
	}

	// A conversation without events has an empty log.
	evs, err = s.Events(ctx, newConversation(t, s).ID, 0, 10)
	noErr(t, err, "Events")
	if len(evs) != 0 {
		t.Errorf("new conversation has %d events", len(evs))
	}
}

func testEventsAfterAndLimit(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	other := newConversation(t, s)
	const n = 10
	for i := 1; i <= n; i++ {
		_, err := s.AppendEvents(ctx, []agentd.EventDraft{
			draft(conv.ID, agentd.EventTextDelta, fmt.Sprintf(`{"i":%d}`, i)),
			draft(other.ID, agentd.EventTextDelta, `{}`),
		})
		noErr(t, err, "AppendEvents")
	}
	for after := int64(-1); after <= n+1; after++ {
		for limit := 0; limit <= n+2; limit++ {
			evs, err := s.Events(ctx, conv.ID, after, limit)
			noErr(t, err, "Events")
			var want []int64
			for seq := max(after+1, 1); seq <= n; seq++ {
				if limit > 0 && len(want) == limit {
					break
				}
				want = append(want, seq)
			}
			wantSeqs(t, fmt.Sprintf("Events(after=%d, limit=%d)", after, limit), evs, want...)
			for _, e := range evs {
				if e.ConversationID != conv.ID {
					t.Fatalf("Events returned an event of %s", e.ConversationID)
				}
				sameJSON(t, "data", e.Data, json.RawMessage(fmt.Sprintf(`{"i":%d}`, e.Seq)))
			}
		}
	}
}

func testEventsAtomic(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	a := newConversation(t, s)
	_, err := s.AppendEvents(ctx, []agentd.EventDraft{
		draft(a.ID, agentd.EventTextDelta, `{}`),
		draft("conv_missing", agentd.EventTextDelta, `{}`),
	})
	wantCode(t, err, agentd.ENOTFOUND)
	if n := len(allEvents(t, s, a.ID)); n != 0 {
		t.Fatalf("failed AppendEvents appended %d events", n)
	}
	evs, err := s.AppendEvents(ctx, []agentd.EventDraft{draft(a.ID, agentd.EventTextDelta, `{}`)})
	noErr(t, err, "AppendEvents")
	wantSeqs(t, "after a failed append", evs, 1)
}

// testEventsLastSeq checks that LastSeq is the Seq of the newest event of
// its own conversation, 0 for none or no conversation, and that a failed
// append does not move it.
func testEventsLastSeq(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	a, b := newConversation(t, s), newConversation(t, s)
	wantLast := func(conv string, want int64) {
		t.Helper()
		got, err := s.LastSeq(ctx, conv)
		noErr(t, err, "LastSeq")
		if got != want {
			t.Errorf("LastSeq(%s) = %d, want %d", conv, got, want)
		}
	}
	wantLast(a.ID, 0)
	wantLast("conv_missing", 0)
	for i := 0; i < 3; i++ {
		_, err := s.AppendEvents(ctx, []agentd.EventDraft{draft(a.ID, agentd.EventTextDelta, `{}`)})
		noErr(t, err, "AppendEvents")
	}
	_, err := s.AppendEvents(ctx, []agentd.EventDraft{draft(b.ID, agentd.EventTextDelta, `{}`), draft(a.ID, agentd.EventTextDelta, `{}`)})
	noErr(t, err, "AppendEvents")
	wantLast(a.ID, 4)
	wantLast(b.ID, 1)
	_, err = s.AppendEvents(ctx, []agentd.EventDraft{draft(a.ID, agentd.EventTextDelta, `{}`), draft("conv_missing", agentd.EventTextDelta, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	wantLast(a.ID, 4)
	if evs := allEvents(t, s, a.ID); len(evs) == 0 || evs[len(evs)-1].Seq != 4 {
		t.Errorf("the log's newest event is not LastSeq: %v", evs)
	}
}

func testEventsErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	for name, d := range map[string]agentd.EventDraft{
		"no conversation": {Type: agentd.EventError, Data: json.RawMessage(`{}`)},
		"no type":         {ConversationID: conv.ID, Data: json.RawMessage(`{}`)},
		"bad data":        {ConversationID: conv.ID, Type: agentd.EventError, Data: json.RawMessage(`{"a"}`)},
	} {
		_, err := s.AppendEvents(ctx, []agentd.EventDraft{draft(conv.ID, agentd.EventError, `{}`), d})
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("%s: error %v, want %s", name, err, agentd.EINVALID)
		}
	}
	if n := len(allEvents(t, s, conv.ID)); n != 0 {
		t.Errorf("invalid appends appended %d events", n)
	}
	evs, err := s.AppendEvents(ctx, nil)
	noErr(t, err, "AppendEvents(nil)")
	if len(evs) != 0 {
		t.Errorf("AppendEvents(nil) = %v", evs)
	}
}

// appendConcurrently has workers goroutines append rounds batches each, of 1
// to 3 text_delta drafts to random conversations of convs (rng seeded with
// the worker and seed), and calls check with each batch and what
// AppendEvents returned for it; it returns when every worker is done. An
// append error fails the test and stops that worker.
func appendConcurrently(t *testing.T, s agentd.Store, convs []string, workers, rounds int, seed uint64, check func([]agentd.EventDraft, []agentd.Event)) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for r := range rounds {
				var batch []agentd.EventDraft
				for k := range 1 + rng.IntN(3) {
					batch = append(batch, draft(convs[rng.IntN(len(convs))], agentd.EventTextDelta, fmt.Sprintf(`{"w":%d,"r":%d,"k":%d}`, w, r, k)))
				}
				evs, err := s.AppendEvents(ctx, batch)
				if err != nil {
					t.Errorf("AppendEvents: %v", err)
					return
				}
				check(batch, evs)
			}
		})
	}
	wg.Wait()
}

// testEventsConcurrent appends from many goroutines, in batches that mix
// conversations, and checks that every conversation's log is 1..N with each
// event exactly once, as the appenders were told.
func testEventsConcurrent(t *testing.T, s agentd.Store) {
	convs := make([]string, 4)
	for i := range convs {
		convs[i] = newConversation(t, s).ID
	}
	const workers, rounds = 16, 15
	type key struct {
		conv string
		seq  int64
	}
	var mu sync.Mutex
	told := map[key]string{} // what AppendEvents returned
	appendConcurrently(t, s, convs, workers, rounds, 7, func(batch []agentd.EventDraft, evs []agentd.Event) {
		if len(evs) != len(batch) {
			t.Errorf("AppendEvents returned %d events for %d drafts", len(evs), len(batch))
			return
		}
		last := map[string]int64{}
		mu.Lock()
		defer mu.Unlock()
		for i, e := range evs {
			if e.ConversationID != batch[i].ConversationID || string(e.Data) != string(batch[i].Data) {
				t.Errorf("event %d of a batch = %+v, want draft %+v", i, e, batch[i])
			}
			if e.Seq <= last[e.ConversationID] {
				t.Errorf("batch seqs of %s not increasing: %d after %d", e.ConversationID, e.Seq, last[e.ConversationID])
			}
			last[e.ConversationID] = e.Seq
			k := key{e.ConversationID, e.Seq}
			if prev, dup := told[k]; dup {
				t.Errorf("seq %d of %s given twice: %s and %s", e.Seq, e.ConversationID, prev, e.Data)
			}
			told[k] = string(e.Data)
		}
	})
	if t.Failed() {
		return
	}

	total := 0
	for _, conv := range convs {
		evs := allEvents(t, s, conv)
		total += len(evs)
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("%s: event %d has seq %d, want %d (gap or disorder)", conv, i, e.Seq, i+1)
			}
			if want, ok := told[key{conv, e.Seq}]; !ok || want != string(e.Data) {
				t.Fatalf("%s seq %d: stored %s, AppendEvents returned %q", conv, e.Seq, e.Data, want)
			}
		}
	}
	if total != len(told) {
		t.Fatalf("stored %d events, AppendEvents returned %d", total, len(told))
	}
}
