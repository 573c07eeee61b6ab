package loop

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// runner is the part of the engine that drives runs, one step at a time:
// a driver's loop (drive), the model's steps, the classification of each
// call and the execution of the calls that may run. Its one piece of state
// beyond the drivers' handles is the histories kept for conversations'
// next drivers (historySet, behind its own lock); each driver's step and
// history caches are its own goroutine's.
type runner struct {
	*core
	store   runnerStore
	drv     *drivers
	leases  *leases
	timers  *timers
	decider *decider
	// histories keeps the histories of conversations whose driver exited
	// (history.go).
	histories historySet
}

// drive is the one goroutine that advances a run: it calls the model when
// every call of the current step is resolved, and otherwise waits to be
// woken while a tool of the run is in flight. When every unresolved call is
// parked, nothing in this process can move the run, so the driver marks it
// waiting and returns (retireDriver): the decision or expiry that moves it starts a
// new driver (a cancel finishes the run in the store and needs none). It
// also returns when the run is no longer active or its context ends.
func (e *runner) drive(rs *runState) {
	log := e.log.With().Str("run_id", rs.id).Logger()
	failures := 0
	for {
		switch e.driveLease(rs, log, &failures) { // also ends when rs's context has
		case leaseExit:
			return
		case leaseRetry:
			continue
		}
		run, err := e.store.Run(rs.ctx, rs.id)
		if err != nil {
			if agentd.ErrorCode(err) == agentd.ENOTFOUND || !e.retryAfter(rs, log, err, &failures) {
				return
			}
			continue
		}
		if !run.Status.Active() {
			return
		}
		if run.Step > 0 {
			calls, err := e.stepCalls(rs, run)
			if err != nil {
				if !e.retryAfter(rs, log, err, &failures) {
					return
				}
				continue
			}
			failures = 0
			unresolved, parked, asking := sortStep(calls)
			if len(unresolved) > 0 {
				if len(parked) > 0 && run.Status == agentd.RunRunning {
					e.markWaiting(rs.ctx, run, parked, asking)
				}
				if len(parked) == len(unresolved) {
					exit, woken := e.retire(rs, run)
					if exit {
						rs.hist = nil // a parked run holds nothing
						return
					} else if woken {
						continue
					}
				}
				select {
				case <-rs.wake:
					continue
				case <-rs.ctx.Done():
					return
				}
			}
			if reason := e.endOf(run, calls); reason != "" {
				e.keepHistory(rs)
				e.finish(rs.ctx, run, agentd.RunCompleted, reason, "")
				return
			}
		}
		ended, err := e.modelStep(rs, run)
		switch {
		case ended || rs.ctx.Err() != nil:
			return // the step ended the run, or cancelled or shutting down (Cancel reports it)
		case err == nil:
		case agentd.ErrorCode(err) == agentd.ECONFLICT:
			continue // the run changed under us (cancelled); reload
		default:
			log.Error().Err(err).Msg("model step")
			e.fail(rs.ctx, run, err)
			return
		}
	}
}

// sortStep sorts the calls of a step: the ids of those not resolved, of
// those held (a decision or an input: only a person moves them), and the
// calls that wait on an input.
func sortStep(calls []agentd.ToolCall) (unresolved, parked []string, asking []agentd.ToolCall) {
	for _, c := range calls {
		if !c.Status.Terminal() {
			unresolved = append(unresolved, c.ID)
		}
		if c.Status.Held() {
			parked = append(parked, c.ID)
		}
		if c.Status == agentd.StatusRequiresInput {
			asking = append(asking, c)
		}
	}
	return unresolved, parked, asking
}

// endOf returns why a run whose step's calls are all resolved ends now:
// model_stop for a step without calls (a run left so by an earlier
// version's crash: such a step now ends its run in its own transaction,
// lastStep), max_turns at the agent's limit; "" when the model is asked
// for another step.
func (e *runner) endOf(run *agentd.Run, calls []agentd.ToolCall) string {
	switch {
	case len(calls) == 0:
		return "model_stop"
	case run.Step >= e.agent.MaxTurns:
		return "max_turns"
	}
	return ""
}

