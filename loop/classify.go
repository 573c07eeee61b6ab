package loop

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// This file classifies a call — package confirm's classification, the
// hooks' verdict and the tool source's preparation (the card's diff, the
// state an approval is bound to) — at the model's step and again right
// before the call runs; a call whose classification changed in between is
// parked again with a new card (repark). Both places use classify, so what
// a card shows and what runs follow the same rules.

// classifyIn is one call to classify.
type classifyIn struct {
	id, name, conv, run, tenant string
	args                        json.RawMessage
	delegated                   bool
	// tier is the call's current tier, for the hooks (execute phase).
	tier  agentd.Tier
	phase string
	// def is the tool, nil when the model may not call it (nor may it
	// when the tool is not for tenant).
	def *toolset.Tool
}

// classified is a call's classification.
type classified struct {
	d    confirm.Classification
	prep toolset.Preparation
	// hookAsked is set when a hook's ask made the tier confirm (or kept
	// it): no remembered grant answers a hook (SPEC §11.2).
	hookAsked bool
}

// classify classifies a call: confirm's classification of the arguments,
// then (when the tool is valid) the preToolUse hooks with the effective
// arguments and confirm's classification again with their verdict, then
// the tool source's Prepare of the effective arguments of a call that may
// run.
func (e *runner) classify(ctx context.Context, in classifyIn) classified {
	call := confirm.Call{Name: in.name, Arguments: in.args, Delegated: in.delegated, TenantID: in.tenant}
	if in.def != nil && in.def.ForTenant(in.tenant) {
		call.Tool = in.def.Confirm // a tool the tenant does not see is unknown to it
	}
	d := confirm.Classify(call)
	if d.Refused && (d.Invalid || call.Tool == nil) {
		return classified{d: d} // no hook sees a call that cannot run as written
	}
	if e.agent.Hooks != nil {
		tier := in.tier
		if in.phase == toolset.PhaseClassify {
			tier = d.Tier
		}
		if v := e.agent.Hooks.PreToolUse(ctx, toolset.HookCall{
			ToolCallID: in.id, ToolName: in.name, ServerID: d.ServerID, Arguments: d.Arguments,
			ConversationID: in.conv, RunID: in.run, Tier: tier, Phase: in.phase,
		}); v != nil {
			call.Hook = v
			d = confirm.Classify(call)
		}
	}
	asked := call.Hook != nil && call.Hook.Verdict == confirm.HookAsk
	if d.Refused || in.def.Prepare == nil {
		return classified{d: d, hookAsked: asked}
	}
	prep, err := in.def.Prepare(ctx, d.Arguments)
	if err != nil {
		d.Tier, d.Refused, d.Invalid = agentd.TierNever, true, true
		d.Why = err.Error()
		d.Reason = fmt.Sprintf("The call was not performed: %v", err)
		d.AllowedDecisions = nil
		return classified{d: d}
	}
	return classified{d: d, prep: prep, hookAsked: asked}
}

