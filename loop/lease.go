package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/rs/zerolog"
)

// This file is run ownership across replicas sharing a store
// (docs/scale-out.md): with Options.Lease set, a driver holds its run's
// lease in the store while it works, and the engine takes over the runs
// whose lease expired. Without it (SQLite, one process) nothing here runs.
// It holds the leases part and the two steps a driver takes about its
// run's lease (the runner's driveLease and retire).

// leases is the part of the engine that owns run leases and takeover:
// it takes, renews and frees the leases of the runs this engine drives,
// and takes over (recovers) the runs whose lease expired or that a
// previous process left. It keeps no state of its own besides its owner
// name: whether a driver holds its run's lease is on the driver's handle
// (runState.leased).
type leases struct {
	*core
	store  leaseStore
	owner  string // of the run leases (Options.Owner)
	drv    *drivers
	timers *timers
	// startCall runs an approved or interrupted call (the runner's).
	startCall func(c agentd.ToolCall)
}

// leasing reports whether the engine takes run leases.
func (e *leases) leasing() bool { return e.opts.Lease > 0 }

// takeLease takes or renews this engine's lease of rs's run (LeaseRun) and
// records on rs whether it holds it. Without leasing it reports true.
func (e *leases) takeLease(ctx context.Context, rs *runState) (bool, error) {
	if !e.leasing() {
		return true, nil
	}
	ok, err := e.leaseRun(ctx, rs.id)
	if err != nil {
		return false, err
	}
	rs.leased.Store(ok)
	return ok, nil
}

// leaseRun takes or renews this engine's lease of a run for Options.Lease.
func (e *leases) leaseRun(ctx context.Context, runID string) (bool, error) {
	now := e.clock.Now()
	return e.store.LeaseRun(ctx, runID, e.owner, now, now.Add(e.opts.Lease))
}

// releaseLease frees rs's lease when its driver exits, unless a newer
// driver of the run has started in this engine (it holds the lease under
// the same owner).
func (e *leases) releaseLease(rs *runState) {
	held := rs.leased.Load() && !e.drv.driving(rs.id)
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.store.ReleaseRun(ctx, rs.id, e.owner); err != nil {
		e.log.Warn().Err(err).Str("run_id", rs.id).Msg("release run lease (it expires by itself)")
	}
}

// startLeases starts the one goroutine that, every Lease/3, renews the
// leases of the runs this engine drives (cancelling a driver whose lease
// another replica took: it had expired), wakes every driver so that one
// waiting for a call another replica runs reads the store again, takes
// over the runs whose owner's lease expired (takeover), has the next
// reminder pass read the last Lease/3 again (lookBack) and asks for an
// expiry pass.
func (e *leases) startLeases() {
	every := e.opts.Lease / 3
	e.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-e.ctx.Done():
				return
			case <-t.C:
			}
			e.renewLeases()
			if err := e.takeover(e.ctx); err != nil && e.ctx.Err() == nil {
				e.log.Error().Err(err).Msg("take over runs whose lease expired")
			}
			// Another replica's parked calls arm no timer here: an expiry
			// pass every Lease/3 expires their deadlines (each once: the
			// expiry is a conditional update) when their replica is gone,
			// reads the next reminder from the store, and reads the last
			// tick's reminders again, for a call another replica parked
			// after this engine's pass read past its reminder.
			e.timers.lookBack(every)
			e.timers.signal()
		}
	})
}

// renewLeases renews the lease of every run with a driver that holds one,
// and wakes every driver.
func (e *leases) renewLeases() {
	for _, rs := range e.drv.live() {
		if rs.leased.Load() {
			ok, err := e.takeLease(e.ctx, rs)
			if err != nil {
				e.log.Warn().Err(err).Str("run_id", rs.id).Msg("renew run lease")
			} else if !ok {
				e.log.Error().Str("run_id", rs.id).Msg("run lease lost to another replica: stopping its driver")
				rs.cancel()
				continue
			}
		}
		select {
		case rs.wake <- struct{}{}:
		default:
		}
	}
}

// takeover recovers, as a restart does (recoverCall), the runs that have
// work and whose lease is free or expired, one by one, taking each one's
// lease first: with leasing, at start and every Lease/3. Runs this engine
// drives and runs another owner holds are left alone.
func (e *leases) takeover(ctx context.Context) error {
	calls, err := e.store.ToolCallsByStatus(ctx, agentd.StatusExecuting, agentd.StatusApproved)
	if err != nil {
		return err
	}
	runs, err := e.store.RunsToDrive(ctx)
	if err != nil {
		return err
	}
	byRun := map[string][]agentd.ToolCall{}
	var ids []string
	for _, c := range calls {
		if _, seen := byRun[c.RunID]; !seen {
			ids = append(ids, c.RunID)
		}
		byRun[c.RunID] = append(byRun[c.RunID], c)
	}
	for _, r := range runs {
		if _, seen := byRun[r.ID]; !seen {
			ids = append(ids, r.ID)
			byRun[r.ID] = nil
		}
	}
	for _, id := range ids {
		if e.drv.driving(id) {
			continue
		}
		ok, err := e.leaseRun(ctx, id)
		if err != nil {
			return err
		} else if !ok {
			continue
		}
		for _, c := range byRun[id] {
			if err := e.recoverCall(ctx, c); err != nil {
				return err
			}
		}
		e.drv.wakeLeased(id)
	}
	return nil
}

