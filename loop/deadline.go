package loop

import (
	"sync"
	"time"
)

// Timer is an armed call of a function, as time.AfterFunc returns.
type Timer interface {
	// Stop keeps the function from being called if it has not been yet,
	// and reports whether it did.
	Stop() bool
}

// deadlineTimer is the engine's one timer for every parked call (SPEC §8,
// docs/loop.md): it is armed to the earliest deadline in the store, and
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

// startExpiry starts the one goroutine of the background expiry: it runs a
// pass each time the timer fires (and once at start) until the engine
// closes, and leaves no timer armed when it returns.
func (e *Engine) startExpiry() {
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

// expirePass expires every parked call that is due (ExpireDue), sends the
// reminders that came due (remindPass) and arms the timer to the earliest
// deadline or reminder left in the store — or to an earlier one noted
// meanwhile. After a store error it arms the timer to retry in ExpireEvery
// (one second by default).
func (e *Engine) expirePass() {
	e.disarm()
	_, err := e.ExpireDue(e.ctx)
	var next time.Time
	if err == nil {
		next, err = e.store.NextDeadline(e.ctx, time.Time{})
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
func (e *Engine) disarm() {
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
func (e *Engine) noteDeadline(at time.Time) {
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
