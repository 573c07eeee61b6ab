package feed_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangGuard bounds every wait for something that must happen; it is a
// failure deadline, never a timing assertion.
const hangGuard = time.Minute

// fixture is a feed over a real SQLite file, with conversations in two
// tenants. Its ticks drive the poll; nothing ticks unless a test sends.
type fixture struct {
	db    *sqlite.DB
	path  string
	feed  *feed.Feed
	tick  chan time.Time
	convs []*agentd.Conversation
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // runs last: after the closes below
	path := filepath.Join(t.TempDir(), "agentd.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fx := &fixture{db: db, path: path, tick: make(chan time.Time)}
	for i, tenant := range []string{"tenant-a", "tenant-b", "tenant-a"} {
		c := &agentd.Conversation{ID: fmt.Sprintf("conv_%d", i), TenantID: tenant, ProjectID: "project"}
		if err := db.CreateConversation(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		fx.convs = append(fx.convs, c)
	}
	fx.feed = feed.New(db, feed.Options{Tick: fx.tick})
	t.Cleanup(fx.feed.Close)
	return fx
}

// append commits one event to conversation i and returns it, without
// notifying the feed.
func (fx *fixture) append(t *testing.T, i int, data string) agentd.Event {
	t.Helper()
	evs, err := fx.db.AppendEvents(context.Background(), []agentd.EventDraft{
		{ConversationID: fx.convs[i].ID, Type: agentd.EventTextDelta, Data: []byte(data)}})
	if err != nil {
		t.Fatal(err)
	}
	return evs[0]
}

// follow subscribes with f and closes the subscription when t ends.
func (fx *fixture) follow(t *testing.T, f agentd.FeedFilter) agentd.FeedSubscription {
	t.Helper()
	sub, err := fx.feed.Follow(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub
}

// next returns sub's next event, failing the test if none comes before the
// hang guard.
func next(t *testing.T, sub agentd.FeedSubscription) agentd.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	e, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return e
}

// wantEvent fails unless got is want (position, conversation, seq, data).
func wantEvent(t *testing.T, got, want agentd.Event) {
	t.Helper()
	if got.Position != want.Position || got.ConversationID != want.ConversationID || got.Seq != want.Seq ||
		string(got.Data) != string(want.Data) {
		t.Fatalf("event %s seq %d position %d %s, want %s seq %d position %d %s",
			got.ConversationID, got.Seq, got.Position, got.Data, want.ConversationID, want.Seq, want.Position, want.Data)
	}
}

// TestFollowWhileAppending starts a consumer at position 0 while several
// goroutines append and notify, each after its commit as the loop does:
// the consumer sees every event exactly once, in position order.
func TestFollowWhileAppending(t *testing.T) {
	fx := newFixture(t)
	before := fx.append(t, 0, `{"before":true}`)
	sub := fx.follow(t, agentd.FeedFilter{Limit: 7}) // small pages: many reads race with the appends
	const writers, rounds = 8, 25
	told := make(chan agentd.Event, writers*rounds)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				evs, err := fx.db.AppendEvents(context.Background(), []agentd.EventDraft{{
					ConversationID: fx.convs[(w+r)%len(fx.convs)].ID, Type: agentd.EventTextDelta, Data: fmt.Appendf(nil, `{"w":%d,"r":%d}`, w, r)}})
				if err != nil {
					t.Errorf("AppendEvents: %v", err)
					return
				}
				told <- evs[0]
				fx.feed.Publish(evs[0])
			}
		})
	}
	wantEvent(t, next(t, sub), before)
	got := map[int64]agentd.Event{}
	last := before.Position
	for range writers * rounds {
		e := next(t, sub)
		if e.Position <= last {
			t.Fatalf("position %d after %d", e.Position, last)
		}
		last = e.Position
		got[e.Position] = e
	}
	wg.Wait()
	close(told)
	for e := range told {
		g, ok := got[e.Position]
		if !ok {
			t.Fatalf("event at position %d never arrived", e.Position)
		}
		wantEvent(t, g, e)
	}
}