// retryAfter logs a store error and waits before the driver tries again
// (backing off up to 5s); it reports false when the run's context ended.
// A store hiccup must not strand a run or kill its tools.
func (e *runner) retryAfter(rs *runState, log zerolog.Logger, err error, failures *int) bool {
	if rs.ctx.Err() != nil {
		return false
	}
	*failures++
	wait := time.Duration(*failures) * 250 * time.Millisecond
	if wait > 5*time.Second {
		wait = 5 * time.Second
	}
	log.Error().Err(err).Dur("retry_in", wait).Msg("run driver: store error")
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-rs.ctx.Done():
		return false
	}
}

// stepCalls returns the calls of the run's current step. The first read
// of a step (a new driver: the run resumed, recovered, or taken over from
// another replica) reads the run's calls; after that, and after the driver
// recorded the step itself, only the step's calls that were not terminal
// are read again, each by its id. Reading the run's calls at every step
// grew with the run (docs/performance.md §26).
func (e *runner) stepCalls(rs *runState, run *agentd.Run) ([]agentd.ToolCall, error) {
	if !rs.step.known || rs.step.step != run.Step {
		all, err := e.store.RunToolCalls(rs.ctx, run.ID)
		if err != nil {
			return nil, err
		}
		var out []agentd.ToolCall
		for _, c := range all {
			if c.Step == run.Step {
				out = append(out, c)
			}
		}
		rs.step = stepCache{step: run.Step, known: true, calls: out, read: make([]bool, len(out))}
		for i := range out {
			rs.step.read[i] = true
		}
		return slices.Clone(out), nil
	}
	for i, c := range rs.step.calls {
		if c.Status.Terminal() {
			continue
		}
		cur, err := e.store.ToolCall(rs.ctx, c.ID)
		if err != nil {
			return nil, err
		}
		rs.step.calls[i], rs.step.read[i] = *cur, true
	}
	return slices.Clone(rs.step.calls), nil
}

// markWaiting moves a running run whose step holds parked calls (pending)
// to waiting, with run_waiting naming them and the inputs the calls of
// asking wait on.
func (e *runner) markWaiting(ctx context.Context, run *agentd.Run, pending []string, asking []agentd.ToolCall) {
	inputs, err := e.waitingInputs(ctx, asking)
	if err != nil && ctx.Err() == nil {
		e.log.Error().Err(err).Str("run_id", run.ID).Msg("read the run's inputs")
	}
	err = e.commit(run.ConversationID, func() ([]agentd.Event, error) {
		_, evs, err := e.store.UpdateRun(ctx, agentd.RunUpdate{
			ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting, Now: e.clock.Now(),
		}, []agentd.EventDraft{e.event(run.ConversationID, &agentd.RunWaitingPayload{
			RunID: run.ID, CorrelationID: run.CorrelationID, Pending: pending, Inputs: inputs,
		})})
		return evs, err
	})
	if err != nil && agentd.ErrorCode(err) != agentd.ECONFLICT && ctx.Err() == nil {
		e.log.Error().Err(err).Str("run_id", run.ID).Msg("mark run waiting")
	}
}

// finish ends an active run with a run_finished event. reason is one
// word — model_stop, max_turns or error; errMsg is a failed run's message,
// in the event's "error" (the stored run's reason reads "error: <message>").
// It reports whether the run has ended: finished now, or already (a
// cancel won); false after a store error, when the run may still be
// active.
func (e *runner) finish(ctx context.Context, run *agentd.Run, status agentd.RunStatus, reason, errMsg string) bool {
	now := e.clock.Now()
	draft, reason := e.runFinished(run, status, reason, errMsg)
	drafts := []agentd.EventDraft{draft}
	// Tried again after a store error, or the run would stay active with
	// no driver until a restart (one process) or a lease tick (replicas).
	err := e.untilStored(run.ID, "finish run", func() error {
		return e.commit(run.ConversationID, func() ([]agentd.Event, error) {
			_, evs, err := e.store.UpdateRun(ctx, agentd.RunUpdate{
				ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning, agentd.RunWaiting}, Status: status, Reason: reason, Now: now,
			}, drafts)
			return evs, err
		})
	})
	switch {
	case err == nil:
		e.finished(run, status, errMsg, now)
	case agentd.ErrorCode(err) != agentd.ECONFLICT:
		e.log.Error().Err(err).Str("run_id", run.ID).Msg("finish run")
		return false
	}
	return true
}