// recoverCall recovers one call found approved or executing with no
// process running it: an approved call starts (its claim is conditional),
// an idempotent executing call runs again, any other executing call fails
// as "outcome unknown" — at most once, never twice (SPEC §8).
func (e *leases) recoverCall(ctx context.Context, c agentd.ToolCall) error {
	switch {
	case c.Status == agentd.StatusApproved:
		e.startCall(c)
		return nil
	case e.tools.now().defs[c.Name].Idempotent:
		e.log.Info().Str("tool_call_id", c.ID).Msg("re-running idempotent call interrupted by a restart")
		e.startCall(c)
		return nil
	}
	msg := "the server stopped while the tool was running; its outcome is unknown"
	err := e.commit(c.ConversationID, func() ([]agentd.Event, error) {
		_, evs, err := e.store.UpdateToolCall(ctx, agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusExecuting},
			Status: agentd.StatusFailed, Error: msg, Now: e.clock.Now()},
			[]agentd.EventDraft{e.event(c.ConversationID, &agentd.ToolCallResultPayload{
				RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, Status: agentd.StatusFailed, Error: msg,
			})})
		return evs, err
	})
	if err != nil && agentd.ErrorCode(err) != agentd.ECONFLICT {
		return fmt.Errorf("fail interrupted call %s: %w", c.ID, err)
	} else if err == nil {
		e.obs.ToolCallFinished(agentd.StatusFailed, c.Tier)
	}
	return nil
}

// recover restores what a previous process left (SPEC §8), doing only
// what must happen now: calls that were executing are failed with "outcome
// unknown" unless their tool is idempotent (then they run again);
// approved-but-unstarted calls (approved by a person, or auto calls not yet
// claimed) run; the runs that must move on (Store.RunsToDrive: running, or
// waiting with nothing parked at their step) get a driver. A run waiting
// for a decision gets nothing: its calls keep their deadlines, which the
// deadline timer covers, and a decision starts its driver.
func (e *leases) recover(ctx context.Context) error {
	if e.leasing() {
		return e.takeover(ctx) // only the runs no live replica holds
	}
	calls, err := e.store.ToolCallsByStatus(ctx, agentd.StatusExecuting, agentd.StatusApproved)
	if err != nil {
		return err
	}
	for _, c := range calls {
		if err := e.recoverCall(ctx, c); err != nil {
			return err
		}
	}
	runs, err := e.store.RunsToDrive(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		e.drv.wakeRun(r.ID) // also wakes a driver started above for a call
	}
	return nil
}

// letGo frees rs's lease before its driver retires because its run waits
// for people (retire), and reports false when the lease is still held:
// the store failed (say, shutdown cancelled rs.ctx), and the driver's
// next turn takes it again, or its exit releases it (releaseLease).
func (e *leases) letGo(rs *runState) bool {
	if !rs.leased.Swap(false) {
		return true
	}
	if err := e.store.ReleaseRun(rs.ctx, rs.id, e.owner); err != nil {
		rs.leased.Store(true)
		return false
	}
	return true
}

// leaseStep is what a driver does after driveLease.
type leaseStep int

const (
	leaseHeld  leaseStep = iota // go on: the engine holds the lease (or takes none)
	leaseRetry                  // read the store again from the top
	leaseExit                   // return: another replica drives the run, or rs ended
)

// driveLease takes or renews the lease of rs's run before its driver acts
// (leaseExit at once when rs's context has ended).
// A store error is retried after a pause (retryAfter); a lease another
// replica holds retires the driver (yieldDriver), or, while a tool of the
// run runs here, makes it wait for that tool.
func (e *runner) driveLease(rs *runState, log zerolog.Logger, failures *int) leaseStep {
	if rs.ctx.Err() != nil {
		return leaseExit
	}
	ok, err := e.leases.takeLease(rs.ctx, rs)
	switch {
	case err != nil:
		if !e.retryAfter(rs, log, err, failures) {
			return leaseExit
		}
		return leaseRetry
	case ok:
		return leaseHeld
	case e.drv.yieldDriver(rs):
		return leaseExit
	}
	select {
	case <-rs.wake:
		return leaseRetry
	case <-rs.ctx.Done():
		return leaseExit
	}
}

// retire is retireDriver for a run whose unresolved calls are all parked.
// With leasing it first frees the run's lease, then reads the step's calls
// again: a decision another replica committed before it could take the
// lease (it found this engine's and left the run to it) is seen now, and
// the driver goes on (woken) instead of leaving the run with no driver
// anywhere. A decision committed after the release finds the lease free.
func (e *runner) retire(rs *runState, run *agentd.Run) (exit, woken bool) {
	if !e.leases.leasing() {
		return e.drv.retireDriver(rs)
	}
	if !e.leases.letGo(rs) {
		return false, true
	}
	calls, err := e.stepCalls(rs, run)
	if err != nil {
		return false, true
	}
	parked := 0
	for _, c := range calls {
		switch {
		case c.Status.Held():
			parked++
		case !c.Status.Terminal():
			return false, true // decided elsewhere meanwhile
		}
	}
	if parked == 0 {
		return false, true
	}
	return e.drv.retireDriver(rs)
}
