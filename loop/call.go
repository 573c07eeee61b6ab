package loop

import (
	"context"
	"encoding/json"
	"errors"
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
// elsewhere) or the engine shut down; a store error is tried again
// (updateCall).
func (e *runner) claim(c agentd.ToolCall) (*agentd.ToolCall, bool) {
	u := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusExecuting, Now: e.clock.Now()}
	claimed, err := e.updateCall(e.ctx, "claim approved call", u, []agentd.EventDraft{e.toolCallStarted(&c)})
	return claimed, err == nil
}

// updateCall applies u with its events (drafts) in one commit, for a tool
// goroutine: a store error is tried again (untilStored) until the update
// is stored or conflicts. When a try failed at its commit but did commit
// (a connection lost at COMMIT), the next one conflicts with the call as
// that try left it — u's status, u's time to the nanosecond — and the
// update counts as stored: the claimed call runs, the result stands. It
// returns the call as updated, or the error (logged unless a conflict or
// the engine's shutdown).
func (e *runner) updateCall(ctx context.Context, what string, u agentd.CallUpdate, drafts []agentd.EventDraft) (*agentd.ToolCall, error) {
	var cur *agentd.ToolCall
	failed := false
	err := e.untilStored(u.ID, what, func() error {
		err := e.commit(drafts[0].ConversationID, func() ([]agentd.Event, error) {
			c, evs, err := e.store.UpdateToolCall(ctx, u, drafts)
			cur = c
			return evs, err
		})
		if err != nil && agentd.ErrorCode(err) != agentd.ECONFLICT {
			failed = true
		}
		return err
	})
	switch {
	case err == nil:
		return cur, nil
	case agentd.ErrorCode(err) == agentd.ECONFLICT:
		if failed && cur != nil && cur.Status == u.Status && cur.UpdatedAt.Equal(u.Now) {
			return cur, nil // an earlier try committed
		}
	case e.ctx.Err() == nil && ctx.Err() == nil:
		e.log.Error().Err(err).Str("tool_call_id", u.ID).Msg(what)
	}
	return nil, err
}

// untilStored runs write, a store write of a tool goroutine (a claim, a
// result) or of a run's end (finish), until it succeeds, conflicts (the call moved on: that is the
// answer) or fails otherwise than by the store (an invalid write is not
// tried again), backing off as a driver does (250 ms more each time, up to
// 5 s), and while the engine runs and write's context has not ended. A call whose claim or result was not
// stored would otherwise stay approved or executing with nothing to move it:
// its driver waits for it and keeps its run's lease, so no recovery takes it
// over until the process restarts (TestToolWritesRetriedAfterStoreErrors;
// a PostgreSQL restart did it). It returns the last error.
func (e *runner) untilStored(id, what string, write func() error) error {
	for failures := 1; ; failures++ {
		err := write()
		code := agentd.ErrorCode(err)
		if (code != agentd.EINTERNAL && code != agentd.EUNAVAILABLE) || errors.Is(err, context.Canceled) ||
			errors.Is(err, context.DeadlineExceeded) || e.ctx.Err() != nil {
			return err
		}
		wait := min(time.Duration(failures)*250*time.Millisecond, 5*time.Second)
		e.log.Error().Err(err).Str("id", id).Dur("retry_in", wait).Msg(what)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-e.ctx.Done():
			t.Stop()
			return err
		}
	}
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
	if _, err := e.updateCall(context.WithoutCancel(rs.ctx), "record tool result", u, []agentd.EventDraft{e.event(c.ConversationID, p)}); err != nil {
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
