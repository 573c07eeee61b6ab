package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/toolset"
)

// This file executes one tool call; run.go drives a run (model steps,
// classification, waiting). A call enters here only through startCall.

// startCall is the one entry point of a tool call's execution, whatever
// released it: the model chose an auto call, a person approved a parked one,
// or recovery found one. It runs in the background as a tool of its run's
// driver (goTool). An approved call is first claimed (approved → executing,
// one durable commit with tool_call_started), so a crash before the fork
// leaves it approved — recovery runs it — and a crash after leaves it
// executing — recovery reports the outcome unknown: at most once, never
// twice. An executing call (an idempotent call interrupted by a restart,
// which recovery re-runs) is run as it is.
func (e *runner) startCall(c agentd.ToolCall) {
	e.drv.goTool(c.RunID, func(rs *runState) {
		if e.ctx.Err() != nil {
			return // shutting down: the next start finds it where it is
		}
		// With leases, hold the run's lease while the call runs when no
		// live replica holds it (if one does, it covers the call).
		_, _ = e.leases.takeLease(rs.ctx, rs)
		if c.Status == agentd.StatusApproved {
			if !e.recheck(e.tr.under(rs.ctx, e.runTrace(rs, c.RunID)), c) {
				return // refused or parked again: nothing runs on this approval
			}
			claimed, ok := e.claim(c)
			if !ok {
				return // cancelled, or claimed elsewhere
			}
			c = *claimed
		}
		e.runCall(rs, c)
	})
}

// claim moves an approved call to executing with its tool_call_started.
// It reports false when the call is no longer approved (cancelled, claimed
// elsewhere) or the store failed (logged).
func (e *runner) claim(c agentd.ToolCall) (*agentd.ToolCall, bool) {
	var claimed *agentd.ToolCall
	err := e.commit(c.ConversationID, func() ([]agentd.Event, error) {
		cur, evs, err := e.store.UpdateToolCall(e.ctx, agentd.CallUpdate{
			ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusExecuting, Now: e.clock.Now(),
		}, []agentd.EventDraft{e.toolCallStarted(&c)})
		claimed = cur
		return evs, err
	})
	if err != nil {
		if agentd.ErrorCode(err) != agentd.ECONFLICT && e.ctx.Err() == nil {
			e.log.Error().Err(err).Str("tool_call_id", c.ID).Msg("claim approved call")
		}
		return nil, false
	}
	return claimed, true
}

// runCall runs an executing call's tool and records its result; goTool then
// wakes the driver. On shutdown the call is left executing for recovery to
// report honestly.
func (e *runner) runCall(rs *runState, c agentd.ToolCall) {
	t := e.agent.Tools
	log := e.log.With().Str("tool_call_id", c.ID).Str("run_id", c.RunID).Str("conversation_id", c.ConversationID).Logger()
	var result json.RawMessage
	var runErr error
	var took time.Duration
	var status agentd.CallStatus // the span's, once known
	var errMsg string
	hookCtx := rs.ctx // the tool's span, when traced: the postToolUse hooks run in it
	if t == nil {
		runErr = fmt.Errorf("tool %q is not registered", c.Name)
	} else if c.Name == TaskTool && c.ServerID == SubagentsServerID {
		log.Info().Str("tool", c.Name).Msg("subagent started")
		result, runErr = e.runSubagent(rs.ctx, c)
	} else {
		log.Info().Str("tool", c.Name).Msg("tool started")
		ctx, span := e.tr.toolSpan(rs.ctx, e.runTrace(rs, c.RunID), c)
		defer func() { endTool(span, status, errMsg) }()
		hookCtx = ctx
		began := time.Now()
		if c.Delegated, runErr = e.delegated(rs, c.ConversationID); runErr == nil { // for its context endpoint
			result, runErr = t.Execute(ctx, c)
		} else {
			runErr = fmt.Errorf("the call was not run: its conversation could not be read: %w", runErr)
		}
		took = time.Since(began)
	}
	if e.ctx.Err() != nil {
		return // shutting down: recovery reports the outcome honestly
	}
	u := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusExecuting}, Now: e.clock.Now()}
	p := &agentd.ToolCallResultPayload{RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name}
	switch {
	case runErr == nil:
		u.Status, u.Result = agentd.StatusCompleted, result
	case rs.ctx.Err() != nil:
		u.Status, u.Error = agentd.StatusFailed, "the run was cancelled while the tool was running; its outcome is unknown"
	default:
		u.Status, u.Error = agentd.StatusFailed, runErr.Error()
	}
	p.Status, p.Result, p.Error = u.Status, u.Result, u.Error
	status, errMsg = u.Status, u.Error
	log.Info().Str("status", string(u.Status)).Msg("tool finished")
	err := e.commit(c.ConversationID, func() ([]agentd.Event, error) {
		_, evs, err := e.store.UpdateToolCall(context.WithoutCancel(rs.ctx), u,
			[]agentd.EventDraft{e.event(c.ConversationID, p)})
		return evs, err
	})
	if err != nil {
		log.Error().Err(err).Msg("record tool result")
		return
	}
	e.obs.ToolExecuted(c.Name, u.Status, took)
	e.obs.ToolCallFinished(u.Status, c.Tier)
	if e.agent.Hooks != nil {
		if err := e.agent.Hooks.PostToolUse(hookCtx, hookCall(c, toolset.PhaseExecute), u.Status, u.Result, u.Error); err != nil {
			log.Warn().Err(err).Msg("postToolUse hook failed")
		}
	}
}

// hookCall is what the hooks are told of a stored call.
func hookCall(c agentd.ToolCall, phase string) toolset.HookCall {
	return toolset.HookCall{ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID, Arguments: c.Arguments,
		ConversationID: c.ConversationID, RunID: c.RunID, Tier: c.Tier, Phase: phase}
}
