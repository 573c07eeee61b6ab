// Package schedule runs scheduled tools: a tool whose tool.json has
// "triggers": {"schedule": EXPR} runs once at each tick of its schedule
// (Parse: five cron fields, or @every), exactly once per tick whichever
// replicas run, because a replica runs a tick only after claiming it in
// the store (agentd.ScheduleStore: a unique (tool, tick) row). Ticks that
// passed with no run — every replica was down, or the previous run was
// still going — are reported (a log line and a schedule_missed audit
// entry, by the replica that claims the next tick), never run late in a
// burst. Each run is recorded in a delegated conversation of its own,
// created by the system principal ScheduleKeyID for the job's tenant and
// project when the tick is claimed: its log holds the call's
// tool_call_started and tool_call_result (or tool_call_refused), so a
// client reads a scheduled run like any conversation. What a run does (the
// durable execution context, its audit entry) is the RunFunc's: package server
// hands in tools/direct's.
//
// It imports the domain only; docs/runtime.md is the user's view.
package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/rs/zerolog"
)

// TickStore is what the scheduler uses of the store: the tick claims, the
// audit log for missed ticks, and the conversation and events each run is
// recorded in.
type TickStore interface {
	agentd.ScheduleStore
	AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error)
	CreateConversation(ctx context.Context, c *agentd.Conversation) error
	AppendEvents(ctx context.Context, events []agentd.EventDraft) ([]agentd.Event, error)
}

// Job is one scheduled tool and whom its runs act for.
type Job struct {
	Tool                string
	Schedule            *Schedule
	TenantID, ProjectID string
}

// Run is one claimed tick as a RunFunc runs it: the job, the tick, and
// the delegated conversation and run id its call belongs to (the call's
// ConversationID and RunID, and its audit entry's).
type Run struct {
	Job
	At                    time.Time
	ConversationID, RunID string
	// Started records the call's tool_call_started in the conversation:
	// the RunFunc calls it once, just before the tool runs, with the call
	// as it runs (its id, effective arguments). A call refused before it
	// ran has no start.
	Started func(call agentd.ToolCall)
}

// Outcome is how a run ended: completed with its result, failed with its
// error, or — when Started was not called — refused with nothing run (Tier
// the call's, empty when it was refused before it was classified; Error
// the reason).
type Outcome struct {
	ToolCallID string
	Tier       agentd.Tier
	Status     agentd.CallStatus
	Result     json.RawMessage
	Error      string
}

// RunFunc runs the job's tool for one claimed tick (and audits it).
type RunFunc func(ctx context.Context, r Run) Outcome

// maxMissedCount bounds the count of missed ticks a report computes; a
// report of that many means "at least".
const maxMissedCount = 100000

// Options configure New.
type Options struct {
	Logger zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// After waits on Now's clock: its channel receives once d has passed
	// (default time.After). Tests pass a fake clock's.
	After func(d time.Duration) <-chan time.Time
	// Agent is the agent name of the runs' conversations.
	Agent string
	// Publish, when set, announces each event appended to a run's
	// conversation once it is committed (to the live streams and the feed).
	Publish func(agentd.Event)
}

// Scheduler runs its jobs at their ticks from Start until Close.
type Scheduler struct {
	store TickStore
	jobs  []Job
	run   RunFunc
	log   zerolog.Logger
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
	agent string
	pub   func(agentd.Event)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a scheduler of jobs over store; run runs each claimed tick.
func New(store TickStore, jobs []Job, run RunFunc, o Options) *Scheduler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	return &Scheduler{store: store, jobs: jobs, run: run, log: o.Logger, now: o.Now, after: o.After, agent: o.Agent, pub: o.Publish}
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
			select {
			case <-ctx.Done():
				return
			case <-s.after(wait):
			}
		}
		s.Fire(ctx, j, at)
	}
}

// Fire claims tick at of job and, when this claim won, reports the ticks
// missed since the job's previous claimed tick, creates the run's
// delegated conversation and runs the tick in it. It reports whether it
// ran. A failed claim is logged and the tick is not run (another replica
// may have it); so is a conversation that could not be created.
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
	conv, err := s.conversation(ctx, j, at)
	if err != nil {
		s.log.Error().Err(err).Str("tool", j.Tool).Time("tick", at).Msg("scheduled run's conversation not created: not run")
		return false
	}
	r := Run{Job: j, At: at, ConversationID: conv.ID, RunID: agentd.NewID(agentd.PrefixRun)}
	started := false
	r.Started = func(call agentd.ToolCall) {
		started = true
		s.record(ctx, r, &agentd.ToolCallStartedPayload{RunID: r.RunID, ToolCallID: call.ID, ToolName: call.Name,
			ServerID: call.ServerID, Arguments: call.Arguments})
	}
	out := s.run(ctx, r)
	s.record(ctx, r, ended(r, out, started))
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

// title is the title (metadata "title") of the conversation of tool's
// run at tick at.
func title(tool string, at time.Time) string {
	return "schedule: " + tool + " @ " + at.UTC().Format(time.RFC3339Nano)
}

// conversation creates the delegated conversation of j's run at tick at,
// created by ScheduleKeyID, with metadata {"title", "schedule": {"tool",
// "tick"}}.
func (s *Scheduler) conversation(ctx context.Context, j Job, at time.Time) (*agentd.Conversation, error) {
	type tick struct {
		Tool string    `json:"tool"`
		Tick time.Time `json:"tick"`
	}
	meta, err := json.Marshal(struct {
		Title    string `json:"title"`
		Schedule tick   `json:"schedule"`
	}{title(j.Tool, at), tick{j.Tool, at.UTC()}})
	if err != nil {
		return nil, err
	}
	c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: j.TenantID, ProjectID: j.ProjectID,
		Agent: s.agent, Metadata: meta, Delegated: true, CreatedBy: agentd.ScheduleKeyID, CreatedAt: s.now().UTC()}
	if err := s.store.CreateConversation(context.WithoutCancel(ctx), c); err != nil {
		return nil, err
	}
	return c, nil
}

// ended is the event of a run's end: tool_call_result of a call that
// started, tool_call_refused of one refused before (tier never when it was
// refused before it was classified: the tool was not found).
func ended(r Run, out Outcome, started bool) agentd.EventPayload {
	if started {
		return &agentd.ToolCallResultPayload{RunID: r.RunID, ToolCallID: out.ToolCallID, ToolName: r.Tool,
			Status: out.Status, Result: out.Result, Error: out.Error}
	}
	tier := out.Tier
	if tier == "" {
		tier = agentd.TierNever
	}
	reason := out.Error
	if reason == "" {
		reason = "refused"
	}
	return &agentd.ToolCallRefusedPayload{RunID: r.RunID, ToolCallID: out.ToolCallID, ToolName: r.Tool, Tier: tier, Reason: reason}
}

// record appends p to r's conversation and publishes it; a failure is
// logged (the audit entry still records the run).
func (s *Scheduler) record(ctx context.Context, r Run, p agentd.EventPayload) {
	d, err := agentd.NewEventDraft(r.ConversationID, s.now(), p)
	if err == nil {
		var evs []agentd.Event
		if evs, err = s.store.AppendEvents(context.WithoutCancel(ctx), []agentd.EventDraft{d}); err == nil {
			for _, e := range evs {
				if s.pub != nil {
					s.pub(e)
				}
			}
			return
		}
	}
	s.log.Error().Err(err).Str("tool", r.Tool).Str("conversation_id", r.ConversationID).Str("type", p.EventType()).
		Msg("scheduled run's event not recorded")
}