// TestFollowFromPosition checks that a consumer started at P gets exactly
// the events after P, history then live, and that a filtered one gets only
// its tenant's.
func TestFollowFromPosition(t *testing.T) {
	fx := newFixture(t)
	var all []agentd.Event
	for i := range 9 {
		all = append(all, fx.append(t, i%3, fmt.Sprintf(`{"i":%d}`, i)))
	}
	p := all[3].Position
	sub := fx.follow(t, agentd.FeedFilter{After: p, Limit: 2})
	tenantB := fx.follow(t, agentd.FeedFilter{After: p, TenantID: "tenant-b"})
	for _, want := range all[4:] {
		wantEvent(t, next(t, sub), want)
	}
	for _, want := range all[4:] {
		if want.ConversationID == fx.convs[1].ID { // tenant-b's only conversation
			wantEvent(t, next(t, tenantB), want)
		}
	}
	live := fx.append(t, 0, `{"live":1}`) // tenant-a: only sub has it
	fx.feed.Notify()
	wantEvent(t, next(t, sub), live)
	liveB := fx.append(t, 1, `{"live":2}`)
	fx.feed.Notify()
	wantEvent(t, next(t, sub), liveB)
	wantEvent(t, next(t, tenantB), liveB)
}

// TestPollSeesUnannouncedCommits commits events that nobody announces — one
// through a second handle on the same file, as another process or replica
// would: the poll tick makes the waiting consumer read them.
func TestPollSeesUnannouncedCommits(t *testing.T) {
	fx := newFixture(t)
	other, err := sqlite.Open(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sub := fx.follow(t, agentd.FeedFilter{})
	type result struct {
		e   agentd.Event
		err error
	}
	got := make(chan result, 1)
	nextAsync := func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			e, err := sub.Next(ctx)
			got <- result{e, err}
		}()
	}
	for _, appendVia := range []*sqlite.DB{fx.db, other} {
		nextAsync()
		evs, err := appendVia.AppendEvents(context.Background(), []agentd.EventDraft{{ConversationID: fx.convs[1].ID, Type: agentd.EventMessage}})
		if err != nil {
			t.Fatal(err)
		}
		// Without a wake-up the consumer may wait forever; the tick wakes it.
		// Ticks are sent until it has the event (it may have read it before
		// the first tick).
		var r result
	wait:
		for {
			select {
			case fx.tick <- time.Time{}:
			case r = <-got:
				break wait
			}
		}
		if r.err != nil {
			t.Fatalf("Next: %v", r.err)
		}
		wantEvent(t, r.e, evs[0])
	}
}

// countingSource passes reads through to the store and records them.
type countingSource struct {
	feed.EventReader
	reads  atomic.Int64
	most   atomic.Int64 // the largest page returned
	failAt atomic.Int64 // the read number that fails, 0 for none
}

var errInjected = errors.New("injected read failure")

func (c *countingSource) EventsAfter(ctx context.Context, f agentd.FeedFilter) ([]agentd.Event, error) {
	n := c.reads.Add(1)
	if n == c.failAt.Load() {
		return nil, errInjected
	}
	evs, err := c.EventReader.EventsAfter(ctx, f)
	if int64(len(evs)) > c.most.Load() {
		c.most.Store(int64(len(evs)))
	}
	return evs, err
}