// recheck classifies an approved call again right before it runs (hooks
// in phase execute, the tool's Prepare) and reports whether it may run as
// approved. If not, the call is already handled: refused (a hook denies it
// now), or parked again with a new card when its effective arguments, the
// state it was approved against, or its tier (a hook asks now for a call
// no person approved) changed — the earlier decision stays in the call's
// history and nothing runs on it.
func (e *runner) recheck(ctx context.Context, c agentd.ToolCall) bool {
	def := e.def(c.Name)
	if def == nil || (e.agent.Hooks == nil && def.Prepare == nil) {
		return true // an unknown tool fails in Execute, as before
	}
	var conv *agentd.Conversation
	err := e.untilStored(c.ID, "recheck: read conversation", func() (err error) {
		conv, err = e.store.Conversation(ctx, c.ConversationID)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error().Err(err).Str("tool_call_id", c.ID).Msg("recheck: read conversation")
		}
		return false // the call stays approved; recovery or the next start runs it
	}
	cl := e.classify(ctx, classifyIn{id: c.ID, name: c.Name, conv: c.ConversationID, run: c.RunID, tenant: c.TenantID,
		args: c.Arguments, delegated: conv.Delegated, tier: c.Tier, phase: toolset.PhaseExecute, def: def})
	d := cl.d
	switch {
	case d.Refused:
		e.refuseApproved(ctx, c, d)
		return false
	case d.Digest != c.ArgumentsSHA256:
		reason := "The arguments changed after approval"
		if c.Tier != agentd.TierConfirm {
			reason = "The arguments changed after the call was classified"
		}
		e.repark(ctx, c, cl, fmt.Sprintf("%s (a hook rewrote them before execution); approve the new arguments to run the call", reason), true)
		return false
	case cl.prep.State != c.StateSHA256:
		e.repark(ctx, c, cl, "The file changed after the card was shown; nothing was written. Review the new diff", c.Escalated)
		return false
	case d.Tier == agentd.TierConfirm && c.Tier != agentd.TierConfirm:
		e.repark(ctx, c, cl, d.Reason, true)
		return false
	case c.GrantedBy != nil && cl.hookAsked:
		// A hook asks now for a call a grant cleared: a grant never
		// answers a hook's ask (SPEC §11.2).
		e.repark(ctx, c, cl, d.Reason, true)
		return false
	}
	return true
}

// refuseApproved ends an approved call that may not run after all.
func (e *runner) refuseApproved(ctx context.Context, c agentd.ToolCall, d confirm.Classification) {
	u := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusRefused, Error: d.Reason, Now: e.clock.Now()}
	_, _ = e.updateCall(ctx, "refuse approved call", u, []agentd.EventDraft{e.event(c.ConversationID, &agentd.ToolCallRefusedPayload{
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID, Tier: d.Tier, Reason: d.Reason, Escalated: d.Escalated,
	})})
}

// repark parks an approved call again with its new classification and a
// new deadline, and announces it with a new confirmation_required, in one
// commit (approved → requires_confirmation).
func (e *runner) repark(ctx context.Context, c agentd.ToolCall, cl classified, reason string, escalated bool) {
	now := e.clock.Now()
	deadline := cl.d.Deadline(now, e.agent.ApprovalTimeout).UTC()
	allowed := cl.d.AllowedDecisions
	if len(allowed) == 0 {
		allowed = []string{"approve", "deny"}
	}
	rule := ruleFor(cl.d, e.agent.Approval) // the new card's rule, as at any park
	allowed = allowedFor(allowed, rule)
	next := c
	next.Status = agentd.StatusRequiresConfirmation // its card is the one after c's decisions
	next.Arguments, next.ArgumentsSHA256, next.Tier, next.Reason, next.Escalated = cl.d.Arguments, cl.d.Digest, agentd.TierConfirm, reason, escalated
	next.AllowedDecisions, next.Diff, next.StateSHA256, next.RequiresApprovalAt = allowed, cl.prep.Diff, cl.prep.State, &deadline
	next.Approval, next.Approvals = rule, nil // a new card is approved afresh
	next.Method, next.Endpoint, next.PathTemplate, next.Params = cl.d.Method, cl.d.Endpoint, cl.d.PathTemplate, cl.d.Params
	u := agentd.CallUpdate{
		ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusRequiresConfirmation, Now: now,
		Repark: &agentd.CallRepark{Arguments: next.Arguments, ArgumentsSHA256: next.ArgumentsSHA256, Tier: next.Tier,
			Reason: reason, Escalated: escalated, AllowedDecisions: allowed, Diff: next.Diff, StateSHA256: next.StateSHA256,
			RequiresApprovalAt: deadline, Method: next.Method, Endpoint: next.Endpoint, PathTemplate: next.PathTemplate, Params: next.Params,
			Approval: rule},
	}
	if _, err := e.updateCall(ctx, "park approved call again", u, []agentd.EventDraft{e.confirmationRequired(&next)}); err != nil {
		return
	}
	e.log.Info().Str("tool_call_id", c.ID).Str("run_id", c.RunID).Msg("call parked again: " + reason)
	e.timers.noteDeadline(deadline)
	e.timers.noteReminders(&next) // reminders are armed from the new deadline
}
