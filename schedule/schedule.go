// Package schedule runs scheduled tools: a tool whose tool.json has
// "triggers": {"schedule": EXPR} runs once at each tick of its schedule
// (Parse: five cron fields, or @every), exactly once per tick whichever
// replicas run, because a replica runs a tick only after claiming it in
// the store (agentd.ScheduleStore: a unique (tool, tick) row). Ticks that
// passed with no run — every replica was down, or the previous run was
// still going — are reported (a log line and a schedule_missed audit
// entry, by the replica that claims the next tick), never run late in a
// burst. What a run does (the durable execution context, its audit entry)
// is the RunFunc's: cmd/agentd hands in tools/direct's.
//
// It imports the domain only; docs/runtime.md is the user's view.
package schedule

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/rs/zerolog"
)

// Store is what the scheduler uses of the store: the tick claims, and the
// audit log for missed ticks.
type Store interface {
	agentd.ScheduleStore
	AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error)
}

// Job is one scheduled tool and whom its runs act for.
type Job struct {
	Tool                string
	Schedule            *Schedule
	TenantID, ProjectID string
}

// RunFunc runs the job's tool for one claimed tick (and records the run).
type RunFunc func(ctx context.Context, job Job, at time.Time)

// maxMissedCount bounds the count of missed ticks a report computes; a
// report of that many means "at least".
const maxMissedCount = 100000

// Options configure New.
type Options struct {
	Logger zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Scheduler runs its jobs at their ticks from Start until Close.
type Scheduler struct {
	store Store
	jobs  []Job
	run   RunFunc
	log   zerolog.Logger
	now   func() time.Time

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a scheduler of jobs over store; run runs each claimed tick.
func New(store Store, jobs []Job, run RunFunc, o Options) *Scheduler {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Scheduler{store: store, jobs: jobs, run: run, log: o.Logger, now: o.Now}
}

// Start starts one goroutine per job, which waits for the job's next tick
// after now (never one already past), claims it and runs it, until Close
// or ctx ends.
func (s *Scheduler) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, j := range s.jobs {
		s.log.Info().Str("tool", j.Tool).Str("schedule", j.Schedule.String()).Str("tenant_id", j.TenantID).
			Time("next", j.Schedule.Next(s.now())).Msg("scheduled tool")
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.loop(ctx, j)
		}()
	}
}

// Close stops the scheduler: runs in progress are cancelled (their ticks
// stay claimed and are not run again) and waited for.
func (s *Scheduler) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// loop runs one job until ctx ends.
func (s *Scheduler) loop(ctx context.Context, j Job) {
	for {
		at := j.Schedule.Next(s.now())
		if at.IsZero() {
			s.log.Warn().Str("tool", j.Tool).Str("schedule", j.Schedule.String()).Msg("schedule has no next tick: not scheduled")
			return
		}
		for wait := at.Sub(s.now()); wait > 0; wait = at.Sub(s.now()) {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		s.Fire(ctx, j, at)
	}
}

// Fire claims tick at of job and, when this claim won, reports the ticks
// missed since the job's previous claimed tick and runs the tick. It
// reports whether it ran. A failed claim is logged and the tick is not
// run (another replica may have it).
func (s *Scheduler) Fire(ctx context.Context, j Job, at time.Time) bool {
	prev, claimed, err := s.store.ClaimTick(ctx, j.Tool, at)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Str("tool", j.Tool).Time("tick", at).Msg("scheduled tick not claimed: not run")
		}
		return false
	}
	if !claimed {
		s.log.Debug().Str("tool", j.Tool).Time("tick", at).Msg("scheduled tick claimed by another replica")
		return false
	}
	if !prev.IsZero() && prev.Before(at) {
		if n := j.Schedule.Missed(prev, at, maxMissedCount); n > 0 {
			s.reportMissed(ctx, j, prev, at, n)
		}
	}
	s.run(ctx, j, at)
	return true
}

// reportMissed logs and audits n ticks of j that passed between prev and
// at with no run.
func (s *Scheduler) reportMissed(ctx context.Context, j Job, prev, at time.Time, n int) {
	count := fmt.Sprint(n)
	if n >= maxMissedCount {
		count = fmt.Sprintf("at least %d", n)
	}
	reason := fmt.Sprintf("%s ticks missed between %s and %s: not run", count,
		prev.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
	s.log.Warn().Str("tool", j.Tool).Int("missed", n).Time("after", prev).Time("before", at).Msg("scheduled ticks missed")
	e := agentd.AuditEntry{Kind: agentd.AuditScheduleMissed, TenantID: j.TenantID, ProjectID: j.ProjectID,
		ToolName: j.Tool, KeyID: agentd.ScheduleKeyID, Role: agentd.RoleDelegate, Outcome: "missed", Reason: reason, CreatedAt: s.now()}
	if _, err := s.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error().Err(err).Str("tool", j.Tool).Msg("missed ticks not recorded in the audit log")
	}
}
