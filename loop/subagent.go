package loop

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// SubagentsServerID is the server_id of the task tool.
const SubagentsServerID = "subagents"

// TaskTool is the name of the tool that starts a subagent.
const TaskTool = "task"

// Subagent is one configured subagent (agent.json "subagents"): it runs its
// own loop, with its own messages, inside the parent's task call.
type Subagent struct {
	Name        string
	Description string
	System      string
	Model       agentd.Model
	// Tools are the tools its model sees and runs (never the task tool:
	// subagents cannot start subagents). Nil means none.
	Tools    toolset.Set
	MaxTurns int
}

// TaskSource is the task tool as a tool source (server_id "subagents",
// tier auto), for the registry to list beside the others. Its calls run
// in the engine, which owns the subagents' loops: Execute outside the
// loop refuses.
func TaskSource(subs []*Subagent) toolset.Source {
	names := make([]string, 0, len(subs))
	desc := "Give a task to a subagent and get its final answer. Subagents:"
	for _, s := range subs {
		names = append(names, s.Name)
		desc += fmt.Sprintf(" %s (%s);", s.Name, s.Description)
	}
	enum, _ := json.Marshal(names)
	params := `{"type":"object","properties":{"subagent":{"type":"string","enum":` + string(enum) +
		`},"prompt":{"type":"string","minLength":1,"maxLength":65536}},"required":["subagent","prompt"],"additionalProperties":false}`
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	return taskSource{def: toolset.Tool{
		Spec: agentd.ToolSpec{Name: TaskTool, Description: desc, Parameters: json.RawMessage(params)},
		Confirm: &confirm.Tool{Name: TaskTool, ServerID: SubagentsServerID, Validate: func(raw json.RawMessage) (json.RawMessage, error) {
			a, err := taskArgs(raw)
			if err != nil {
				return nil, err
			}
			if !known[a.Subagent] {
				return nil, fmt.Errorf("unknown subagent %q (subagents: %s)", a.Subagent, string(enum))
			}
			return json.Marshal(a)
		}},
		LLMCallable: true,
		Origin:      "agent.json subagents",
	}}
}

type taskSource struct{ def toolset.Tool }

func (s taskSource) ID() string            { return SubagentsServerID }
func (s taskSource) Tools() []toolset.Tool { return []toolset.Tool{s.def} }
func (s taskSource) Execute(context.Context, agentd.ToolCall) (json.RawMessage, error) {
	return nil, fmt.Errorf("the task tool runs only in the agent loop")
}

type task struct {
	Subagent string `json:"subagent"`
	Prompt   string `json:"prompt"`
}

func taskArgs(raw json.RawMessage) (task, error) {
	var a task
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("invalid arguments for tool %q: %v", TaskTool, err)
	}
	if a.Prompt == "" || len(a.Prompt) > 64<<10 {
		return a, fmt.Errorf(`invalid arguments for tool %q: "prompt" must be 1 to 65536 bytes`, TaskTool)
	}
	return a, nil
}

// subagentRun is one subagent's loop inside a parent's task call.
type subagentRun struct {
	e      *runner
	parent agentd.ToolCall
	sa     *Subagent
	defs   map[string]toolset.Tool
	specs  []agentd.ToolSpec
	deleg  bool
}

