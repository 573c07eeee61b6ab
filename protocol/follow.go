package protocol

import (
	"context"
	"errors"
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
// from the log (an sse.Replay) — until the run finishes (run_finished) or
// parks (it waits and every unresolved call of its step is parked), and
// returns how it ended. A run that has already finished or parked ends at
// once. Follow returns ctx's error when the client goes away (the run goes
// on), the hub's error on shutdown, and the sink's or the log's error as
// is.
func (s *Service) Follow(ctx context.Context, t *Turn, sink Sink) (End, error) {
	if t.RunID == "" {
		return End{Status: agentd.RunCompleted}, nil
	}
	f := &follower{s: s, t: t, sink: sink, check: true}
	f.replay = sse.NewReplay(s.store, t.Conversation.ID, t.After, pageSize, f)
	f.sub = s.hub.Subscribe(t.Conversation.ID)
	defer func() { f.sub.Close() }()
	tick := time.NewTicker(s.opt.Heartbeat)
	defer tick.Stop()
	fromLog := true // the log has events the stream has not sent
	for {
		if fromLog {
			fromLog = false
			if err := f.replay.CatchUp(ctx); err != nil {
				return f.ended(err)
			}
		}
		if f.check {
			f.check = false
			if end, done, err := f.state(ctx); done || err != nil {
				if err == nil {
					// What committed with the state read is sent too.
					if err = f.replay.CatchUp(ctx); errors.Is(err, errRunEnded) {
						err = nil
					}
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
			f.live[0] = *p
			if err := f.replay.Deliver(ctx, f.live[:]); err != nil {
				return f.ended(err)
			}
		}
	}
}

// follower is the state of one Follow call: the sse.Receiver of its
// Replay.
type follower struct {
	s      *Service
	t      *Turn
	sink   Sink
	sub    *sse.Subscription
	replay *sse.Replay
	live   [1]agentd.Event // the live event being delivered
	check  bool            // the run's state must be read before waiting
	end    End             // how the run ended, once Receive returned errRunEnded
}

// errRunEnded is Receive's error for the event that ended the followed
// run (run_finished): the replay stops there, and Follow returns f.end.
var errRunEnded = errors.New("protocol: the run ended")

// ended is Follow's result for the error that stopped the replay.
func (f *follower) ended(err error) (End, error) {
	if errors.Is(err, errRunEnded) {
		return f.end, nil
	}
	return End{}, err
}

// Flush implements sse.Receiver: the sink gets each item as it comes.
func (f *follower) Flush() error { return nil }

// Receive implements sse.Receiver: it hands e to the sink when it is of
// the followed run, and returns errRunEnded when it ended the run.
func (f *follower) Receive(ctx context.Context, e agentd.Event) error {
	p, err := agentd.DecodeEvent(e)
	if err != nil {
		return err
	}
	if runOf(p) != f.t.RunID {
		return nil
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
		return err
	}
	if err := f.sink.Item(it); err != nil {
		return err
	}
	switch p := p.(type) {
	case *agentd.RunFinishedPayload:
		f.end = End{Status: p.Status, Error: p.Error}
		return errRunEnded
	case *agentd.RunWaitingPayload, *agentd.ToolCallResultPayload, *agentd.ConfirmationResolvedPayload, *agentd.ToolCallRefusedPayload,
		*agentd.ConfirmationRequiredPayload: // an approved call parked again
		f.check = true // the run may have parked
	}
	return nil
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
