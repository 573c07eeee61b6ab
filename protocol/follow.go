package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// Item is one event of a followed run, decoded, with the call it is about
// when it announces one (tool_call_started, confirmation_required,
// tool_call_refused): the encoders need the call's message and arguments.
type Item struct {
	Event   agentd.Event
	Payload agentd.EventPayload
	Call    *agentd.ToolCall
	// Decided is set on the tool_call_started of a call this request
	// decided (Call is nil then): it was announced when it parked.
	Decided bool
}

// End is how a followed run's stream ended.
type End struct {
	// Status is the run's status: completed, failed or cancelled when it
	// finished, waiting when it parked.
	Status agentd.RunStatus
	// Error is a failed run's message.
	Error string
	// Parked are the calls the run waits on (Status waiting), in order.
	Parked []agentd.ToolCall
}

// Sink receives a followed run's items, and a ping every heartbeat while
// nothing happens.
type Sink interface {
	Item(Item) error
	Ping() error
}

// pageSize is how many events are read from the log at a time.
const pageSize = 256

// Follow sends t's run's events with Seq > t.After to sink, in order, each
// once — from the durable log, then live from the hub, filling any gap
// from the log — until the run finishes (run_finished) or parks (it waits
// and every unresolved call of its step is parked), and returns how it
// ended. A run that has already finished or parked ends at once. Follow
// returns ctx's error when the client goes away (the run goes on), the
// hub's error on shutdown, and the sink's or the log's error as is.
func (s *Service) Follow(ctx context.Context, t *Turn, sink Sink) (End, error) {
	if t.RunID == "" {
		return End{Status: agentd.RunCompleted}, nil
	}
	f := &follower{s: s, t: t, sink: sink, last: t.After, check: true}
	f.sub = s.hub.Subscribe(t.Conversation.ID)
	defer func() { f.sub.Close() }()
	tick := time.NewTicker(s.opt.Heartbeat)
	defer tick.Stop()
	fromLog := true // the log has events the stream has not sent
	for {
		if fromLog {
			fromLog = false
			if end, done, err := f.catchUp(ctx); done || err != nil {
				return end, err
			}
		}
		if f.check {
			f.check = false
			if end, done, err := f.state(ctx); done || err != nil {
				if err == nil {
					// What committed with the state read is sent too.
					_, _, err = f.catchUp(ctx)
				}
				return end, err
			}
		}
		select {
		case <-ctx.Done():
			return End{}, ctx.Err()
		case <-tick.C:
			if err := sink.Ping(); err != nil {
				return End{}, err
			}
		case <-f.sub.Done():
			if !errors.Is(f.sub.Err(), sse.ErrSlowSubscriber) {
				return End{}, f.sub.Err()
			}
			// Cut off: subscribe again; the log has what was missed.
			f.sub.Close()
			f.sub = s.hub.Subscribe(t.Conversation.ID)
			fromLog = true
		case p := <-f.sub.Events():
			e := *p
			switch {
			case e.Seq <= f.last: // sent from the log
			case e.Seq == f.last+1:
				if end, done, err := f.send(ctx, e); done || err != nil {
					return end, err
				}
			default:
				fromLog = true // a gap: the log has what is missing, e included
			}
		}
	}
}

type follower struct {
	s     *Service
	t     *Turn
	sink  Sink
	sub   *sse.Subscription
	last  int64
	check bool // the run's state must be read before waiting
}

// catchUp sends every event the log holds after f.last.
func (f *follower) catchUp(ctx context.Context) (End, bool, error) {
	for {
		page, err := f.s.store.Events(ctx, f.t.Conversation.ID, f.last, pageSize)
		if err != nil {
			return End{}, false, fmt.Errorf("protocol: read event log: %w", err)
		}
		for _, e := range page {
			if end, done, err := f.send(ctx, e); done || err != nil {
				return end, done, err
			}
		}
		if len(page) < pageSize {
			return End{}, false, nil
		}
	}
}

