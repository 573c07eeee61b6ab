// Package direct runs tools outside the agent loop, on the paths SPEC §2.3
// names: direct eval (POST /v1/tools/{name}/eval, operator and admin keys:
// any tool of the tenant's list, every gate bypassed), the invoke trigger
// (POST /v1/tools/{name}/run, operator, delegate and admin keys: a tool
// whose tool.json has triggers.invoke, in the durable execution context)
// and a schedule's tick (package schedule calls Scheduled: the same
// context, acting as a delegate, in the tick's delegated conversation).
// Every one of them is an audit entry.
//
// It imports the tool contract (toolset), confirm and the domain, never the
// loop: the registry (tools/registry) that runs the calls is handed in by
// package server. docs/runtime.md is the user's view.
package direct

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// Tools is the registry as this package uses it: a tool by name
// (llm_callable or not) and running a cleared call of it.
// *registry.Registry is one.
type Tools interface {
	Tool(name string) (toolset.Tool, bool)
	Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error)
}

// AuditLog is where each eval, run and tick is recorded: the one write of
// agentd.AuditLog.
type AuditLog interface {
	AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error)
}

// Result is a call that ran: completed with its result, or failed with
// its error (the tool's own failure: a non-zero exit, bad output, a
// timeout).
type Result struct {
	Status agentd.CallStatus `json:"status"`
	Result json.RawMessage   `json:"result,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// Preview is what a confirm-tier tool answers on the invoke path when the
// caller did not declare "intent": "confirmed_write": nothing ran.
type Preview struct {
	Tool            string          `json:"tool"`
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	Tier            agentd.Tier     `json:"tier"`
	Reason          string          `json:"reason"`
	Instruction     string          `json:"instruction"`
}

// Outcomes of an audit entry of this package besides error codes.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomePreview   = "preview"
)

// Runner runs tools directly. It is safe for concurrent use.
type Runner struct {
	tools Tools
	audit AuditLog
	log   zerolog.Logger
	clock agentd.Clock
}

// New returns a runner of tools' calls that records each in audit (nil:
// none, for tests) and logs on log.
func New(tools Tools, audit AuditLog, log zerolog.Logger) *Runner {
	return &Runner{tools: tools, audit: audit, log: log, clock: agentd.SystemClock{}}
}

// Eval runs tool name with args for p, bypassing every gate: tiers (auto,
// confirm, review, never alike), policies, hooks, llm_callable false; only
// the tool's schema (and a source's own checks, such as a file tool's
// path) still refuse. Every eval is audited (kind tool_eval), refused ones
// too.
//
// Errors, with nothing run: EFORBIDDEN unless p is an operator or admin
// key; ENOTFOUND for a tool that does not exist or that p's tenant does
// not see; EINVALID for arguments the schema refuses.
func (r *Runner) Eval(ctx context.Context, p agentd.Principal, name string, args json.RawMessage) (*Result, error) {
	a := r.begin(agentd.AuditToolEval, p, name)
	res, err := r.eval(ctx, p, name, args, a)
	r.record(ctx, a, res, err)
	return res, err
}

func (r *Runner) eval(ctx context.Context, p agentd.Principal, name string, args json.RawMessage, a *agentd.AuditEntry) (*Result, error) {
	if p.Role != agentd.RoleOperator && p.Role != agentd.RoleAdmin {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "direct eval needs an operator or admin key")
	}
	def, err := r.tool(name, p.TenantID)
	if err != nil {
		return nil, err
	}
	d := confirm.Classify(confirm.Call{Name: name, Arguments: args, Tool: def.Confirm, TenantID: p.TenantID})
	a.Tier, a.ArgumentsSHA256 = d.Tier, d.Digest
	if d.Invalid {
		return nil, agentd.Errorf(agentd.EINVALID, "%s", d.Why)
	}
	return r.execute(ctx, def, r.call(p, name, d, a.ToolCallID)), nil
}

// Run runs tool name with args for p on the invoke path, in the durable
// execution context (SPEC §2.3): no approval prompt; a confirm-tier call
// answers {"preview": Preview} and runs only when called with intent
// "confirmed_write"; review and never are refused. Hooks do not run. It
// returns *Result or the preview, and whether it is a preview. Every call
// is audited (kind tool_run).
//
// Errors, with nothing run: EFORBIDDEN unless p is an operator, delegate
// or admin key, for a tool without the invoke trigger, and for a call its
// tier refuses (the message names the tier); ENOTFOUND for a tool that
// does not exist or that p's tenant does not see; EINVALID for arguments
// the schema refuses or an intent other than "", "write" and
// "confirmed_write".
func (r *Runner) Run(ctx context.Context, p agentd.Principal, name string, args json.RawMessage, intent string) (any, bool, error) {
	a := r.begin(agentd.AuditToolRun, p, name)
	out, preview, err := r.run(ctx, p, name, args, intent, a)
	if preview {
		a.Outcome = OutcomePreview
		r.append(ctx, a)
		return out, true, nil
	}
	res, _ := out.(*Result)
	r.record(ctx, a, res, err)
	return out, false, err
}

func (r *Runner) run(ctx context.Context, p agentd.Principal, name string, args json.RawMessage, intent string, a *agentd.AuditEntry) (any, bool, error) {
	switch p.Role {
	case agentd.RoleOperator, agentd.RoleDelegate, agentd.RoleAdmin:
	default:
		return nil, false, agentd.Errorf(agentd.EFORBIDDEN, "running a tool needs an operator or delegate key")
	}
	switch intent {
	case "", confirm.IntentWrite, confirm.IntentConfirmedWrite:
	default:
		return nil, false, agentd.Errorf(agentd.EINVALID, `intent must be "write" or "confirmed_write", got %q`, intent)
	}
	def, err := r.tool(name, p.TenantID)
	if err != nil {
		return nil, false, err
	}
	if !def.Invoke {
		return nil, false, agentd.Errorf(agentd.EFORBIDDEN, `tool %q has no invoke trigger ("triggers": {"invoke": true} in its tool.json)`, name)
	}
	d, err := classifyDurable(def, name, args, p.TenantID, p.Role == agentd.RoleDelegate, a)
	if err != nil {
		return nil, false, err
	}
	if d.Tier == agentd.TierConfirm && intent != confirm.IntentConfirmedWrite {
		return map[string]Preview{"preview": {Tool: name, Arguments: d.Arguments, ArgumentsSHA256: d.Digest, Tier: d.Tier,
			Reason: d.Reason, Instruction: `Nothing ran. This tool needs confirmation: call again with "intent": "confirmed_write" to run it.`,
		}}, true, nil
	}
	return r.execute(ctx, def, r.call(p, name, d, a.ToolCallID)), false, nil
}

// classifyDurable classifies a call in the durable execution context and
// answers the refusals of that context: invalid arguments, review and
// never. a gets the tier and digest.
func classifyDurable(def toolset.Tool, name string, args json.RawMessage, tenant string, delegated bool, a *agentd.AuditEntry) (confirm.Classification, error) {
	d := confirm.Classify(confirm.Call{Name: name, Arguments: args, Tool: def.Confirm, TenantID: tenant,
		Delegated: delegated, Mode: confirm.ModeDurable})
	a.Tier, a.ArgumentsSHA256 = d.Tier, d.Digest
	switch {
	case d.Invalid:
		return d, agentd.Errorf(agentd.EINVALID, "%s", d.Why)
	case d.Refused:
		return d, agentd.Errorf(agentd.EFORBIDDEN, "refused (tier %s): %s", d.Tier, d.Why)
	}
	return d, nil
}

// tool is the tool name names as tenant sees it.
func (r *Runner) tool(name, tenant string) (toolset.Tool, error) {
	var def toolset.Tool
	ok := false
	if r.tools != nil {
		def, ok = r.tools.Tool(name)
	}
	if !ok || def.Confirm == nil || !def.ForTenant(tenant) {
		return def, agentd.Errorf(agentd.ENOTFOUND, "tool %q not found", name)
	}
	return def, nil
}

// call is the call to run: not stored, in no conversation, with the
// classification's effective arguments and, for a connection tool, the
// request it resolved; delegated when p is a delegate-role key (the
// invoke path's delegate, a schedule).
func (r *Runner) call(p agentd.Principal, name string, d confirm.Classification, id string) agentd.ToolCall {
	now := r.clock.Now()
	return agentd.ToolCall{ID: id, TenantID: p.TenantID, ProjectID: p.ProjectID, Name: name, ServerID: d.ServerID,
		Arguments: d.Arguments, ArgumentsSHA256: d.Digest, Tier: d.Tier, Status: agentd.StatusExecuting,
		Method: d.Method, Endpoint: d.Endpoint, ConnectionName: d.Connection, PathTemplate: d.PathTemplate, Params: d.Params,
		Delegated: p.Role == agentd.RoleDelegate, CreatedAt: now, UpdatedAt: now}
}

// execute runs call (a source's Prepare first, whose error is the call's
// failure) and returns its outcome.
func (r *Runner) execute(ctx context.Context, def toolset.Tool, call agentd.ToolCall) *Result {
	if def.Prepare != nil {
		if _, err := def.Prepare(ctx, call.Arguments); err != nil {
			return &Result{Status: agentd.StatusFailed, Error: err.Error()}
		}
	}
	out, err := r.tools.Execute(ctx, call)
	if err != nil {
		return &Result{Status: agentd.StatusFailed, Error: err.Error()}
	}
	return &Result{Status: agentd.StatusCompleted, Result: out}
}

// begin is the audit entry of one call of name for p, before its outcome.
func (r *Runner) begin(kind string, p agentd.Principal, name string) *agentd.AuditEntry {
	return &agentd.AuditEntry{Kind: kind, TenantID: p.TenantID, ProjectID: p.ProjectID, KeyID: p.KeyID, Role: p.Role,
		ToolName: agentd.TruncateUTF8(name, 128), ToolCallID: agentd.NewID(agentd.PrefixToolCall)}
}

// record completes a with the outcome (res, or the error that refused the
// call) and appends it.
func (r *Runner) record(ctx context.Context, a *agentd.AuditEntry, res *Result, err error) {
	outcome(a, res, err)
	r.append(ctx, a)
}

// outcome sets a's outcome and reason from res or the error that refused
// the call.
func outcome(a *agentd.AuditEntry, res *Result, err error) {
	if err != nil {
		a.Outcome, a.Reason = agentd.ErrorCode(err), agentd.ErrorMessage(err)
		return
	}
	if res == nil {
		return
	}
	if res.Status == agentd.StatusCompleted {
		a.Outcome = OutcomeCompleted
		return
	}
	a.Outcome, a.Reason = OutcomeFailed, agentd.TruncateUTF8(res.Error, 1024)
}

// append appends a, logging the call either way (these paths have no
// person in them); a failure to record is logged at error level.
func (r *Runner) append(ctx context.Context, a *agentd.AuditEntry) {
	a.CreatedAt = r.clock.Now()
	r.log.Info().Str("kind", a.Kind).Str("tool", a.ToolName).Str("tool_call_id", a.ToolCallID).Str("key_id", a.KeyID).
		Str("tenant_id", a.TenantID).Str("outcome", a.Outcome).Str("reason", a.Reason).Msg("direct tool call")
	if r.audit == nil {
		return
	}
	if _, err := r.audit.AppendAudit(context.WithoutCancel(ctx), *a); err != nil {
		r.log.Error().Err(err).Str("kind", a.Kind).Str("tool", a.ToolName).Str("outcome", a.Outcome).
			Msg("direct tool call not recorded in the audit log")
	}
}

// Tick is one tick of a scheduled tool: the tool, the tick's time, the
// tenant and project its run acts for, and the delegated conversation and
// run it is recorded in (package schedule makes them; empty: none).
type Tick struct {
	Tool                  string
	At                    time.Time
	TenantID, ProjectID   string
	ConversationID, RunID string
	// Started, when set, is called with the call just before it runs (not
	// for a call refused before).
	Started func(call agentd.ToolCall)
}

// Scheduled runs the tool of one claimed tick, in the durable execution
// context as a delegate of the tick's tenant and project, with arguments
// {} (the schema's defaults filled in), and audits it (kind schedule_run,
// reason "tick <time>", then the failure; the tick's conversation and run
// ids). The call's id is derived from the tool and the tick, the same on
// every replica. A tier other than auto is refused (nothing ran): no one
// is there to confirm. It returns the outcome (a refusal as failed) and the
// audit entry.
func (r *Runner) Scheduled(ctx context.Context, t Tick) (*Result, agentd.AuditEntry) {
	p := agentd.Principal{TenantID: t.TenantID, ProjectID: t.ProjectID, KeyID: agentd.ScheduleKeyID, Role: agentd.RoleDelegate}
	a := r.begin(agentd.AuditScheduleRun, p, t.Tool)
	a.ConversationID, a.RunID = t.ConversationID, t.RunID
	at := t.At.UTC().Format(time.RFC3339Nano)
	a.ToolCallID = agentd.PrefixToolCall + "_" + uuid.NewSHA1(tickSpace, []byte(t.Tool+"\x00"+at)).String()
	res, err := r.scheduled(ctx, p, t, a)
	outcome(a, res, err)
	a.Reason = strings.TrimSuffix("tick "+at+": "+a.Reason, ": ")
	r.append(ctx, a)
	if res == nil {
		res = &Result{Status: agentd.StatusFailed, Error: agentd.ErrorMessage(err)}
	}
	return res, *a
}

// tickSpace is the UUID namespace of scheduled calls' ids.
var tickSpace = uuid.MustParse("5f1f6f4e-2b43-4c62-9a43-0d7b2a9c5e11")

func (r *Runner) scheduled(ctx context.Context, p agentd.Principal, t Tick, a *agentd.AuditEntry) (*Result, error) {
	def, err := r.tool(t.Tool, p.TenantID)
	if err != nil {
		return nil, err
	}
	d, err := classifyDurable(def, t.Tool, json.RawMessage(`{}`), p.TenantID, true, a)
	if err != nil {
		return nil, err
	}
	if d.Tier != agentd.TierAuto {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "refused (tier %s): a scheduled run has no one to confirm it", d.Tier)
	}
	call := r.call(p, t.Tool, d, a.ToolCallID)
	call.ConversationID, call.RunID = t.ConversationID, t.RunID
	if t.Started != nil {
		t.Started(call)
	}
	return r.execute(ctx, def, call), nil
}