// runFinished returns the run_finished event of run ending with status
// (reason and errMsg as finish takes them), with run's usage and stop
// reason, and the reason the stored run keeps.
func (e *runner) runFinished(run *agentd.Run, status agentd.RunStatus, reason, errMsg string) (agentd.EventDraft, string) {
	p := &agentd.RunFinishedPayload{RunID: run.ID, CorrelationID: run.CorrelationID, Status: status, Reason: reason,
		Usage: run.Usage, StopReason: run.StopReason, Error: errMsg}
	if errMsg != "" {
		reason += ": " + errMsg
	}
	return e.event(run.ConversationID, p), reason
}

// finished observes a run's end, committed at now.
func (e *runner) finished(run *agentd.Run, status agentd.RunStatus, errMsg string, now time.Time) {
	e.obs.RunFinished(status)
	e.tr.runSpan(run, e.agent.Name, status, errMsg, now)
}

// fail ends a run after an error the model or the store reported.
func (e *runner) fail(ctx context.Context, run *agentd.Run, cause error) {
	// Clients see the safe message of an *agentd.Error (a provider's own
	// words, say); anything else stays in the log.
	msg := agentd.ErrorMessage(cause)
	if agentd.ErrorCode(cause) == agentd.EINTERNAL {
		msg = "internal error; see the server log"
	}
	if err := e.emit(ctx, run.ConversationID, &agentd.ErrorPayload{RunID: run.ID, Code: "run_failed", Message: msg}); err != nil && ctx.Err() == nil {
		e.log.Error().Err(err).Str("run_id", run.ID).Msg("append run error")
	}
	e.finish(ctx, run, agentd.RunFailed, "error", msg)
}

// modelStep asks the model for the next step of run and records it with its
// calls atomically; then it starts the auto calls. A step without calls
// finishes the run: ended reports that it has ended, so that the driver
// exits without reading the run again.
func (e *runner) modelStep(rs *runState, run *agentd.Run) (ended bool, err error) {
	ctx := rs.ctx
	conv := run.ConversationID
	history, err := e.history(ctx, rs, run)
	if err != nil {
		return false, err
	}
	delegated, err := e.delegated(rs, conv)
	if err != nil {
		return false, err
	}
	msgID := agentd.NewID(agentd.PrefixMessage)
	resp, err := e.generate(ctx, run, history, msgID)
	if err != nil {
		return false, err
	}
	step := run.Step + 1
	now := e.clock.Now()
	// Under the run's span: a preToolUse hook gets it as TRACEPARENT.
	msg, calls, drafts := e.stepOf(e.tr.under(ctx, run), run, delegated, msgID, step, resp, now)
	var auto []*agentd.ToolCall
	for _, c := range calls {
		if c.Status == agentd.StatusApproved {
			auto = append(auto, c)
		}
	}
	rec := agentd.StepRecord{RunID: run.ID, Step: step, Usage: resp.Usage, StopReason: resp.StopReason, Message: msg, Calls: calls,
		Inputs: inputsOf(calls), Now: now}
	if len(calls) == 0 {
		return e.lastStep(rs, run, rec, drafts)
	}
	err = e.commit(conv, func() ([]agentd.Event, error) {
		return e.store.RecordStep(ctx, rec, drafts)
	})
	if err != nil {
		return false, err
	}
	rs.step = stepCache{step: step, known: true, calls: make([]agentd.ToolCall, len(calls)), read: make([]bool, len(calls))}
	for i, c := range calls {
		rs.step.calls[i] = *c
	}
	e.stepRecorded(auto, calls)
	return false, nil
}

// lastStep records rec, a step without calls, and the end of its run in
// one transaction (StepRecord.End): the step's message, its event and
// run_finished commit together, so a turn that answers in one step
// commits once for it, not twice. Like finish, the write is tried again
// after a store error (it is conditional on the run's step, so a try
// that did commit makes the next a conflict). A crash before it leaves
// the run at its previous step, to be driven again; there is no longer a
// moment with the step recorded and the run active (which recovery ends
// as model_stop: endOf). It reports whether the run has ended; an error
// as modelStep's.
func (e *runner) lastStep(rs *runState, run *agentd.Run, rec agentd.StepRecord, drafts []agentd.EventDraft) (bool, error) {
	run.Usage.InputTokens += rec.Usage.InputTokens
	run.Usage.OutputTokens += rec.Usage.OutputTokens
	run.StopReason = rec.StopReason
	fin, reason := e.runFinished(run, agentd.RunCompleted, "model_stop", "")
	rec.End, rec.EndReason = agentd.RunCompleted, reason
	drafts = append(drafts, fin)
	e.keepHistory(rs)
	err := e.untilStored(run.ID, "record the last step", func() error {
		return e.commit(run.ConversationID, func() ([]agentd.Event, error) {
			return e.store.RecordStep(rs.ctx, rec, drafts)
		})
	})
	if err != nil {
		return false, err
	}
	e.finished(run, agentd.RunCompleted, "", rec.Now)
	return true, nil
}

