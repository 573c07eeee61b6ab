package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// newConversationIn stores a new conversation of tenant and project.
func newConversationIn(t *testing.T, s agentd.Store, tenant, project string) *agentd.Conversation {
	t.Helper()
	c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: tenant, ProjectID: project, Agent: "agent", CreatedAt: t0}
	noErr(t, s.CreateConversation(context.Background(), c), "CreateConversation")
	return c
}

// sameEvent fails unless got is want in every field.
func sameEvent(t *testing.T, what string, got, want agentd.Event) {
	t.Helper()
	if got.ConversationID != want.ConversationID || got.Seq != want.Seq || got.Position != want.Position || got.Type != want.Type {
		t.Fatalf("%s = %s seq %d pos %d %s, want %s seq %d pos %d %s", what,
			got.ConversationID, got.Seq, got.Position, got.Type, want.ConversationID, want.Seq, want.Position, want.Type)
	}
	sameJSON(t, what+" data", got.Data, want.Data)
}

// sameEvents fails unless got is want, event by event.
func sameEvents(t *testing.T, what string, got, want []agentd.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %v, want %d: %v", what, len(got), positions(got), len(want), positions(want))
	}
	for i := range got {
		sameEvent(t, fmt.Sprintf("%s: event %d", what, i), got[i], want[i])
	}
}

// positions returns the positions of evs, in order.
func positions(evs []agentd.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Position
	}
	return out
}

