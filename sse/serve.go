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
	if lastEventID < 0 {
		return agentd.Errorf(agentd.EINVALID, "Last-Event-ID must be a non-negative integer")
	}
	opt = opt.withDefaults()
	sub := hub.Subscribe(conversationID)
	defer sub.Close()
	select {
	case <-sub.Done():
		return sub.Err()
	default:
	}
	first, err := log.Events(ctx, conversationID, lastEventID, opt.PageSize)
	if err != nil {
		err = fmt.Errorf("sse: read event log: %w", err)
	} else if len(first) == 0 && lastEventID > 0 {
		err = checkReached(ctx, log, conversationID, lastEventID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // the client went away before the stream started
		}
		return err
	}

	s := &stream{
		w:    w,
		rc:   http.NewResponseController(w),
		log:  log,
		conv: conversationID,
		last: lastEventID,
		opt:  opt,
	}
	err = s.run(ctx, sub, first)
	if ctx.Err() != nil {
		return nil
	}
	return err
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

// stream is the state of one Serve call.
type stream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	log  EventSource
	conv string
	last int64 // Seq of the last event sent
	opt  Options
	buf  []byte
	// queued is drainQueued's buffer, reused from one write to the next.
	queued []agentd.Event
}

func (s *stream) run(ctx context.Context, sub *Subscription, first []agentd.Event) error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if err := s.setWriteDeadline(); err != nil {
		return err
	}
	// Leave time for the response's final chunk after the handler returns.
	defer s.setWriteDeadline()
	s.w.WriteHeader(http.StatusOK)
	if err := s.flush(); err != nil {
		return err
	}

	if err := s.send(first); err != nil {
		return err
	}
	if len(first) == s.opt.PageSize {
		if err := s.catchUp(ctx); err != nil {
			return err
		}
	}

	tick := s.opt.Tick
	if tick == nil {
		t := time.NewTicker(s.opt.Heartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			return sub.Err()
		case <-tick:
			s.buf = appendComment(s.buf[:0], "ping")
			if err := s.write(); err != nil {
				return err
			}
		case e := <-sub.Events():
			s.queued = drainQueued(s.queued[:0], e, sub.Events())
			err := s.deliver(ctx, s.queued)
			clear(s.queued) // do not pin delivered events to an idle stream
			if err != nil {
				return err
			}
		}
	}
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

// deliver sends the live events of batch, in one write while they follow
// s.last without a gap. Events already sent from the log are skipped; at a
// gap (an event published out of order, or not published) the log, which
// holds everything committed before batch's events were published, fills
// it first.
func (s *stream) deliver(ctx context.Context, batch []agentd.Event) error {
	for len(batch) > 0 {
		n, next := 0, s.last
		for ; n < len(batch) && batch[n].Seq <= next+1; n++ {
			next = max(next, batch[n].Seq)
		}
		if err := s.send(batch[:n]); err != nil {
			return err
		}
		if batch = batch[n:]; len(batch) == 0 {
			return nil
		}
		if err := s.catchUp(ctx); err != nil {
			return err
		}
		if s.last < batch[0].Seq {
			// The log does not have the event yet, so sending it would
			// skip what precedes it for good. End the stream: the client
			// resumes from the log after s.last.
			return errLogBehind
		}
	}
	return nil
}

// errLogBehind ends a stream that received a live event its log cannot
// show yet, which only happens if an event is published before it commits.
var errLogBehind = errors.New("sse: live event is not in the event log")

// catchUp sends everything the log holds after s.last.
func (s *stream) catchUp(ctx context.Context) error {
	for {
		page, err := s.log.Events(ctx, s.conv, s.last, s.opt.PageSize)
		if err != nil {
			return fmt.Errorf("sse: read event log: %w", err)
		}
		if err := s.send(page); err != nil {
			return err
		}
		if len(page) < s.opt.PageSize {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// send writes the events of es that come after s.last, batching up to
// flushAt bytes per write.
func (s *stream) send(es []agentd.Event) error {
	s.buf = s.buf[:0]
	for _, e := range es {
		if e.Seq <= s.last {
			continue
		}
		var err error
		if s.buf, err = appendEvent(s.buf, e); err != nil {
			return err
		}
		s.last = e.Seq
		if len(s.buf) >= flushAt {
			if err := s.write(); err != nil {
				return err
			}
			s.buf = s.buf[:0]
		}
	}
	if len(s.buf) == 0 {
		return nil
	}
	return s.write()
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
	return s.flush()
}

func (s *stream) setWriteDeadline() error {
	err := s.rc.SetWriteDeadline(s.opt.Clock.Now().Add(s.opt.WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("sse: set write deadline: %w", err)
	}
	return nil
}

func (s *stream) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("sse: flush: %w", err)
	}
	return nil
}
