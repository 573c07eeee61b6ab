package sse

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentd-dev/agentd"
)

// Receiver is where a Replay sends a conversation's events.
type Receiver interface {
	// Receive gets the next event: its Seq is above that of every event
	// received before. An error ends the replay's current operation, and
	// the Replay returns it as is.
	Receive(ctx context.Context, e agentd.Event) error
	// Flush ends a batch of received events (a page of the log, or live
	// events that arrived together); it is called after each batch that
	// received at least one event.
	Flush() error
}

// Replay is the position of a replay-then-live stream of one
// conversation: it promises its Receiver exactly the events with Seq above
// where it started, in order, each once — from the durable log (CatchUp),
// then live (Deliver), skipping any event already sent and filling any gap
// from the log. It relies on every event being committed to the log before
// it is published to the hub. Serve and package protocol's Follow stream
// through it; each holds its own subscription to the hub.
type Replay struct {
	log      EventSource
	conv     string
	last     int64 // Seq of the last event received
	pageSize int
	to       Receiver
}

// NewReplay returns the Replay of conversationID's events with Seq >
// after, read from log pageSize events at a time and sent to to.
func NewReplay(log EventSource, conversationID string, after int64, pageSize int, to Receiver) *Replay {
	return &Replay{log: log, conv: conversationID, last: after, pageSize: pageSize, to: to}
}

// Last is the Seq of the last event received (where the replay started,
// until one is).
func (r *Replay) Last() int64 { return r.last }

// Page reads the log's next page after Last, sending nothing: up to the
// page size of events, in Seq order.
func (r *Replay) Page(ctx context.Context) ([]agentd.Event, error) {
	page, err := r.log.Events(ctx, r.conv, r.last, r.pageSize)
	if err != nil {
		return nil, fmt.Errorf("sse: read event log: %w", err)
	}
	return page, nil
}

// Full reports whether page is a whole page: the log may hold more after
// it.
func (r *Replay) Full(page []agentd.Event) bool { return len(page) == r.pageSize }

// Send sends the events of es (in Seq order) that come after Last, then
// flushes if it sent any.
func (r *Replay) Send(ctx context.Context, es []agentd.Event) error {
	sent := false
	for _, e := range es {
		if e.Seq <= r.last {
			continue
		}
		if err := r.to.Receive(ctx, e); err != nil {
			return err
		}
		r.last, sent = e.Seq, true
	}
	if !sent {
		return nil
	}
	return r.to.Flush()
}

// CatchUp sends everything the log holds after Last, page by page.
func (r *Replay) CatchUp(ctx context.Context) error {
	for {
		page, err := r.Page(ctx)
		if err != nil {
			return err
		}
		if err := r.Send(ctx, page); err != nil {
			return err
		}
		if !r.Full(page) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Deliver sends the live events of batch (as the hub published them), in
// one batch while they follow Last without a gap. Events already sent
// from the log are skipped; at a gap (an event published out of order, or
// not published) the log, which holds everything committed before batch's
// events were published, fills it first. A live event the log cannot show
// even then would be skipped for good if it were sent: Deliver returns
// errLogBehind, and the stream should end (its client resumes from the
// log after Last).
func (r *Replay) Deliver(ctx context.Context, batch []agentd.Event) error {
	for len(batch) > 0 {
		n, next := 0, r.last
		for ; n < len(batch) && batch[n].Seq <= next+1; n++ {
			next = max(next, batch[n].Seq)
		}
		if err := r.Send(ctx, batch[:n]); err != nil {
			return err
		}
		if batch = batch[n:]; len(batch) == 0 {
			return nil
		}
		if err := r.CatchUp(ctx); err != nil {
			return err
		}
		if r.last < batch[0].Seq {
			return errLogBehind
		}
	}
	return nil
}

// errLogBehind ends a stream that received a live event its log cannot
// show yet, which only happens if an event is published before it commits.
var errLogBehind = errors.New("sse: live event is not in the event log")
