package server

import (
	"context"
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/project"
	"github.com/agentd-dev/agentd/schedule"
	"github.com/agentd-dev/agentd/tools/direct"
	"github.com/rs/zerolog"
)

// Tools run outside the agent loop (docs/runtime.md): direct eval and the
// invoke trigger on the API, scheduled tools by the scheduler; all through
// one direct.Runner over the registry, which audits every call.

// toolRunner is the API's api.ToolRunner over a direct.Runner.
type toolRunner struct{ r *direct.Runner }

func (t toolRunner) Eval(ctx context.Context, p agentd.Principal, name string, args json.RawMessage) (any, error) {
	return t.r.Eval(ctx, p, name, args)
}

func (t toolRunner) Run(ctx context.Context, p agentd.Principal, name string, args json.RawMessage, intent string) (any, error) {
	out, _, err := t.r.Run(ctx, p, name, args, intent)
	return out, err
}

// startSchedule starts the scheduler of the project's scheduled tools
// (none: nil), whose ticks runner runs.
func startSchedule(ctx context.Context, proj *project.Project, store agentd.Store, runner *direct.Runner, pub func(agentd.Event), log zerolog.Logger) *schedule.Scheduler {
	var jobs []schedule.Job
	for _, t := range proj.Tools {
		if tr := t.Triggers; tr.Schedule != nil {
			jobs = append(jobs, schedule.Job{Tool: t.Name, Schedule: tr.Schedule, TenantID: tr.TenantID, ProjectID: tr.ProjectID})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	s := schedule.New(store, jobs, func(ctx context.Context, r schedule.Run) schedule.Outcome {
		res, a := runner.Scheduled(ctx, direct.Tick{Tool: r.Tool, At: r.At, TenantID: r.TenantID, ProjectID: r.ProjectID,
			ConversationID: r.ConversationID, RunID: r.RunID, Started: r.Started})
		return schedule.Outcome{ToolCallID: a.ToolCallID, Tier: a.Tier, Status: res.Status, Result: res.Result, Error: res.Error}
	}, schedule.Options{Logger: log, Agent: proj.Agent.Name, Publish: pub})
	s.Start(ctx)
	return s
}