// TestSlowConsumerBuffersNothing checks that a subscription reads the
// store only when its consumer asks for an event, one page of at most its
// limit at a time, however many events commit and notifications arrive,
// and that a failed read loses nothing.
func TestSlowConsumerBuffersNothing(t *testing.T) {
	fx := newFixture(t)
	src := &countingSource{EventReader: fx.db}
	f := feed.New(src, feed.Options{Tick: fx.tick})
	defer f.Close()
	sub, err := f.Follow(agentd.FeedFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var all []agentd.Event
	for i := range 95 {
		all = append(all, fx.append(t, i%3, fmt.Sprintf(`{"i":%d}`, i)))
		f.Notify()
	}
	if n := src.reads.Load(); n != 0 {
		t.Fatalf("%d store reads before the consumer asked for anything", n)
	}
	wantEvent(t, next(t, sub), all[0])
	for range 50 {
		f.Notify()
	}
	if n, most := src.reads.Load(), src.most.Load(); n != 1 || most != 10 {
		t.Fatalf("after one Next: %d reads, largest page %d; want 1 read of 10", n, most)
	}
	for _, want := range all[1:10] {
		wantEvent(t, next(t, sub), want)
	}
	src.failAt.Store(src.reads.Load() + 1)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("Next with a failing read: %v, want the read's error", err)
	}
	for _, want := range all[10:] {
		wantEvent(t, next(t, sub), want)
	}
	if n := src.reads.Load(); n != 11 {
		t.Fatalf("%d reads for 95 events in pages of 10 and one failure, want 11", n)
	}
}

// TestEnds checks how a subscription ends: a Next waiting on it returns
// when its context ends, when it is closed and when the feed closes, with
// the documented errors; nothing is left running (goleak, in the fixture).
func TestEnds(t *testing.T) {
	fx := newFixture(t)
	waitErr := func(sub agentd.FeedSubscription, ctx context.Context, end func()) error {
		errc := make(chan error, 1)
		go func() {
			_, err := sub.Next(ctx)
			errc <- err
		}()
		end()
		select {
		case err := <-errc:
			return err
		case <-time.After(hangGuard):
			t.Fatal("Next did not return")
			return nil
		}
	}
	sub := fx.follow(t, agentd.FeedFilter{})
	ctx, cancel := context.WithCancel(context.Background())
	if err := waitErr(sub, ctx, cancel); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after its context ended: %v, want context.Canceled", err)
	}
	if err := waitErr(sub, context.Background(), sub.Close); !errors.Is(err, feed.ErrUnsubscribed) || !errors.Is(err, agentd.ErrFeedEnded) ||
		agentd.ErrorCode(err) != agentd.EUNAVAILABLE {
		t.Errorf("Next after Close: %v, want ErrUnsubscribed", err)
	}
	sub.Close() // idempotent
	if n := fx.feed.Subscribers(); n != 0 {
		t.Errorf("%d subscribers after Close", n)
	}

	// A feed that closes ends a waiting Next, and one with events still
	// buffered.
	waiting := fx.follow(t, agentd.FeedFilter{})
	buffered := fx.follow(t, agentd.FeedFilter{Limit: 10})
	first := fx.append(t, 0, `{"n":1}`)
	fx.append(t, 1, `{"n":2}`)
	wantEvent(t, next(t, buffered), first)
	wantEvent(t, next(t, waiting), first)
	next(t, waiting)
	if err := waitErr(waiting, context.Background(), fx.feed.Close); !errors.Is(err, feed.ErrClosed) || !errors.Is(err, agentd.ErrFeedEnded) ||
		agentd.ErrorCode(err) != agentd.EUNAVAILABLE {
		t.Errorf("Next after the feed closed: %v, want ErrClosed", err)
	}
	if _, err := buffered.Next(context.Background()); !errors.Is(err, feed.ErrClosed) {
		t.Errorf("Next with a buffered event on a closed feed: %v, want ErrClosed", err)
	}
	fx.feed.Close() // idempotent
	if _, err := fx.feed.Follow(agentd.FeedFilter{}); !errors.Is(err, feed.ErrClosed) {
		t.Errorf("Follow on a closed feed: %v, want ErrClosed", err)
	}
}

func TestFollowInvalidFilter(t *testing.T) {
	fx := newFixture(t)
	for _, f := range []agentd.FeedFilter{{After: -1}, {ProjectID: "project"}} {
		if sub, err := fx.feed.Follow(f); agentd.ErrorCode(err) != agentd.EINVALID || sub != nil {
			t.Errorf("Follow(%+v) = %v, %v; want EINVALID", f, sub, err)
		}
	}
}
