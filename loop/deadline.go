package loop

import (
	"context"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
)

// Timer is an armed call of a function, as time.AfterFunc returns.
type Timer interface {
	// Stop keeps the function from being called if it has not been yet,
	// and reports whether it did.
	Stop() bool
}

// deadlineTimer is the engine's one timer for every parked call and input
// request (SPEC §8, §12.3, docs/loop.md): it is armed to the earliest
// deadline in the store, and
// when it fires the expiry goroutine expires what is due and arms it again
// from the store. A parked call holds no timer of its own.
type deadlineTimer struct {
	mu sync.Mutex
	// fire, non-nil once enabled, wakes the expiry goroutine (capacity 1).
	fire chan struct{}
	// at is the instant the timer is armed to; zero while it is not armed
	// (or while a pass runs: the pass arms it when done).
	at    time.Time
	timer Timer
}

// enable turns the deadline timer on with one pass pending: the first
// expires what came due while no process ran.
func (d *deadlineTimer) enable() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fire = make(chan struct{}, 1)
	d.fire <- struct{}{}
}

// signal asks for an expiry pass; it never blocks.
func (d *deadlineTimer) signal() {
	select {
	case d.fire <- struct{}{}:
	default:
	}
}

// timers is the part of the engine that keeps time for parked calls:
// their deadlines (one timer armed to the earliest, deadlineTimer), their
// reminders (reminderSet) and their extensions. Each of the two holds its
// own lock; the rules they follow are the pure functions dueReminders,
// reminderWindows and confirm.CheckExtension.
type timers struct {
	*core
	store     timerStore
	deadline  deadlineTimer
	reminders reminderSet
	// wake tells a run's driver that one of its calls changed (the
	// drivers'), after an expiry.
	wake func(runID string)
	// mayDecide reports whether p may decide c now (the deciding part's
	// rule), for an extension.
	mayDecide func(ctx context.Context, p agentd.Principal, c *agentd.ToolCall) error
	// expireInputs expires the input requests that are due (the
	// answerer's) and returns how many and the earliest deadline left: the
	// one timer keeps their deadlines too.
	expireInputs func(ctx context.Context) (int, time.Time, error)
}

// enable turns the background expiry on with one pass pending (Start).
func (e *timers) enable() { e.deadline.enable() }

// signal asks for an expiry pass; it never blocks.
func (e *timers) signal() { e.deadline.signal() }

// startExpiry starts the one goroutine of the background expiry: it runs a
// pass each time the timer fires (and once at start) until the engine
// closes, and leaves no timer armed when it returns.
func (e *timers) startExpiry() {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.disarm()
		for {
			select {
			case <-e.ctx.Done():
				return
			case <-e.deadline.fire:
				e.expirePass()
			}
		}
	}()
}

// expirePass expires every parked call that is due (expireDue), sends the
// reminders that came due (remindPass) and arms the timer to the earliest
// deadline or reminder left in the store — or to an earlier one noted
// meanwhile. After a store error it arms the timer to retry in ExpireEvery
// (one second by default).
func (e *timers) expirePass() {
	e.disarm()
	_, err := e.expireDue(e.ctx)
	var next time.Time
	if err == nil {
		next, err = e.store.NextDeadline(e.ctx, time.Time{})
	}
	if err == nil && e.expireInputs != nil {
		var in time.Time
		if _, in, err = e.expireInputs(e.ctx); !in.IsZero() && (next.IsZero() || in.Before(next)) {
			next = in
		}
	}
	if err != nil {
		if e.ctx.Err() != nil {
			return
		}
		e.log.Error().Err(err).Msg("expire due approvals")
		next = e.clock.Now().Add(e.opts.ExpireEvery)
	}
	e.noteDeadline(next)
	if _, err := e.remindPass(e.ctx); err != nil && e.ctx.Err() == nil {
		e.log.Error().Err(err).Msg("send due reminders")
	}
}

// disarm stops the timer; a deadline noted from now on arms it again.
func (e *timers) disarm() {
	d := &e.deadline
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.at = time.Time{}
}

// noteDeadline arms the timer to at (a parked call's deadline, or the
// store's earliest) unless it is armed to an instant at or before at. The
// loop calls it after committing a parked call, so a pass that read the
// store before that commit cannot miss the call. The zero time, a
// disabled background expiry or a closed engine arms nothing.
func (e *timers) noteDeadline(at time.Time) {
	d := &e.deadline
	d.mu.Lock()
	defer d.mu.Unlock()
	if at.IsZero() || d.fire == nil || e.ctx.Err() != nil || (!d.at.IsZero() && !at.Before(d.at)) {
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	d.at = at
	after := e.opts.AfterFunc
	if after == nil {
		after = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
	}
	d.timer = after(at.Sub(e.clock.Now()), d.signal)
}

// expire ends a parked call whose deadline passed: status expired, an
// "expired" decision by system, confirmation_resolved; the run goes on.
func (e *timers) expire(ctx context.Context, c agentd.ToolCall) error {
	const reason = "the approval request expired before anyone decided; nothing was done"
	now := e.clock.Now()
	dec := &agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: c.ID, Decision: agentd.DecisionExpired,
		Reason: reason, DecidedBy: agentd.SystemKeyID, Via: agentd.ViaDeadline, ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now.UTC()}
	err := e.commit(c.ConversationID, func() ([]agentd.Event, error) {
		_, evs, err := e.store.UpdateToolCall(ctx, agentd.CallUpdate{
			ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, CardRevision: c.CardRevision(),
			Status: agentd.StatusExpired, Error: reason, Decision: dec, Now: now,
		}, []agentd.EventDraft{e.resolvedEvent(c, dec)})
		return evs, err
	})
	if err == nil {
		e.log.Info().Str("tool_call_id", c.ID).Str("run_id", c.RunID).Msg("approval expired")
		e.obs.Decided(agentd.DecisionExpired, agentd.ViaDeadline, now.Sub(c.UpdatedAt))
		e.tr.waitSpan(e.traceRun(ctx, c.RunID), c, agentd.DecisionExpired, dec.DecidedBy, agentd.ViaDeadline, now)
		e.obs.ToolCallFinished(agentd.StatusExpired, c.Tier)
		e.wake(c.RunID)
	}
	return err
}

// expirePage is how many due calls expireDue reads at a time: however
// many deadlines passed, a pass holds one page of calls.
const expirePage = 100

// expireDue expires every parked call whose deadline has passed on the
// engine's clock, a page of calls at a time, and returns how many it
// expired. It stops early (the deadline timer, armed to the earliest
// deadline left, fires again at once) when a whole page changed
// concurrently.
func (e *timers) expireDue(ctx context.Context) (int, error) {
	now := e.clock.Now()
	n := 0
	for {
		due, err := e.store.DueToolCalls(ctx, now, expirePage)
		if err != nil {
			return n, err
		}
		expired := 0
		for _, c := range due {
			err := e.expire(ctx, c)
			if err == nil {
				expired++
			} else if agentd.ErrorCode(err) != agentd.ECONFLICT {
				return n + expired, err
			}
		}
		n += expired
		if len(due) < expirePage || expired == 0 {
			return n, nil
		}
	}
}