// delegated reports whether the conversation conv of the run rs drives is
// delegated, reading it from the store only until one goroutine of the
// run has (the driver's and its tools' alike).
func (e *runner) delegated(rs *runState, conv string) (bool, error) {
	if d := rs.delegated.Load(); d != nil {
		return *d, nil
	}
	c, err := e.store.Conversation(rs.ctx, conv)
	if err != nil {
		return false, err
	}
	rs.delegated.Store(&c.Delegated)
	return c.Delegated, nil
}

// generate asks the model for the next step of run over history, appending
// each text delta as a text_delta event of message msgID as it arrives
// (deltaWriter: the model does not wait for their commits, and deltas that
// arrive during one share the next), and observes how long the model took.
func (e *runner) generate(ctx context.Context, run *agentd.Run, history []agentd.ModelMessage, msgID string) (*agentd.ModelResponse, error) {
	began := time.Now()
	ctx, span := e.tr.chatSpan(ctx, run, cmp.Or(e.agent.ModelName, agentd.ModelName(e.agent.Model)))
	deltas := e.newDeltaWriter(ctx, run, msgID)
	resp, err := e.agent.Model.Generate(ctx, agentd.ModelRequest{
		System: e.agent.System, Messages: history, Tools: e.tools.now().specsFor(run.TenantID),
	}, deltas.add)
	deltas.flush()
	e.tr.endChat(span, resp, err)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	e.obs.ModelStep(time.Since(began))
	return resp, nil
}

// stepOf turns the model's response into what step records: the assistant
// message (nil when the model said nothing and called nothing), the
// classified calls, and the events that announce them.
func (e *runner) stepOf(ctx context.Context, run *agentd.Run, delegated bool, msgID string, step int, resp *agentd.ModelResponse, now time.Time) (*agentd.Message, []*agentd.ToolCall, []agentd.EventDraft) {
	conv := run.ConversationID
	var msg *agentd.Message
	var drafts []agentd.EventDraft
	if resp.Text != "" || len(resp.ToolCalls) > 0 {
		msg = &agentd.Message{ID: msgID, ConversationID: conv, RunID: run.ID, Role: agentd.RoleAssistant, Content: resp.Text, CreatedAt: now}
	}
	if resp.Text != "" {
		drafts = append(drafts, e.event(conv, &agentd.MessagePayload{
			RunID: run.ID, MessageID: msgID, Role: agentd.RoleAssistant, Content: resp.Text,
		}))
	}
	calls := make([]*agentd.ToolCall, 0, len(resp.ToolCalls))
	for i, mc := range resp.ToolCalls {
		c, evs := e.newCall(ctx, run, delegated, msgID, step, i, mc, now)
		calls = append(calls, c)
		drafts = append(drafts, evs...)
	}
	return msg, calls, drafts
}

// stepRecorded acts on a committed step: it starts the auto calls, counts
// the refused ones as finished, and notes the approval deadline of each
// parked one.
func (e *runner) stepRecorded(auto, calls []*agentd.ToolCall) {
	for _, c := range auto {
		e.startCall(*c)
	}
	for _, c := range calls {
		if c.Status == agentd.StatusRefused {
			e.obs.ToolCallFinished(agentd.StatusRefused, c.Tier)
		}
	}
	for _, c := range calls {
		if c.Status == agentd.StatusRequiresConfirmation && c.RequiresApprovalAt != nil {
			e.timers.noteDeadline(*c.RequiresApprovalAt)
			e.timers.noteReminders(c)
		}
		for _, in := range c.Inputs {
			e.timers.noteDeadline(in.ExpiresAt) // an input's deadline: the same one timer
		}
	}
}

