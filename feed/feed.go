// Package feed implements agentd.Feed, the one event feed: a consumer
// follows every committed event of every conversation (or of one tenant, or
// project), in position order, from a position it chooses, with no gap and
// no duplicate.
//
// Correctness rests on the store alone. A subscription re-reads "events
// after my position" from the store (agentd.EventLog.EventsAfter) whenever it
// has nothing buffered and is woken: by Notify (the loop's commits call
// Publish, which notifies), and by a poll tick, so that events committed by
// another process sharing the database are seen too, and a missed wake-up
// delays an event but never loses it. Memory is bounded: a subscription
// holds at most one page of events, read only when its consumer asks for
// more, so a slow consumer makes nothing buffer up.
package feed

import (
	"context"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
)

// EventReader is what the feed reads of the store: the one feed read of
// agentd.EventLog.
type EventReader interface {
	// EventsAfter returns up to f.Limit events matching f with Position >
	// f.After, in position order (agentd.EventLog.EventsAfter).
	EventsAfter(ctx context.Context, f agentd.FeedFilter) ([]agentd.Event, error)
}

// Defaults of Options.
const (
	// DefaultPoll is how often a waiting subscription re-reads the store
	// without a wake-up.
	DefaultPoll = time.Second
	// DefaultPageSize is the number of events a subscription reads at a
	// time when its filter sets no Limit.
	DefaultPageSize = 256
)

// The errors of a subscription that ended; both are EUNAVAILABLE and wrap
// agentd.ErrFeedEnded.
var (
	// ErrClosed is what Next and Follow return once the feed is closed.
	ErrClosed error = &agentd.Error{Code: agentd.EUNAVAILABLE, Message: "the event feed is closed", Detail: agentd.ErrFeedEnded}
	// ErrUnsubscribed is what Next returns once its subscription is closed.
	ErrUnsubscribed error = &agentd.Error{Code: agentd.EUNAVAILABLE, Message: "the feed subscription is closed", Detail: agentd.ErrFeedEnded}
)

// Options tunes a Feed. The zero value gives the defaults.
type Options struct {
	// Poll is the interval at which waiting subscriptions re-read the
	// store even when nothing notified them (default DefaultPoll): the bound
	// on how late an event committed by another process is seen.
	Poll time.Duration
	// Tick, when non-nil, replaces the poll ticker: every receive wakes
	// every waiting subscription. Tests use it so that they need not wait.
	Tick <-chan time.Time
}

// Feed is an agentd.Feed over a Source. It is safe for concurrent use; the
// zero value is not usable, use New, and Close it when done.
type Feed struct {
	src  EventReader
	done chan struct{} // closed by Close
	poll sync.WaitGroup

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
}

var _ agentd.Feed = (*Feed)(nil)

// New returns an open feed reading src. It starts one goroutine, the poll
// ticker, which Close stops.
func New(src EventReader, opt Options) *Feed {
	f := &Feed{src: src, done: make(chan struct{}), subs: map[*Subscription]struct{}{}}
	tick, stop := opt.Tick, func() {}
	if tick == nil {
		if opt.Poll <= 0 {
			opt.Poll = DefaultPoll
		}
		t := time.NewTicker(opt.Poll)
		tick, stop = t.C, t.Stop
	}
	f.poll.Go(func() {
		defer stop()
		for {
			select {
			case <-f.done:
				return
			case <-tick:
				f.Notify()
			}
		}
	})
	return f
}

// Publish wakes every waiting subscription; e itself is not used: the
// subscriptions read it, and whatever else committed, from the store. It
// never blocks, so the feed is a loop.Publisher. Callers publish only
// committed events.
func (f *Feed) Publish(agentd.Event) { f.Notify() }

// Notify wakes every waiting subscription, which then re-reads the store.
// It never blocks.
func (f *Feed) Notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		select {
		case s.wake <- struct{}{}:
		default: // already woken; it will read everything committed so far
		}
	}
}

// Follow returns a subscription to the events matching filter with
// Position > filter.After, read in pages of filter.Limit events
// (DefaultPageSize when filter.Limit is 0, agentd.MaxFeedPage at most).
// EINVALID when filter is invalid; ErrClosed when the feed is closed. The
// caller must Close the subscription.
func (f *Feed) Follow(filter agentd.FeedFilter) (agentd.FeedSubscription, error) {
	if err := filter.Check(); err != nil {
		return nil, err
	}
	if filter.Limit == 0 {
		filter.Limit = DefaultPageSize
	}
	s := &Subscription{feed: f, filter: filter, wake: make(chan struct{}, 1), done: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	f.subs[s] = struct{}{}
	return s, nil
}

// Subscribers returns the number of open subscriptions.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Close ends every subscription (a waiting Next returns ErrClosed), refuses
// new ones and stops the poll ticker, waiting for its goroutine. It is
// idempotent.
func (f *Feed) Close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
		clear(f.subs)
	}
	f.mu.Unlock()
	f.poll.Wait()
}

// Subscription is one consumer's place in a Feed (agentd.FeedSubscription).
type Subscription struct {
	feed   *Feed
	filter agentd.FeedFilter // After: the position of the newest event read
	wake   chan struct{}     // capacity 1: a pending wake-up
	done   chan struct{}     // closed by Close
	once   sync.Once
	page   []agentd.Event // read from the store, not yet returned
}

// Next returns the next event matching the subscription's filter, reading
// a page from the store when none is buffered and waiting for a wake-up
// when the store has nothing new. It returns ctx.Err() when ctx ends,
// ErrUnsubscribed after Close, ErrClosed once the feed is closed (also with
// events still buffered), and the store's error when a read fails; the
// subscription keeps its place through any error. Events come in strictly
// increasing position order, each once.
func (s *Subscription) Next(ctx context.Context) (agentd.Event, error) {
	for {
		if err := s.ended(ctx); err != nil {
			return agentd.Event{}, err
		}
		if len(s.page) > 0 {
			e := s.page[0]
			s.page[0] = agentd.Event{} // release its data
			s.page = s.page[1:]
			return e, nil
		}
		select {
		case <-s.wake: // the read below sees whatever that wake-up announced
		default:
		}
		page, err := s.feed.src.EventsAfter(ctx, s.filter)
		if err != nil {
			return agentd.Event{}, err
		}
		kept := page[:0]
		for _, e := range page {
			if e.Position > s.filter.After { // never an event twice, whatever the store does
				kept = append(kept, e)
				s.filter.After = e.Position
			}
		}
		s.page = kept
		if len(s.page) > 0 {
			continue
		}
		// Nothing new. A wake-up that came after the read is pending in
		// s.wake, so this returns at once and reads again.
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-s.feed.done:
		case <-s.wake:
		}
	}
}

// ended returns why Next must not read: ctx ended, the subscription or the
// feed closed.
func (s *Subscription) ended(ctx context.Context) error {
	select {
	case <-s.done:
		return ErrUnsubscribed
	case <-s.feed.done:
		return ErrClosed
	default:
	}
	return ctx.Err()
}

// Close ends the subscription: a waiting Next returns ErrUnsubscribed, and
// the feed stops waking it. It is idempotent and safe to call from any
// goroutine.
func (s *Subscription) Close() {
	s.once.Do(func() {
		close(s.done)
		s.feed.mu.Lock()
		delete(s.feed.subs, s)
		s.feed.mu.Unlock()
	})
}
