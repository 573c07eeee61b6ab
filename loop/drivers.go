package loop

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/agentd-dev/agentd"
)

// drivers is the part of the engine that owns the run drivers: one
// goroutine per run that must move (drive), found by run id under one
// lock, started when something happens to a run and gone while the run
// waits only for people. It counts each driver's tool goroutines, so a
// driver exits only when nothing of its run is in flight.
type drivers struct {
	*core

	mu   sync.Mutex
	runs map[string]*runState // runs with a driver
	// count is the number of driver goroutines alive (Engine.Drivers).
	count atomic.Int64
	// drive is a driver's goroutine (the runner's loop); exited runs
	// when a driver has left runs and its context is done (it frees the
	// run's lease and keeps its history).
	drive  func(rs *runState)
	exited func(rs *runState)
	// retireHook, when set (by tests), is called by a driver about to exit
	// because its run waits only for people (stage "before", e.mu not
	// held) and once it has left e.runs (stage "after").
	retireHook func(runID, stage string)
}

// runState is the in-memory handle of a run with a driver: its context
// (cancelled by Cancel, by shutdown, or when the driver exits), the wake-up
// channel of its driver and the number of its tool goroutines.
type runState struct {
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	// tools counts the goroutines that claim or run a call of this run
	// under ctx (goTool); guarded by drivers.mu. While it is not 0 the
	// driver does not exit to wait for people.
	tools int
	// delegated caches the conversation's delegated flag (immutable) once
	// the driver or a tool goroutine has read it.
	delegated atomic.Pointer[bool]
	// hist is the conversation's history as the driver last read it
	// (history.go); only the driver's goroutine uses it. It goes to
	// the runner's histories when the driver exits, unless it is nil then.
	hist *historyCache
	// step is the calls of the run's current step as the driver last read
	// them (stepCalls); only the driver's goroutine uses it.
	step stepCache
	// traced is the run as its tool spans read it once (its trace context
	// is immutable): runTrace.
	traceOnce sync.Once
	traced    *agentd.Run
	// leased: the engine holds the run's lease for this driver (lease.go).
	leased atomic.Bool
}

// stepCache is the calls of one step of a run, by index: stepCalls reads
// again only those not terminal (a terminal call never changes again).
type stepCache struct {
	step  int
	known bool
	calls []agentd.ToolCall
	// read[i]: calls[i] is as the store returned it (not the copy the
	// driver recorded).
	read []bool
}

// alive returns the number of driver goroutines alive.
func (e *drivers) alive() int { return int(e.count.Load()) }

// ensureDriver returns the handle of a run, starting its driver if there
// is none; delegated is its conversation's flag, which a driver started
// here need not read.
func (e *drivers) ensureDriver(runID string, delegated bool) *runState {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs, _ := e.driverLocked(runID, false, &delegated)
	return rs
}

// driverLocked returns the handle of a run and whether it is new: a run
// without a driver gets one, which reads the store at once or, with
// asleep, only once woken; delegated, when not nil, is the conversation's
// flag, known before the new driver starts. e.mu must be held. A driver
// leaves e.runs when it exits, under e.mu, so a handle found here belongs
// to a live driver.
func (e *drivers) driverLocked(runID string, asleep bool, delegated *bool) (*runState, bool) {
	if rs, ok := e.runs[runID]; ok {
		return rs, false
	}
	ctx, cancel := context.WithCancel(e.ctx)
	rs := &runState{id: runID, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	rs.delegated.Store(delegated)
	e.runs[runID] = rs
	e.wg.Add(1)
	e.count.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.count.Add(-1)
		defer func() {
			e.mu.Lock()
			if e.runs[runID] == rs {
				delete(e.runs, runID)
			}
			e.mu.Unlock()
			cancel()
			e.exited(rs)
		}()
		if asleep {
			select {
			case <-rs.wake:
			case <-ctx.Done():
				return
			}
		}
		e.drive(rs)
	}()
	return rs, true
}

// wakeRun tells a run's driver that one of its calls changed, starting a
// driver if the run has none (its driver exited while the run waited for
// people).
func (e *drivers) wakeRun(runID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wakeLocked(runID)
}

// wakeLocked is wakeRun with e.mu held.
func (e *drivers) wakeLocked(runID string) {
	rs, created := e.driverLocked(runID, false, nil)
	if created {
		return // a new driver reads the store first anyway
	}
	select {
	case rs.wake <- struct{}{}:
	default:
	}
}

// goTool runs fn in the background as a tool goroutine of run runID: the
// run gets a driver if it has none, and that driver, counting fn among its
// tools, keeps waiting (and its context, the one fn runs under, alive)
// until fn has returned; then the driver is woken. Finding or starting the
// driver and counting fn are one step under e.mu, so a driver that is
// exiting either sees fn or is already gone (fn then gets a new one). A
// driver started here sleeps until woken: nothing can move the run before
// the tool ends, and the approval's fork is not kept waiting by its reads.
func (e *drivers) goTool(runID string, fn func(rs *runState)) {
	e.mu.Lock()
	rs, _ := e.driverLocked(runID, true, nil)
	rs.tools++
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		defer func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			rs.tools--
			if e.ctx.Err() == nil {
				e.wakeLocked(runID)
			}
		}()
		fn(rs)
	}()
}

// retireDriver retires the driver of rs if its run waits only for people:
// no tool goroutine of it is counted, and nothing woke it since it read the
// store. exit reports that it did (the driver returns): rs left e.runs in
// the same step, so a decision, an expiry or a cancel that comes after
// finds no driver and starts one. woken reports that a wake-up arrived
// (and was consumed): the driver must read the store again.
func (e *drivers) retireDriver(rs *runState) (exit, woken bool) {
	if e.retireHook != nil {
		e.retireHook(rs.id, "before")
	}
	e.mu.Lock()
	switch {
	case rs.tools > 0:
		e.mu.Unlock()
		return false, false
	case len(rs.wake) > 0:
		<-rs.wake
		e.mu.Unlock()
		return false, true
	}
	delete(e.runs, rs.id)
	e.mu.Unlock()
	if e.retireHook != nil {
		e.retireHook(rs.id, "after")
	}
	return true, false
}

// stopDriver cancels the context of a run's driver, its model step and
// its tools, if it has one.
func (e *drivers) stopDriver(runID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rs, ok := e.runs[runID]; ok {
		rs.cancel()
	}
}

// wakeLeased wakes (or starts) the driver of a run whose lease this engine
// has just taken, marking its handle as holding it.
func (e *drivers) wakeLeased(runID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs, _ := e.driverLocked(runID, false, nil)
	rs.leased.Store(true)
	select {
	case rs.wake <- struct{}{}:
	default:
	}
}

// yieldDriver retires the driver of rs, whose run another replica's lease
// holds, unless a tool goroutine of the run runs in this engine (it keeps
// the driver, and rs's context, alive). As in retireDriver, rs leaves
// e.runs in the same step, so a call started after finds no driver and
// starts one.
func (e *drivers) yieldDriver(rs *runState) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rs.tools > 0 {
		return false
	}
	if e.runs[rs.id] == rs {
		delete(e.runs, rs.id)
	}
	return true
}

// driving reports whether the run has a driver in this engine.
func (e *drivers) driving(runID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.runs[runID]
	return ok
}

// live returns the handles of the runs with a driver now.
func (e *drivers) live() []*runState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*runState, 0, len(e.runs))
	for _, rs := range e.runs {
		out = append(out, rs)
	}
	return out
}