// newCall classifies one model-selected call and turns it into a stored
// call and the events that announce it with the step: confirmation_required (confirm) or
// tool_call_refused (review, never, unknown, invalid, denied by a hook).
// Auto calls are stored approved and announced by startCall's
// tool_call_started.
func (e *runner) newCall(ctx context.Context, run *agentd.Run, delegated bool, msgID string, step, index int, mc agentd.ModelToolCall, now time.Time) (*agentd.ToolCall, []agentd.EventDraft) {
	conv := run.ConversationID
	id := agentd.NewID(agentd.PrefixToolCall)
	cl := e.classify(ctx, classifyIn{id: id, name: mc.Name, conv: conv, run: run.ID, tenant: run.TenantID,
		args: mc.Arguments, delegated: delegated, phase: toolset.PhaseClassify, def: e.def(mc.Name)})
	d := cl.d
	c := &agentd.ToolCall{
		ID: id, TenantID: run.TenantID, ProjectID: run.ProjectID,
		ConversationID: conv, RunID: run.ID, CorrelationID: run.CorrelationID, MessageID: msgID,
		Step: step, Index: index, Name: mc.Name, ServerID: d.ServerID,
		Arguments: d.Arguments, ArgumentsSHA256: d.Digest, Tier: d.Tier, Reason: d.Reason, Escalated: d.Escalated,
		Method: d.Method, Endpoint: d.Endpoint, AllowedDecisions: d.AllowedDecisions,
		ConnectionName: d.Connection, PathTemplate: d.PathTemplate, Params: d.Params,
		Diff: cl.prep.Diff, StateSHA256: cl.prep.State,
		CreatedAt: now, UpdatedAt: now,
	}
	switch {
	case d.Refused:
		c.Status = agentd.StatusRefused
		c.Error = d.Reason
		return c, []agentd.EventDraft{e.event(conv, &agentd.ToolCallRefusedPayload{
			RunID: run.ID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID,
			Tier: c.Tier, Reason: c.Reason, Escalated: c.Escalated,
		})}
	case asks(c):
		// The question is the person's part: an input request, never a
		// card (SPEC §12.1).
		return e.ask(run, c, now)
	case d.Tier == agentd.TierConfirm:
		c.Approval = ruleFor(d, e.agent.Approval)
		if ref := e.decider.grantFor(ctx, run, c, cl.hookAsked, now); ref != nil {
			// A remembered grant answers the card (SPEC §11.2): cleared to
			// run as an approved call is, started by startCall.
			c.Status, c.GrantedBy = agentd.StatusApproved, ref
			return c, nil
		}
		c.Status = agentd.StatusRequiresConfirmation
		deadline := d.Deadline(now, e.agent.ApprovalTimeout).UTC()
		c.RequiresApprovalAt = &deadline
		c.AllowedDecisions = allowedFor(c.AllowedDecisions, c.Approval)
		return c, []agentd.EventDraft{e.confirmationRequired(c)}
	default:
		// Cleared to run but not started: start claims it (approved →
		// executing, with tool_call_started) right before the fork.
		c.Status = agentd.StatusApproved
		return c, nil
	}
}

// toolResultText is what the model reads for a resolved call.
func (e *runner) toolResultText(c agentd.ToolCall) (content, reason string) {
	switch c.Status {
	case agentd.StatusCompleted:
		content = string(c.Result)
		if content == "" {
			content = "null"
		}
	case agentd.StatusFailed:
		reason = c.Error
		content = "The tool failed: " + c.Error
	case agentd.StatusDenied:
		reason = lastDecisionReason(c)
		if reason == "" {
			reason = "no reason given"
		}
		content = "The user denied this action, so it was not performed. Reason: " + reason
	case agentd.StatusExpired:
		if asks(&c) {
			reason = "nobody answered in time"
			content = "Nobody answered the question in time."
			break
		}
		reason = "the approval request expired before anyone decided; nothing was done"
		content = "The approval request expired before anyone decided, so the action was not performed."
	case agentd.StatusRefused:
		reason = c.Error
		content = c.Error
	case agentd.StatusCancelled:
		reason = "the run was cancelled; nothing was done"
		content = "The action was cancelled, so it was not performed."
	default:
		reason = "no result"
		content = "The call has no result."
	}
	if len(content) > e.opts.MaxResultBytes {
		content = agentd.TruncateUTF8(content, e.opts.MaxResultBytes) + " …[truncated]"
	}
	return content, reason
}

func lastDecisionReason(c agentd.ToolCall) string {
	for i := len(c.Decisions) - 1; i >= 0; i-- {
		if c.Decisions[i].Reason != "" {
			return c.Decisions[i].Reason
		}
	}
	return ""
}