// testFeedPositions checks that every method that appends returns events
// with positions that strictly increase across calls and conversations, in
// draft order within a call, and that Events and EventsAfter show the same;
// a failed append adds no event.
func testFeedPositions(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	a := newConversationIn(t, s, "tenant-a", "project-1")
	b := newConversationIn(t, s, "tenant-b", "project-2")
	var told []agentd.Event
	record := func(evs []agentd.Event, err error, what string, n int) {
		t.Helper()
		noErr(t, err, what)
		if len(evs) != n {
			t.Fatalf("%s returned %d events, want %d", what, len(evs), n)
		}
		told = append(told, evs...)
	}

	evs, err := s.AppendEvents(ctx, []agentd.EventDraft{
		draft(a.ID, agentd.EventRunStarted, `{"n":1}`), draft(b.ID, agentd.EventRunStarted, `{"n":2}`), draft(a.ID, agentd.EventTextDelta, `{"n":3}`),
	})
	record(evs, err, "AppendEvents", 3)
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: b.ID, TenantID: b.TenantID, ProjectID: b.ProjectID,
		Status: agentd.RunRunning, CreatedAt: t0, UpdatedAt: t0}
	evs, err = s.StartRun(ctx, run, &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: b.ID, RunID: run.ID, Role: agentd.RoleUser},
		[]agentd.EventDraft{draft(b.ID, agentd.EventRunStarted, `{"n":4}`)})
	record(evs, err, "StartRun", 1)
	_, err = s.AppendEvents(ctx, []agentd.EventDraft{draft(a.ID, agentd.EventTextDelta, `{}`), draft("conv_missing", agentd.EventTextDelta, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	evs, err = s.AddMessage(ctx, &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: a.ID, Role: agentd.RoleUser},
		[]agentd.EventDraft{draft(a.ID, agentd.EventMessage, `{"n":5}`), draft(a.ID, agentd.EventMessage, `{"n":6}`)})
	record(evs, err, "AddMessage", 2)

	for i, e := range told {
		if e.Position <= 0 || i > 0 && e.Position <= told[i-1].Position {
			t.Fatalf("positions %v do not strictly increase from 1 or more in append order", positions(told))
		}
	}
	var fromLogs []agentd.Event
	for _, conv := range []string{a.ID, b.ID} {
		fromLogs = append(fromLogs, allEvents(t, s, conv)...)
	}
	if len(fromLogs) != len(told) {
		t.Fatalf("the logs hold %d events, the appends returned %d (a failed append left some?)", len(fromLogs), len(told))
	}
	byPos := map[int64]agentd.Event{}
	for _, e := range told {
		byPos[e.Position] = e
	}
	for _, e := range fromLogs {
		sameEvent(t, fmt.Sprintf("Events at position %d", e.Position), e, byPos[e.Position])
	}
	got, err := s.EventsAfter(ctx, agentd.FeedFilter{})
	noErr(t, err, "EventsAfter")
	sameEvents(t, "EventsAfter(0)", got, told)
}

// feedFixture appends events to conversations in two tenants and three
// projects, interleaved, and returns them as the appends returned them, and
// the conversations by id.
func feedFixture(t *testing.T, s agentd.Store) ([]agentd.Event, map[string]*agentd.Conversation) {
	t.Helper()
	convs := []*agentd.Conversation{
		newConversationIn(t, s, "tenant-a", "project-1"),
		newConversationIn(t, s, "tenant-a", "project-2"),
		newConversationIn(t, s, "tenant-b", "project-1"),
		newConversationIn(t, s, "tenant-a", "project-1"),
	}
	byID := map[string]*agentd.Conversation{}
	for _, c := range convs {
		byID[c.ID] = c
	}
	rng := rand.New(rand.NewPCG(3, 5))
	var all []agentd.Event
	for i := range 16 {
		var batch []agentd.EventDraft
		for k := range 1 + rng.IntN(2) {
			batch = append(batch, draft(convs[rng.IntN(len(convs))].ID, agentd.EventTextDelta, fmt.Sprintf(`{"i":%d,"k":%d}`, i, k)))
		}
		evs, err := s.AppendEvents(context.Background(), batch)
		noErr(t, err, "AppendEvents")
		all = append(all, evs...)
	}
	return all, byID
}

// testFeedEventsAfter checks that EventsAfter returns exactly the events
// after its cursor that match its filter, in position order, up to its
// limit, for every cursor, several limits and every filter.
func testFeedEventsAfter(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	all, convs := feedFixture(t, s)
	last := all[len(all)-1].Position
	filters := []agentd.FeedFilter{
		{}, {TenantID: "tenant-a"}, {TenantID: "tenant-a", ProjectID: "project-1"}, {TenantID: "tenant-a", ProjectID: "project-2"},
		{TenantID: "tenant-b"}, {TenantID: "tenant-b", ProjectID: "project-2"},
	}
	cursors := []int64{0, all[0].Position - 1, last - 1, last, last + 1}
	for i := 0; i < len(all); i += 3 {
		cursors = append(cursors, all[i].Position)
	}
	for _, f := range filters {
		for _, after := range cursors {
			for _, limit := range []int{0, 1, 3} {
				f.After, f.Limit = after, limit
				var want []agentd.Event
				for _, e := range all {
					c := convs[e.ConversationID]
					if e.Position > after && (f.TenantID == "" || c.TenantID == f.TenantID) && (f.ProjectID == "" || c.ProjectID == f.ProjectID) &&
						len(want) < f.PageLimit() {
						want = append(want, e)
					}
				}
				got, err := s.EventsAfter(ctx, f)
				noErr(t, err, "EventsAfter")
				sameEvents(t, fmt.Sprintf("EventsAfter(%+v)", f), got, want)
			}
		}
	}

	// A limit over MaxFeedPage, or none, gives MaxFeedPage events.
	drafts := make([]agentd.EventDraft, agentd.MaxFeedPage+1)
	conv := newConversationIn(t, s, "tenant-big", "p")
	for i := range drafts {
		drafts[i] = draft(conv.ID, agentd.EventTextDelta, `{}`)
	}
	big, err := s.AppendEvents(ctx, drafts)
	noErr(t, err, "AppendEvents")
	for _, limit := range []int{0, agentd.MaxFeedPage + 1, 1 << 30} {
		got, err := s.EventsAfter(ctx, agentd.FeedFilter{After: last, Limit: limit})
		noErr(t, err, "EventsAfter")
		sameEvents(t, fmt.Sprintf("EventsAfter(limit %d)", limit), got, big[:agentd.MaxFeedPage])
	}
}

func testFeedEventsAfterErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	feedFixture(t, s)
	for name, f := range map[string]agentd.FeedFilter{
		"negative cursor":        {After: -1},
		"project without tenant": {ProjectID: "project-1"},
	} {
		evs, err := s.EventsAfter(ctx, f)
		if agentd.ErrorCode(err) != agentd.EINVALID || len(evs) != 0 {
			t.Errorf("%s: %d events, error %v; want EINVALID", name, len(evs), err)
		}
	}
}

