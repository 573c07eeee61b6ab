package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentd-dev/agentd"
)

// EventSource reads a conversation's durable event log: the two reads of
// agentd.EventLog a stream makes.
type EventSource interface {
	// Events returns up to limit events of a conversation with Seq >
	// afterSeq, in Seq order.
	Events(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]agentd.Event, error)
	// LastSeq returns the Seq of a conversation's newest event, 0 when it
	// has none.
	LastSeq(ctx context.Context, conversationID string) (int64, error)
}

// Defaults of Options.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultPageSize     = 256
)

// Options tunes one stream. The zero value gives the defaults.
type Options struct {
	// Heartbeat is the interval of the ": ping" comment (default 15s).
	Heartbeat time.Duration
	// Tick, when non-nil, replaces the heartbeat ticker: a ping is written
	// on each receive. Tests use it so that they need not wait.
	Tick <-chan time.Time
	// WriteTimeout bounds each write and flush (default 10s). It replaces
	// the server's WriteTimeout for the stream.
	WriteTimeout time.Duration
	// PageSize is the number of events read from the log at a time
	// (default 256).
	PageSize int
	// Clock gives the time write deadlines are computed from (default
	// agentd.SystemClock).
	Clock agentd.Clock
}

func (o Options) withDefaults() Options {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Clock == nil {
		o.Clock = agentd.SystemClock{}
	}
	return o
}

// flushAt is how many bytes of a replay page are buffered before they are
// written out.
const flushAt = 64 << 10

// Serve streams conversationID's events to w until the client goes away,
// the subscriber is cut off, the hub closes or a write fails.
//
// It promises the client exactly the events with Seq > lastEventID, in
// order, each once: it subscribes to hub first, then replays the durable
// log in pages, then forwards live events, skipping any it already sent and
// filling any gap from the log. This relies on every event being committed
// to log before it is published to hub.
//
// The response carries Content-Type: text/event-stream, Cache-Control:
// no-cache and X-Accel-Buffering: no, and a ": ping" comment every
// Heartbeat. Every write gets its own deadline (WriteTimeout) and is
// flushed, so a server WriteTimeout does not end the stream.
//
// A lastEventID the log has not reached (greater than the conversation's
// newest Seq when Serve checks, after subscribing) is refused with EINVALID:
// the client cannot have seen it, and the stream would skip every event up
// to it in silence. An id equal to the newest Seq is accepted.
//
// Serve uses log only while it reads a page (the replay, a gap), so a live
// stream holds no database connection. A read that must wait for one (a
// bounded pool) waits at most until ctx ends.
//
// Serve returns nil when ctx ends (the client went away), also while it
// waits for the first read, ErrSlowSubscriber when the hub cut the stream
// off, ErrHubClosed on shutdown, or the write or log error that ended the
// stream. When the hub is already closed, the first log read fails or
// lastEventID is negative or past the newest event, it returns the error
// before writing anything, so the caller can still answer with an error
// status. The caller must not write to w after Serve returns.
func Serve(ctx context.Context, w http.ResponseWriter, hub *Hub, log EventSource, conversationID string, lastEventID int64, opt Options) error {
	return NewStreamer(hub, log, opt).Serve(ctx, w, conversationID, lastEventID)
}

// Streamer serves the streams of one hub and event log with one set of
// Options: a server builds it once and calls Serve for each stream.
type Streamer struct {
	hub *Hub
	log EventSource
	opt Options
}

// NewStreamer returns the Streamer of hub and log; opt's zero fields get
// their defaults.
func NewStreamer(hub *Hub, log EventSource, opt Options) *Streamer {
	return &Streamer{hub: hub, log: log, opt: opt.withDefaults()}
}

// Serve is the package's Serve with st's hub, log and options.
func (st *Streamer) Serve(ctx context.Context, w http.ResponseWriter, conversationID string, lastEventID int64) error {
	if lastEventID < 0 {
		return agentd.Errorf(agentd.EINVALID, "Last-Event-ID must be a non-negative integer")
	}
	s := &stream{w: w, log: st.log, conv: conversationID, opt: &st.opt}
	s.replay = NewReplay(st.log, conversationID, lastEventID, st.opt.PageSize, s)
	sub := st.hub.Subscribe(conversationID)
	defer s.close(sub)
	// The frames of Serve and of what it calls while a stream waits for
	// events stay on the handler goroutine's stack as long as the stream
	// is open: their work is in open, which returns first.
	err := s.open(ctx, sub)
	if err == nil {
		err = s.live(ctx, sub)
	}
	if ctx.Err() != nil {
		return nil // the client went away, perhaps before the stream started
	}
	return err
}

// open reads the log's first page and, if that works, starts the response
// and sends everything the log holds after s.last.
func (s *stream) open(ctx context.Context, sub *Subscription) error {
	select {
	case <-sub.Done():
		return sub.Err()
	default:
	}
	first, err := s.replay.Page(ctx)
	if err != nil {
		return err
	}
	if last := s.replay.Last(); len(first) == 0 && last > 0 {
		if err := checkReached(ctx, s.log, s.conv, last); err != nil {
			return err
		}
	}
	return s.start(ctx, first)
}