// send hands e to the sink when it is of the followed run and reports
// whether it ended the run.
func (f *follower) send(ctx context.Context, e agentd.Event) (End, bool, error) {
	if e.Seq <= f.last {
		return End{}, false, nil
	}
	f.last = e.Seq
	p, err := agentd.DecodeEvent(e)
	if err != nil {
		return End{}, false, err
	}
	if runOf(p) != f.t.RunID {
		return End{}, false, nil
	}
	it := Item{Event: e, Payload: p}
	switch p := p.(type) {
	case *agentd.ToolCallStartedPayload:
		// Not read for a call this request approved: its tool is starting.
		if it.Decided = f.t.decided(p.ToolCallID); !it.Decided {
			it.Call, err = f.s.store.ToolCall(ctx, p.ToolCallID)
		}
	case *agentd.ConfirmationRequiredPayload:
		it.Call, err = f.s.store.ToolCall(ctx, p.ToolCallID)
	case *agentd.ToolCallRefusedPayload:
		it.Call, err = f.s.store.ToolCall(ctx, p.ToolCallID)
	}
	if err != nil {
		return End{}, false, err
	}
	if err := f.sink.Item(it); err != nil {
		return End{}, false, err
	}
	switch p := p.(type) {
	case *agentd.RunFinishedPayload:
		return End{Status: p.Status, Error: p.Error}, true, nil
	case *agentd.RunWaitingPayload, *agentd.ToolCallResultPayload, *agentd.ConfirmationResolvedPayload, *agentd.ToolCallRefusedPayload,
		*agentd.ConfirmationRequiredPayload: // an approved call parked again
		f.check = true // the run may have parked
	}
	return End{}, false, nil
}

// state reads the run and reports whether it has ended or parked.
func (f *follower) state(ctx context.Context) (End, bool, error) {
	run, err := f.s.store.Run(ctx, f.t.RunID)
	if err != nil {
		return End{}, false, err
	}
	if !run.Status.Active() {
		return End{Status: run.Status, Error: run.Reason}, true, nil
	}
	parked, ok, err := f.s.parkedOf(ctx, run)
	if err != nil || !ok {
		return End{}, false, err
	}
	return End{Status: agentd.RunWaiting, Parked: parked}, true, nil
}

// parked returns the parked calls of the run's current step, and whether
// the run is parked: waiting, with every unresolved call of its step parked.
func (s *Service) parked(ctx context.Context, runID string) ([]agentd.ToolCall, bool, error) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return nil, false, err
	}
	return s.parkedOf(ctx, run)
}

// parkedOf is parked for a run already read.
func (s *Service) parkedOf(ctx context.Context, run *agentd.Run) ([]agentd.ToolCall, bool, error) {
	if run.Status != agentd.RunWaiting {
		return nil, false, nil
	}
	calls, err := s.store.RunToolCalls(ctx, run.ID)
	if err != nil {
		return nil, false, err
	}
	var parked []agentd.ToolCall
	for _, c := range calls {
		switch {
		case c.Step != run.Step || c.Status.Terminal():
		case c.Status == agentd.StatusRequiresConfirmation:
			parked = append(parked, c)
		default:
			return parked, false, nil // a call of the step is still running
		}
	}
	return parked, len(parked) > 0, nil
}

// runOf is the run an event is of ("" for none).
func runOf(p agentd.EventPayload) string {
	switch p := p.(type) {
	case *agentd.RunStartedPayload:
		return p.RunID
	case *agentd.TextDeltaPayload:
		return p.RunID
	case *agentd.MessagePayload:
		return p.RunID
	case *agentd.ToolCallStartedPayload:
		return p.RunID
	case *agentd.ConfirmationRequiredPayload:
		return p.RunID
	case *agentd.ConfirmationResolvedPayload:
		return p.RunID
	case *agentd.ToolCallRefusedPayload:
		return p.RunID
	case *agentd.ToolCallResultPayload:
		return p.RunID
	case *agentd.RunWaitingPayload:
		return p.RunID
	case *agentd.RunFinishedPayload:
		return p.RunID
	case *agentd.ErrorPayload:
		return p.RunID
	}
	return ""
}