// runSubagent runs the subagent a task call names, in the parent's
// conversation, and returns its final assistant text as the call's result.
// Each of its events is committed and published as a subagent_event of the
// parent's stream. It has no approval handler: a call that would be
// confirm is refused (status denied, no confirmation_required); auto
// calls run; review and never are refused as usual. A cancel of the
// parent's run ends it (ctx). A crash leaves the task call executing, which
// recovery reports as failed, outcome unknown: nothing runs twice.
func (e *runner) runSubagent(ctx context.Context, parent agentd.ToolCall) (json.RawMessage, error) {
	a, err := taskArgs(parent.Arguments)
	if err != nil {
		return nil, err
	}
	var sa *Subagent
	for _, s := range e.agent.Subagents {
		if s.Name == a.Subagent {
			sa = s
		}
	}
	if sa == nil {
		return nil, fmt.Errorf("unknown subagent %q", a.Subagent)
	}
	conv, err := e.store.Conversation(ctx, parent.ConversationID)
	if err != nil {
		return nil, err
	}
	r := &subagentRun{e: e, parent: parent, sa: sa, defs: map[string]toolset.Tool{}, deleg: conv.Delegated}
	if sa.Tools != nil {
		for _, d := range sa.Tools.Tools() {
			if !d.ForTenant(parent.TenantID) {
				continue
			}
			r.defs[d.Spec.Name] = d
			r.specs = append(r.specs, d.Spec)
		}
	}
	maxTurns := sa.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 6
	}
	msgs := []agentd.ModelMessage{{Role: agentd.ModelRoleUser, Content: a.Prompt}}
	for range maxTurns {
		msgID := agentd.NewID(agentd.PrefixMessage)
		resp, err := sa.Model.Generate(ctx, agentd.ModelRequest{System: sa.System, Messages: msgs, Tools: r.specs}, func(delta string) {
			if delta != "" {
				_ = r.relay(ctx, &agentd.TextDeltaPayload{RunID: parent.RunID, MessageID: msgID, Delta: delta})
			}
		})
		if err != nil {
			return nil, fmt.Errorf("subagent %q: model: %w", sa.Name, err)
		}
		if resp.Text != "" {
			_ = r.relay(ctx, &agentd.MessagePayload{RunID: parent.RunID, MessageID: msgID, Role: agentd.RoleAssistant, Content: resp.Text})
		}
		if len(resp.ToolCalls) == 0 {
			return json.Marshal(resp.Text)
		}
		am := agentd.ModelMessage{Role: agentd.ModelRoleAssistant, Content: resp.Text}
		var results []agentd.ModelMessage
		for _, mc := range resp.ToolCalls {
			mc.ID = agentd.NewID(agentd.PrefixToolCall)
			am.ToolCalls = append(am.ToolCalls, mc)
			results = append(results, r.call(ctx, mc))
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		msgs = append(append(msgs, am), results...)
	}
	return nil, fmt.Errorf("subagent %q reached max_turns (%d) without a final answer", sa.Name, maxTurns)
}

// relay commits and publishes one inner event as a subagent_event. It
// refuses (and returns ctx's error) once ctx, the parent run's, is done:
// the check is made under the conversation's lock, under which Cancel
// ends that context too, so nothing of the subagent is announced after
// the run's run_finished.
func (r *subagentRun) relay(ctx context.Context, p agentd.EventPayload) error {
	return r.append(ctx, ctx, p, nil)
}

// relayRefusal relays the refusal of one of the subagent's calls with its
// entry of the parent conversation's audit log, in one commit: the call is
// no stored call, so the entry is marked with the subagent's name and the
// task call, and names the call by its id and its arguments' digest.
func (r *subagentRun) relayRefusal(ctx context.Context, p *agentd.ToolCallRefusedPayload, digest string) error {
	return r.append(ctx, ctx, p, &agentd.AuditEntry{Kind: agentd.AuditRefusal, TenantID: r.parent.TenantID, ProjectID: r.parent.ProjectID,
		RunID: p.RunID, ToolCallID: p.ToolCallID, ToolName: p.ToolName, KeyID: agentd.SystemKeyID, Reason: p.Reason, Tier: p.Tier,
		Escalated: p.Escalated, ArgumentsSHA256: digest, Subagent: r.sa.Name, TaskToolCallID: r.parent.ID, CreatedAt: r.e.clock.Now()})
}

// relayResult commits an inner call's result even when the run was
// cancelled while it ran, as runCall records the parent's calls: a
// tool_call_started is always followed by its result.
func (r *subagentRun) relayResult(ctx context.Context, p *agentd.ToolCallResultPayload) {
	_ = r.append(context.WithoutCancel(ctx), nil, p, nil)
}

// append commits one inner event as a subagent_event, with audit (when
// set) in the same transaction, unless live is done. It logs a failure
// (unless ctx is done), as the engine's other commits do, so the callers
// that can do nothing more about it drop the error.
func (r *subagentRun) append(ctx, live context.Context, p agentd.EventPayload, audit *agentd.AuditEntry) error {
	e, conv := r.e, r.parent.ConversationID
	err := e.commit(conv, func() ([]agentd.Event, error) {
		if live != nil && live.Err() != nil {
			return nil, live.Err()
		}
		inner := e.event(conv, p)
		d := e.event(conv, &agentd.SubagentEventPayload{ToolCallID: r.parent.ID, Subagent: r.sa.Name, Event: inner.Data})
		d.Audit = audit
		return e.store.AppendEvents(ctx, []agentd.EventDraft{d})
	})
	if err != nil && ctx.Err() == nil {
		e.log.Error().Err(err).Str("tool_call_id", r.parent.ID).Msg("append subagent event")
	}
	return err
}