// testFeedLastPosition checks that LastPosition is 0 for an empty store,
// then the newest event's position, and that a failed append leaves it.
func testFeedLastPosition(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	wantLast := func(want int64) {
		t.Helper()
		got, err := s.LastPosition(ctx)
		noErr(t, err, "LastPosition")
		if got != want {
			t.Fatalf("LastPosition = %d, want %d", got, want)
		}
	}
	wantLast(0)
	all, _ := feedFixture(t, s)
	wantLast(all[len(all)-1].Position)
	_, err := s.AppendEvents(ctx, []agentd.EventDraft{draft(all[0].ConversationID, agentd.EventTextDelta, `{}`), draft("conv_missing", agentd.EventTextDelta, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	wantLast(all[len(all)-1].Position)
}

// testFeedConcurrent appends from many goroutines, in batches that mix
// conversations, while readers follow the feed with EventsAfter from the
// last position each has seen. Positions are never given twice, and every
// reader ends up with every event exactly once, in increasing position
// order: an event committed after a reader saw position P never has a
// position below P (it would be skipped for good).
func testFeedConcurrent(t *testing.T, s agentd.Store) {
	convs := make([]string, 4)
	for i := range convs {
		convs[i] = newConversationIn(t, s, fmt.Sprintf("tenant-%d", i%2), "project").ID
	}
	const workers, rounds, readers = 12, 15, 3
	var mu sync.Mutex
	told := map[int64]agentd.Event{}
	writersDone := make(chan struct{})
	seen := make([][]agentd.Event, readers)
	var readersWG sync.WaitGroup
	for r := range readers {
		readersWG.Go(func() { seen[r] = followUntil(t, s, writersDone, 1+5*r) })
	}
	appendConcurrently(t, s, convs, workers, rounds, 11, func(_ []agentd.EventDraft, evs []agentd.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if prev, dup := told[e.Position]; dup {
				t.Errorf("position %d given twice: %s and %s", e.Position, prev.Data, e.Data)
			}
			told[e.Position] = e
		}
	})
	close(writersDone)
	readersWG.Wait()
	if t.Failed() {
		return
	}
	for r, evs := range seen {
		if len(evs) != len(told) {
			t.Fatalf("reader %d saw %d events, the appends returned %d", r, len(evs), len(told))
		}
		for i, e := range evs {
			if i > 0 && e.Position <= evs[i-1].Position {
				t.Fatalf("reader %d: position %d after %d", r, e.Position, evs[i-1].Position)
			}
			sameEvent(t, fmt.Sprintf("reader %d event %d", r, i), e, told[e.Position])
		}
	}
	// Within a conversation, position order is Seq order.
	for _, conv := range convs {
		evs := allEvents(t, s, conv)
		for i := 1; i < len(evs); i++ {
			if evs[i].Position <= evs[i-1].Position {
				t.Fatalf("%s: seq %d has position %d, seq %d has %d", conv, evs[i-1].Seq, evs[i-1].Position, evs[i].Seq, evs[i].Position)
			}
		}
	}
}

// followUntil reads the feed from position 0 with EventsAfter, pages of
// limit, each after the last position seen, until done is closed and a read
// after that finds nothing new; it returns every event read.
func followUntil(t *testing.T, s agentd.Store, done <-chan struct{}, limit int) []agentd.Event {
	var out []agentd.Event
	var after int64
	finishing := false
	deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for time.Now().Before(deadline) {
		select {
		case <-done:
			finishing = true
		default:
		}
		page, err := s.EventsAfter(context.Background(), agentd.FeedFilter{After: after, Limit: limit})
		if err != nil {
			t.Errorf("EventsAfter: %v", err)
			return out
		}
		if len(page) == 0 {
			if finishing {
				return out
			}
			runtime.Gosched() // let the writers commit
		}
		for _, e := range page {
			if e.Position <= after {
				t.Errorf("EventsAfter(after %d) returned position %d", after, e.Position)
				return out
			}
			after = e.Position
		}
		out = append(out, page...)
	}
	t.Errorf("the reader did not catch up within a minute")
	return out
}

// testFeedConsumers checks that a consumer's position starts at 0, is what
// was recorded, never moves backwards, is per name, and cannot pass the
// newest event.
func testFeedConsumers(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	wantPos := func(name string, want int64) {
		t.Helper()
		got, err := s.ConsumerPosition(ctx, name)
		noErr(t, err, "ConsumerPosition")
		if got != want {
			t.Fatalf("ConsumerPosition(%s) = %d, want %d", name, got, want)
		}
	}
	wantPos("webhooks", 0)
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", 0), "SetConsumerPosition(0) on an empty feed")
	wantCode(t, s.SetConsumerPosition(ctx, "webhooks", 1), agentd.EINVALID) // no event yet
	wantPos("webhooks", 0)

	all, _ := feedFixture(t, s)
	p := func(i int) int64 { return all[i].Position }
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", p(5)), "SetConsumerPosition")
	wantPos("webhooks", p(5))
	wantPos("sse-hub", 0)
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", p(2)), "SetConsumerPosition backwards")
	wantPos("webhooks", p(5))
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", p(5)), "SetConsumerPosition again")
	wantPos("webhooks", p(5))
	noErr(t, s.SetConsumerPosition(ctx, "sse-hub", p(1)), "SetConsumerPosition")
	wantPos("sse-hub", p(1))
	wantPos("webhooks", p(5))

	last := all[len(all)-1].Position
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", last), "SetConsumerPosition to the newest")
	wantPos("webhooks", last)
	wantCode(t, s.SetConsumerPosition(ctx, "sse-hub", last+1), agentd.EINVALID)
	wantCode(t, s.SetConsumerPosition(ctx, "sse-hub", -1), agentd.EINVALID)
	wantPos("sse-hub", p(1))
}

func testFeedConsumerErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	feedFixture(t, s)
	for _, name := range []string{"", strings.Repeat("a", agentd.MaxConsumerName+1), "two words", "-lead", ".x", "a/b", "ünï", "a\x00b", "a\nb"} {
		if _, err := s.ConsumerPosition(ctx, name); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("ConsumerPosition(%q): %v, want EINVALID", name, err)
		}
		if err := s.SetConsumerPosition(ctx, name, 1); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("SetConsumerPosition(%q): %v, want EINVALID", name, err)
		}
	}
	for _, name := range []string{strings.Repeat("a", agentd.MaxConsumerName), "webhooks:ops", "sse-hub", "a.b_c-D:9", "0"} {
		noErr(t, s.SetConsumerPosition(ctx, name, 1), "SetConsumerPosition("+name+")")
		got, err := s.ConsumerPosition(ctx, name)
		if err != nil || got != 1 {
			t.Errorf("ConsumerPosition(%q) = %d, %v; want 1", name, got, err)
		}
	}
}