// checkReached returns EINVALID when lastEventID is past the newest event of
// conversationID's log, naming that event so the client can resume from it.
func checkReached(ctx context.Context, log EventSource, conversationID string, lastEventID int64) error {
	newest, err := log.LastSeq(ctx, conversationID)
	if err != nil {
		return fmt.Errorf("sse: read event log: %w", err)
	}
	if lastEventID > newest {
		return agentd.Errorf(agentd.EINVALID,
			"Last-Event-ID %d is past the newest event %d of this conversation: reconnect without Last-Event-ID, or with Last-Event-ID %d",
			lastEventID, newest, newest)
	}
	return nil
}

// stream is the state of one Serve call: the Receiver of its Replay.
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	log    EventSource
	conv   string
	replay *Replay // where the stream is: the last event sent
	opt    *Options
	buf    []byte
	// queued is drainQueued's buffer, reused from one write to the next.
	queued []agentd.Event
	// ticker is the heartbeat's, once the stream is live (without
	// Options.Tick).
	ticker *time.Ticker
}

// start writes the response's header and the events of first, then
// catches up with the log.
func (s *stream) start(ctx context.Context, first []agentd.Event) error {
	s.rc = http.NewResponseController(s.w)
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if err := s.setWriteDeadline(); err != nil {
		return err
	}
	s.w.WriteHeader(http.StatusOK)
	if err := s.flushResponse(); err != nil {
		return err
	}
	if err := s.replay.Send(ctx, first); err != nil {
		return err
	}
	if s.replay.Full(first) {
		return s.replay.CatchUp(ctx)
	}
	return nil
}

// close ends the subscription and the heartbeat, and leaves time for the
// response's final chunk after the handler returns.
func (s *stream) close(sub *Subscription) {
	sub.Close()
	if s.ticker != nil {
		s.ticker.Stop()
	}
	if s.rc != nil {
		_ = s.setWriteDeadline()
	}
}

// live forwards live events and heartbeats until the stream ends.
func (s *stream) live(ctx context.Context, sub *Subscription) error {
	tick := s.opt.Tick
	if tick == nil {
		s.ticker = time.NewTicker(s.opt.Heartbeat)
		tick = s.ticker.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			return sub.Err()
		case <-tick:
			if err := s.ping(); err != nil {
				return err
			}
		case e := <-sub.Events():
			if err := s.forward(ctx, e, sub.Events()); err != nil {
				return err
			}
		}
	}
}

// ping writes a heartbeat comment.
func (s *stream) ping() error {
	s.buf = appendComment(s.buf[:0], "ping")
	err := s.write()
	s.buf = s.buf[:0] // the next batch starts empty
	return err
}

// forward delivers first and the events queued behind it in one write.
func (s *stream) forward(ctx context.Context, first *agentd.Event, ch <-chan *agentd.Event) error {
	s.queued = drainQueued(s.queued[:0], first, ch)
	err := s.replay.Deliver(ctx, s.queued)
	clear(s.queued) // do not pin delivered events to an idle stream
	return err
}

// drainMax bounds how many queued live events one write carries.
const drainMax = 64

// drainQueued returns first and the events already queued behind it on ch (at
// most drainMax in all), without waiting, so that what is queued goes out
// in one write.
func drainQueued(into []agentd.Event, first *agentd.Event, ch <-chan *agentd.Event) []agentd.Event {
	into = append(into, *first)
	for len(into) < drainMax {
		select {
		case e := <-ch:
			into = append(into, *e)
		default:
			return into
		}
	}
	return into
}

// Receive implements Receiver: it adds e to the write in progress, writing
// it out once it holds flushAt bytes.
func (s *stream) Receive(_ context.Context, e agentd.Event) error {
	var err error
	if s.buf, err = appendEvent(s.buf, e); err != nil {
		return err
	}
	if len(s.buf) >= flushAt {
		if err := s.write(); err != nil {
			return err
		}
		s.buf = s.buf[:0]
	}
	return nil
}

// Flush implements Receiver: it writes what the batch left in s.buf.
func (s *stream) Flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	err := s.write()
	s.buf = s.buf[:0]
	return err
}

// write writes s.buf under a fresh deadline and flushes it.
func (s *stream) write() error {
	if err := s.setWriteDeadline(); err != nil {
		return err
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("sse: write: %w", err)
	}
	if cap(s.buf) > 4*flushAt {
		s.buf = nil // do not pin a large event's buffer to an idle stream
	}
	return s.flushResponse()
}

func (s *stream) setWriteDeadline() error {
	err := s.rc.SetWriteDeadline(s.opt.Clock.Now().Add(s.opt.WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("sse: set write deadline: %w", err)
	}
	return nil
}

func (s *stream) flushResponse() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("sse: flush: %w", err)
	}
	return nil
}