// call classifies and, if it may run, runs one of the subagent's calls,
// and returns the tool message its model reads.
func (r *subagentRun) call(ctx context.Context, mc agentd.ModelToolCall) agentd.ModelMessage {
	p := r.parent
	tm := agentd.ModelMessage{Role: agentd.ModelRoleTool, ToolCallID: mc.ID, ToolName: mc.Name}
	cl := r.classifyBothPhases(ctx, mc)
	d := cl.d
	refuse := func(status agentd.CallStatus, tier agentd.Tier, reason string) agentd.ModelMessage {
		_ = r.relayRefusal(ctx, &agentd.ToolCallRefusedPayload{RunID: p.RunID, ToolCallID: mc.ID, ToolName: mc.Name, ServerID: d.ServerID,
			Tier: tier, Reason: reason, Escalated: d.Escalated}, d.Digest)
		tm.ToolStatus, tm.ToolReason, tm.Content = status, reason, reason
		return tm
	}
	switch {
	case d.Refused:
		return refuse(agentd.StatusRefused, d.Tier, d.Reason)
	case d.Tier != agentd.TierAuto:
		return refuse(agentd.StatusDenied, d.Tier, fmt.Sprintf("%q needs a person's approval, and a subagent cannot ask for it", mc.Name))
	}
	c := agentd.ToolCall{ID: mc.ID, TenantID: p.TenantID, ProjectID: p.ProjectID, ConversationID: p.ConversationID, RunID: p.RunID,
		CorrelationID: p.CorrelationID, Name: mc.Name, ServerID: d.ServerID, Arguments: d.Arguments, ArgumentsSHA256: d.Digest,
		Tier: d.Tier, Status: agentd.StatusExecuting, StateSHA256: cl.prep.State, Method: d.Method, Endpoint: d.Endpoint,
		ConnectionName: d.Connection, PathTemplate: d.PathTemplate, Params: d.Params}
	c = r.execute(ctx, c)
	tm.Content, tm.ToolReason = r.e.toolResultText(c)
	tm.ToolStatus = c.Status
	if c.Status == agentd.StatusCompleted {
		tm.ToolResult = c.Result
	}
	return tm
}

// classifyBothPhases classifies one of the subagent's calls as the
// parent's loop does: in phase classify and, for an auto call, again in
// phase execute, right before it runs; a call whose classification changed
// in between is confirm (so denied here).
func (r *subagentRun) classifyBothPhases(ctx context.Context, mc agentd.ModelToolCall) classified {
	p := r.parent
	var def *toolset.Tool
	if d, ok := r.defs[mc.Name]; ok {
		def = &d
	}
	in := classifyIn{id: mc.ID, name: mc.Name, conv: p.ConversationID, run: p.RunID, tenant: p.TenantID,
		args: mc.Arguments, delegated: r.deleg, phase: toolset.PhaseClassify, def: def}
	cl := r.e.classify(ctx, in)
	if cl.d.Refused || cl.d.Tier != agentd.TierAuto {
		return cl
	}
	in.args, in.tier, in.phase = cl.d.Arguments, cl.d.Tier, toolset.PhaseExecute
	again := r.e.classify(ctx, in)
	if !again.d.Refused && again.d.Tier == agentd.TierAuto && again.d.Digest == cl.d.Digest {
		return cl
	}
	if !again.d.Refused {
		again.d.Tier = agentd.TierConfirm
	}
	return again
}

// execute runs a cleared call of the subagent, announced by its
// tool_call_started (nothing runs when that cannot be committed: the run
// was cancelled), and returns it with its outcome, which is relayed as its
// tool_call_result and shown to the postToolUse hooks.
func (r *subagentRun) execute(ctx context.Context, c agentd.ToolCall) agentd.ToolCall {
	e, p := r.e, r.parent
	if err := r.relay(ctx, &agentd.ToolCallStartedPayload{RunID: p.RunID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID, Arguments: c.Arguments}); err != nil {
		c.Status, c.Error = agentd.StatusCancelled, "the call was not started: "+err.Error()
		return c
	}
	c.Delegated = r.deleg // for its context endpoint
	result, err := r.sa.Tools.Execute(ctx, c)
	res := &agentd.ToolCallResultPayload{RunID: p.RunID, ToolCallID: c.ID, ToolName: c.Name, Status: agentd.StatusCompleted, Result: result}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		res.Status, res.Result, res.Error = agentd.StatusFailed, nil, "the run was cancelled while the tool was running; its outcome is unknown"
	default:
		res.Status, res.Result, res.Error = agentd.StatusFailed, nil, err.Error()
	}
	r.relayResult(ctx, res)
	if e.agent.Hooks != nil {
		if herr := e.agent.Hooks.PostToolUse(ctx, hookCall(c, toolset.PhaseExecute), res.Status, res.Result, res.Error); herr != nil && ctx.Err() == nil {
			e.log.Warn().Err(herr).Str("tool_call_id", c.ID).Msg("postToolUse hook failed")
		}
	}
	c.Status, c.Result, c.Error = res.Status, res.Result, res.Error
	return c
}
