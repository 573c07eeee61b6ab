package sse

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
)

// flakySource fails the reads numbered in fail (from 1) and passes the
// others through to a real store.
type flakySource struct {
	db    *sqlite.DB
	reads atomic.Int64
	fail  map[int64]bool
}

var errFlaky = errors.New("injected read failure")

func (f *flakySource) EventsAfter(ctx context.Context, ff agentd.FeedFilter) ([]agentd.Event, error) {
	if f.fail[f.reads.Add(1)] {
		return nil, errFlaky
	}
	return f.db.EventsAfter(ctx, ff)
}

// feedFixture is a hub fed by PublishFeed from a feed over a real SQLite
// store with two conversations, "a" and "b".
type feedFixture struct {
	db   *sqlite.DB
	hub  *Hub
	feed *feed.Feed
	tick chan time.Time
	errs chan error    // what PublishFeed passed to onErr
	done chan struct{} // closed when PublishFeed returns
	stop func()        // cancels PublishFeed's context
	subs []*Subscription
}

func newFeedFixture(t *testing.T, fail map[int64]bool) *feedFixture {
	t.Helper()
	checkLeaks(t)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, id := range []string{"a", "b"} {
		if err := db.CreateConversation(context.Background(), &agentd.Conversation{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	fx := &feedFixture{db: db, hub: NewHub(), tick: make(chan time.Time), errs: make(chan error, 10), done: make(chan struct{})}
	fx.feed = feed.New(&flakySource{db: db, fail: fail}, feed.Options{Tick: fx.tick})
	t.Cleanup(fx.feed.Close)
	fx.subs = []*Subscription{fx.hub.Subscribe("a"), fx.hub.Subscribe("b")}
	sub, err := fx.feed.Follow(agentd.FeedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fx.stop = cancel
	go func() {
		defer close(fx.done)
		fx.hub.PublishFeed(ctx, sub, time.Millisecond, func(err error) { fx.errs <- err })
	}()
	t.Cleanup(func() {
		cancel()
		<-fx.done
		sub.Close()
		for _, s := range fx.subs {
			s.Close()
		}
	})
	return fx
}

// commit appends one event to conv and, when notify, wakes the feed.
func (fx *feedFixture) commit(t *testing.T, conv string, notify bool) agentd.Event {
	t.Helper()
	evs, err := fx.db.AppendEvents(context.Background(), []agentd.EventDraft{{ConversationID: conv, Type: agentd.EventMessage, Data: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if notify {
		fx.feed.Publish(evs[0])
	}
	return evs[0]
}

// receive returns the next event of hub subscription i.
func (fx *feedFixture) receive(t *testing.T, i int) agentd.Event {
	t.Helper()
	select {
	case e := <-fx.subs[i].Events():
		return *e
	case <-fx.subs[i].Done():
		t.Fatalf("subscription %d ended: %v", i, fx.subs[i].Err())
	case <-time.After(hangGuard):
		t.Fatalf("subscription %d: no event", i)
	}
	return agentd.Event{}
}

// The hub fed from the feed hands each conversation's subscribers exactly
// that conversation's committed events, in Seq order — also events nobody
// announced, once the poll ticks — and PublishFeed returns when its context
// ends.
func TestPublishFeed(t *testing.T) {
	fx := newFeedFixture(t, nil)
	var want [2][]int64
	for i := range 20 {
		conv := i % 3 % 2 // a, b, a, a, b, a, …
		e := fx.commit(t, []string{"a", "b"}[conv], true)
		want[conv] = append(want[conv], e.Seq)
	}
	for conv := range 2 {
		for _, seq := range want[conv] {
			if e := fx.receive(t, conv); e.Seq != seq || e.ConversationID != []string{"a", "b"}[conv] {
				t.Fatalf("subscription %d got %s/%d, want seq %d", conv, e.ConversationID, e.Seq, seq)
			}
		}
	}

	quiet := fx.commit(t, "b", false) // as another replica would commit it
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	var e agentd.Event
wait:
	for {
		select {
		case fx.tick <- time.Time{}: // until the hub has it: it may come before the first tick
		case p := <-fx.subs[1].Events():
			e = *p
			break wait
		case <-guard.C:
			t.Fatal("an unannounced event did not reach the hub")
		}
	}
	if e.Seq != quiet.Seq || e.Position != quiet.Position {
		t.Fatalf("after a tick: %s/%d, want b/%d", e.ConversationID, e.Seq, quiet.Seq)
	}

	fx.stop()
	select {
	case <-fx.done:
	case <-time.After(hangGuard):
		t.Fatal("PublishFeed did not return after its context ended")
	}
}

// A failed read is reported and retried from the same position: nothing is
// lost or repeated. When the feed closes, PublishFeed returns.
func TestPublishFeedRetriesAndEnds(t *testing.T) {
	fx := newFeedFixture(t, map[int64]bool{1: true, 2: true})
	first := fx.commit(t, "a", true)
	for range 2 {
		select {
		case err := <-fx.errs:
			if !errors.Is(err, errFlaky) {
				t.Fatalf("onErr got %v, want the read's error", err)
			}
		case <-time.After(hangGuard):
			t.Fatal("a failed read was not reported")
		}
	}
	second := fx.commit(t, "a", true)
	for _, want := range []agentd.Event{first, second} {
		if e := fx.receive(t, 0); e.Seq != want.Seq {
			t.Fatalf("got seq %d, want %d", e.Seq, want.Seq)
		}
	}
	fx.feed.Close()
	select {
	case <-fx.done:
	case <-time.After(hangGuard):
		t.Fatal("PublishFeed did not return after the feed closed")
	}
	select {
	case e := <-fx.subs[0].Events():
		t.Fatalf("seq %d published twice", e.Seq)
	default:
	}
}