// testFeedConsumerReopen checks that consumer positions and the feed
// survive closing and reopening the store, and that positions continue
// after the newest one instead of being given again.
func testFeedConsumerReopen(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t)
	all, _ := feedFixture(t, s)
	mid, last := all[len(all)/2].Position, all[len(all)-1].Position
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", mid), "SetConsumerPosition")
	noErr(t, s.SetConsumerPosition(ctx, "sse-hub", last), "SetConsumerPosition")

	s = b.Reopen(t, s)
	for name, want := range map[string]int64{"webhooks": mid, "sse-hub": last, "new": 0} {
		got, err := s.ConsumerPosition(ctx, name)
		if err != nil || got != want {
			t.Errorf("after reopen: ConsumerPosition(%s) = %d, %v; want %d", name, got, err, want)
		}
	}
	noErr(t, s.SetConsumerPosition(ctx, "webhooks", mid-1), "SetConsumerPosition backwards")
	got, err := s.EventsAfter(ctx, agentd.FeedFilter{After: mid})
	noErr(t, err, "EventsAfter")
	var want []agentd.Event
	for _, e := range all {
		if e.Position > mid {
			want = append(want, e)
		}
	}
	sameEvents(t, "after reopen: EventsAfter(mid)", got, want)
	evs, err := s.AppendEvents(ctx, []agentd.EventDraft{draft(all[0].ConversationID, agentd.EventTextDelta, `{}`)})
	noErr(t, err, "AppendEvents")
	if evs[0].Position <= last {
		t.Fatalf("after reopen: new event at position %d, not after the newest %d", evs[0].Position, last)
	}
	if p, err := s.ConsumerPosition(ctx, "webhooks"); err != nil || p != mid {
		t.Fatalf("after reopen: ConsumerPosition(webhooks) = %d, %v; want %d", p, err, mid)
	}
}
