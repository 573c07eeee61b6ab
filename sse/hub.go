package sse

import (
	"errors"
	"sync"

	"github.com/agentd-dev/agentd"
)

// DefaultBuffer is the number of events a subscriber may fall behind before
// the hub cuts it off. An idle subscriber costs its buffer (a pointer a
// slot: the events themselves are shared) plus the stream's goroutine and
// connection.
const DefaultBuffer = 64

var (
	// ErrSlowSubscriber ends a subscription whose buffer was full when an
	// event was published. The client catches up from the durable log when
	// it reconnects with its Last-Event-ID.
	ErrSlowSubscriber = errors.New("sse: subscriber too slow, cut off")
	// ErrHubClosed ends every subscription when the hub closes (server
	// shutdown). It is EUNAVAILABLE, so a stream refused before it started
	// maps to 503.
	ErrHubClosed error = agentd.Errorf(agentd.EUNAVAILABLE, "server is shutting down")
	// ErrUnsubscribed is the reason of a subscription ended by its own Close.
	ErrUnsubscribed = errors.New("sse: unsubscribed")
)

// Hub fans committed events out to the live subscribers of their
// conversation. Publish never blocks: a subscriber whose buffer is full is
// cut off instead of waited on. A Hub is safe for concurrent use; the zero
// value is not usable, use NewHub.
type Hub struct {
	buffer int

	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
	// sent is the highest Seq published of each conversation that has
	// subscribers (dropped with its last one), so that PublishFeed skips
	// what the direct path published already.
	sent    map[string]int64
	count   int
	cutOffs int64
	closed  bool
}

// HubOption configures a Hub.
type HubOption func(*Hub)

// WithBuffer sets how many undelivered events each subscriber may hold
// before it is cut off (default DefaultBuffer). Values below 1 are ignored.
func WithBuffer(n int) HubOption {
	return func(h *Hub) {
		if n > 0 {
			h.buffer = n
		}
	}
}

// NewHub returns an open hub with no subscribers.
func NewHub(opts ...HubOption) *Hub {
	h := &Hub{buffer: DefaultBuffer, subs: make(map[string]map[*Subscription]struct{}), sent: make(map[string]int64)}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Subscription is one live subscriber of a conversation. Its events arrive
// on Events in publish order until Done is closed.
type Subscription struct {
	hub  *Hub
	conv string
	ch   chan *agentd.Event // shared by every subscriber: read only
	done chan struct{}
	err  error // guarded by hub.mu; set once, when done is closed
}

// Subscribe registers a subscriber for conversationID's events published
// from now on. On a closed hub the subscription is returned already ended
// with ErrHubClosed. The caller must Close it.
func (h *Hub) Subscribe(conversationID string) *Subscription {
	s := &Subscription{
		hub:  h,
		conv: conversationID,
		ch:   make(chan *agentd.Event, h.buffer),
		done: make(chan struct{}),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.err = ErrHubClosed
		close(s.done)
		return s
	}
	m := h.subs[conversationID]
	if m == nil {
		m = make(map[*Subscription]struct{})
		h.subs[conversationID] = m
	}
	m[s] = struct{}{}
	h.count++
	return s
}

// Publish hands e to every live subscriber of e.ConversationID without
// blocking. A subscriber whose buffer is full is removed and its Done
// closed with ErrSlowSubscriber. Publish on a closed hub does nothing.
// Callers publish an event only after it is committed to the durable log.
func (h *Hub) Publish(e agentd.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked(e)
}

// publishNew is Publish unless an event of e's conversation with e's Seq
// or a later one was published since its subscribers came: then every one
// of them has had it, or will read it from the log (a stream fills a gap
// in Seq from the log), and e is skipped. It is PublishFeed's path, for
// the events a replica committed itself reach the hub twice: from its
// commit and from the feed.
func (h *Hub) publishNew(e agentd.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if last, ok := h.sent[e.ConversationID]; ok && e.Seq <= last {
		return
	}
	h.publishLocked(e)
}

// publishLocked is Publish with h.mu held.
func (h *Hub) publishLocked(e agentd.Event) {
	m := h.subs[e.ConversationID]
	if len(m) == 0 {
		return
	}
	if e.Seq > h.sent[e.ConversationID] {
		h.sent[e.ConversationID] = e.Seq
	}
	p := &e // one copy for every subscriber; a buffered pointer is 8 bytes
	for s := range m {
		select {
		case s.ch <- p:
		default:
			h.cutOffs++
			h.removeLocked(s, ErrSlowSubscriber)
		}
	}
}

// Close ends every subscription with ErrHubClosed and refuses new ones, so
// that streams end and http.Server.Shutdown does not wait on them. It is
// idempotent; register it with http.Server.RegisterOnShutdown.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, m := range h.subs {
		for s := range m {
			h.removeLocked(s, ErrHubClosed)
		}
	}
}

// Subscribers returns the number of live subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// CutOffs returns how many subscribers have been cut off for being slow.
func (h *Hub) CutOffs() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cutOffs
}

// removeLocked ends s with reason if it is still live. h.mu must be held.
func (h *Hub) removeLocked(s *Subscription, reason error) {
	if s.err != nil {
		return
	}
	s.err = reason
	close(s.done)
	m := h.subs[s.conv]
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, s.conv)
		delete(h.sent, s.conv)
	}
	h.count--
}

// Events returns the channel on which published events arrive. It is never
// closed; stop reading when Done is closed. The events are shared with the
// other subscribers and must not be changed.
func (s *Subscription) Events() <-chan *agentd.Event { return s.ch }

// Done is closed when the subscription ends: cut off for being slow, hub
// closed, or Close called. Events already buffered stay readable.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended (ErrSlowSubscriber, ErrHubClosed
// or ErrUnsubscribed), or nil while it is live.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is idempotent and safe to call
// concurrently with Publish and Hub.Close.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.removeLocked(s, ErrUnsubscribed)
}
