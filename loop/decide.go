package loop

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// decider is the part of the engine that decides parked calls: single and
// bulk decisions, approvals towards a quorum, edits, and the remembered
// grants that answer a call as an approval would (SPEC §11). It holds no
// state between calls: everything it decides on is read from the store and
// committed with one conditional update, so concurrent deciders (in this
// engine or another replica) agree. Its rules are pure functions over
// data: checkDecision, approvalAnswer, repeatedApproval, planGrant,
// grantApplies, answerResolved and package confirm's.
type decider struct {
	*core
	store  decisionStore
	drv    *drivers
	timers *timers
	// startCall runs a call a decision approved (the runner's).
	startCall func(c agentd.ToolCall)
}

// This file decides parked calls (SPEC §5 "Approval rules"), one at a time
// (Decide) or in bulk (DecideBatch). Both go through the same steps, so
// every rule is written once:
//
//	checkDecision  the request alone: who, which decision, bounds
//	planDecision   the request against the call as stored now: resolved
//	               (answerResolved: idempotent repeat or conflict),
//	               expired, stale, the edit re-validated and
//	               re-classified → a planned update
//	(commit)       one conditional store update, or several in one
//	               transaction (an atomic batch); a conflict re-plans
//	decided        after the commit: log, metrics, run the call or wake
//	               its run

// checkedDecision is a decision request that passed checkDecision.
type checkedDecision struct {
	req      agentd.DecisionRequest
	want     agentd.CallStatus // approved or denied
	decision string            // agentd.DecisionApproved or DecisionDenied
	by       agentd.Actor
	via      string
	p        agentd.Principal
}

// checkDecision validates a request by p without reading the store.
// Errors: EFORBIDDEN (a delegate key), EINVALID (bad decision, arguments
// with a denial, a reason over agentd.MaxReasonBytes, a malformed digest).
func checkDecision(p agentd.Principal, req agentd.DecisionRequest) (*checkedDecision, error) {
	if !p.MayDecide() {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	}
	d := &checkedDecision{req: req, want: agentd.StatusApproved, decision: agentd.DecisionApproved,
		by: agentd.Actor{KeyID: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Role: p.Role}, via: cmp.Or(req.Via, agentd.ViaSingle), p: p}
	switch req.Decision {
	case "approve":
	case "edit":
		if len(req.Arguments) == 0 {
			return nil, agentd.Errorf(agentd.EINVALID, `decision "edit" needs the replacement "arguments"`)
		}
	case "deny":
		if len(req.Arguments) > 0 {
			return nil, agentd.Errorf(agentd.EINVALID, `"arguments" may only come with an approval`)
		}
		d.want, d.decision = agentd.StatusDenied, agentd.DecisionDenied
	default:
		return nil, agentd.Errorf(agentd.EINVALID, `decision must be "approve", "edit" or "deny"`)
	}
	if len(req.Reason) > agentd.MaxReasonBytes {
		return nil, agentd.Errorf(agentd.EINVALID, "reason is longer than %d bytes", agentd.MaxReasonBytes)
	}
	if req.ArgumentsSHA256 != "" && !isHex64(req.ArgumentsSHA256) {
		return nil, agentd.Errorf(agentd.EINVALID, "arguments_sha256 must be 64 lowercase hex characters")
	}
	if req.CardRevision < 0 {
		return nil, agentd.Errorf(agentd.EINVALID, "card_revision must be 1 or more")
	}
	return d, nil
}

// cardOf is the card of c that req answers (ToolCall.CardRevision): the
// one it names; else the first card that showed the digest it names (the
// pending card when none did); else the call's first card. So a request
// that names neither answers the card it answered the first time, however
// often the call was parked again since.
func cardOf(c *agentd.ToolCall, req agentd.DecisionRequest) int {
	if req.CardRevision > 0 {
		return req.CardRevision
	}
	if req.ArgumentsSHA256 != "" {
		for i, dec := range c.Decisions {
			if dec.ArgumentsSHA256 == req.ArgumentsSHA256 {
				return i + 1
			}
		}
		if c.Status == agentd.StatusRequiresConfirmation {
			return len(c.Decisions) + 1
		}
	}
	return 1
}

// oldCard is the answer to a decision on a card of c that was answered
// (by c.Decisions[card-1]) before the call was parked again.
func oldCard(c *agentd.ToolCall, card int) error {
	prev := c.Decisions[card-1].Decision
	if c.Status == agentd.StatusRequiresConfirmation {
		return agentd.Errorf(agentd.ESTALE, "card %d of this call was %s, then the call was parked again with card %d "+
			"(card_revision %d, arguments_sha256 %s): review that card and decide on it", card, prev, c.CardRevision(), c.CardRevision(), c.ArgumentsSHA256)
	}
	return agentd.Errorf(agentd.ESTALE, "card %d of this call was %s, then the call was parked again; its latest card (%d) was %s",
		card, prev, c.CardRevision(), c.Decisions[len(c.Decisions)-1].Decision)
}

// plannedDecision is a decision ready to commit: the conditional update of
// the call and the events that announce it. refusal is set when edited
// arguments were refused: the update records the approval and the
// refusal, and refusal is what the approver hears.
type plannedDecision struct {
	call    *agentd.ToolCall
	u       agentd.CallUpdate
	drafts  []agentd.EventDraft
	refusal error
	// answer, when set, is what the approver hears instead of u.Decision:
	// an approval short of the call's quorum (u has no decision then), or
	// the one that reached it.
	answer *agentd.Decision
}

// result is the decision the approver hears.
func (pd *plannedDecision) result() *agentd.Decision {
	if pd.answer != nil {
		return pd.answer
	}
	return pd.u.Decision
}

// planDecision applies the approval rules to d on call c as read now. A
// decision answers one card of the call (cardOf): a card that was answered
// before the call was parked again is ESTALE, whatever the decision, so it
// never becomes a decision on a later card; a card the call never showed is
// ECONFLICT. For a call that is no longer pending it returns no plan and
// answerResolved's answer: the stored decision for an idempotent repeat, else
// ECONFLICT, EEXPIRED or ESTALE. For a pending call past its deadline it
// expires the call and answers EEXPIRED; a digest that differs is ESTALE;
// edited arguments that are not valid, or that the card does not allow,
// are EINVALID.
func (e *decider) planDecision(ctx context.Context, c *agentd.ToolCall, d *checkedDecision) (*plannedDecision, *agentd.Decision, error) {
	if err := e.mayDecide(ctx, d.p, c); err != nil {
		return nil, nil, err
	}
	card, latest := cardOf(c, d.req), c.CardRevision()
	switch {
	case card > max(latest, 1):
		return nil, nil, agentd.Errorf(agentd.ECONFLICT, "card_revision %d names no card of this call (its latest card is %d)", card, latest)
	case card < latest:
		return nil, nil, oldCard(c, card)
	case c.Status != agentd.StatusRequiresConfirmation:
		dec, err := answerResolved(c, d.decision, d.req.ArgumentsSHA256, e.effectiveDigest(c, d.req.Arguments))
		return nil, dec, err
	}
	now := e.clock.Now()
	if err := e.stillDecidable(ctx, c, d, now); err != nil {
		return nil, nil, err
	}
	rule := c.ApprovalOf()
	var grant *agentd.Grant
	if d.req.Remember != nil {
		var err error
		if grant, err = planGrant(c, d, rule, now); err != nil {
			return nil, nil, err
		}
	}
	stored := len(c.Approvals) // what the approvals update is conditional on
	if d.want == agentd.StatusApproved && rule.Quorum > 1 {
		if err := e.liveApprovals(ctx, c, rule); err != nil {
			return nil, nil, err
		}
		switch {
		case len(d.req.Arguments) > 0:
			return nil, nil, agentd.Errorf(agentd.EINVALID, "this call needs %d approvals, so its arguments cannot be edited", rule.Quorum)
		case repeatedApproval(c, rule, d.by.KeyID) != nil:
			return nil, repeatedApproval(c, rule, d.by.KeyID), nil
		case len(c.Approvals)+1 < rule.Quorum:
			return e.planPartial(c, d, rule, latest, stored, now), nil, nil
		}
	}
	dec := &agentd.Decision{
		ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: c.ID, Decision: d.decision, Reason: d.req.Reason,
		DecidedBy: d.by.KeyID, Role: d.by.Role, Via: d.via, ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now.UTC(),
	}
	pd := &plannedDecision{call: c,
		u: agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, CardRevision: latest,
			Status: d.want, Decision: dec, Now: now},
		drafts: []agentd.EventDraft{e.resolvedEvent(*c, dec)},
	}
	if grant != nil { // SPEC §11.2: the grant commits with the decision
		pd.u.Grant = grant
		pd.drafts = append(pd.drafts, e.grantCreated(grant))
	}
	if d.want == agentd.StatusDenied {
		pd.u.Error = "denied by " + d.by.KeyID
	} else if rule.Quorum > 1 {
		// The approval that reaches the quorum, planned on the approvals
		// it saw: one recorded meanwhile makes it plan again.
		pd.u.Approvals = &agentd.ApprovalsUpdate{Before: stored, After: c.Approvals}
		all := append(slices.Clone(c.Approvals), agentd.Approval{KeyID: dec.DecidedBy, Role: dec.Role, Via: dec.Via, At: dec.CreatedAt})
		pd.answer = approvalAnswer(c, rule, all, dec, agentd.StatusApproved)
	}
	if d.want == agentd.StatusApproved && len(d.req.Arguments) == 0 && e.startsOnDecision(c) {
		// One commit: the approval and the claim (startCall runs an
		// executing call as it is).
		pd.u.Status = agentd.StatusExecuting
		pd.drafts = append(pd.drafts, e.toolCallStarted(c))
	}
	if len(d.req.Arguments) > 0 {
		var err error
		if pd.refusal, err = e.edit(ctx, c, d.req.Arguments, &pd.u, &pd.drafts); err != nil {
			return nil, nil, err
		}
	}
	return pd, nil, nil
}

// stillDecidable refuses a decision on a pending call whose deadline
// passed at now (it expires the call and answers EEXPIRED) or whose digest
// differs from the one the request names (ESTALE).
func (e *decider) stillDecidable(ctx context.Context, c *agentd.ToolCall, d *checkedDecision, now time.Time) error {
	if c.RequiresApprovalAt != nil && !now.Before(*c.RequiresApprovalAt) {
		if err := e.timers.expire(ctx, *c); err != nil && agentd.ErrorCode(err) != agentd.ECONFLICT {
			return err
		}
		return agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed at %s; nothing was done", c.RequiresApprovalAt.UTC().Format(time.RFC3339))
	}
	if d.req.ArgumentsSHA256 != "" && d.req.ArgumentsSHA256 != c.ArgumentsSHA256 {
		return agentd.Errorf(agentd.ESTALE, "arguments_sha256 does not match the pending arguments (%s)", c.ArgumentsSHA256)
	}
	return nil
}

// startsOnDecision reports whether an approval of c may claim it in the
// decision's own commit (approved → executing at once, with
// tool_call_started) instead of a second commit: only when a restart may
// run c again — its tool is idempotent (recovery re-runs an interrupted
// executing call; a connection write carries Idempotency-Key: <call id>) —
// and nothing is checked between approval and start (no hooks, no
// Prepare: recheck would pass it as it is). Every other call keeps the
// two commits that make "approved but certainly not started" exact.
func (e *decider) startsOnDecision(c *agentd.ToolCall) bool {
	def := e.def(c.Name)
	return def != nil && def.Idempotent && e.agent.Hooks == nil && def.Prepare == nil
}

// decided is what follows a committed decision: the log line, the
// metrics, and the call's execution (approved) or its run's next step.
func (e *decider) decided(pd *plannedDecision, updated *agentd.ToolCall) {
	c, dec := pd.call, pd.u.Decision
	if dec == nil { // an approval short of the quorum: the call stays parked
		a := pd.answer
		e.log.Info().Str("tool_call_id", c.ID).Str("run_id", c.RunID).Str("conversation_id", c.ConversationID).
			Str("via", a.Via).Str("key_id", a.DecidedBy).Int("approvals", len(a.Approvals)).Int("quorum", a.Quorum).Msg("approval recorded")
		return
	}
	e.log.Info().Str("tool_call_id", c.ID).Str("run_id", c.RunID).Str("conversation_id", c.ConversationID).
		Str("correlation_id", c.CorrelationID).Str("decision", dec.Decision).Str("via", dec.Via).
		Str("key_id", dec.DecidedBy).Bool("edited", pd.u.Edit != nil).Msg("decision")
	e.obs.Decided(dec.Decision, dec.Via, e.clock.Now().Sub(c.UpdatedAt))
	if updated.Status.Terminal() {
		e.obs.ToolCallFinished(updated.Status, updated.Tier)
	}
	if updated.Status == agentd.StatusApproved || updated.Status == agentd.StatusExecuting {
		e.startCall(*updated)
	} else {
		e.drv.wakeRun(c.RunID)
	}
	// After the call is on its way: the span's read of the run is not on
	// the path from the approval to the tool's start.
	e.tr.waitSpan(e.traceRun(e.ctx, c.RunID), *c, dec.Decision, dec.DecidedBy, dec.Via, pd.u.Now)
}

// decideRetries bounds how often a decision is planned again after it lost
// a race to another decision of the same call.
const decideRetries = 5

// decide is Engine.Decide.
func (e *decider) decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error) {
	d, err := checkDecision(p, req)
	if err != nil {
		return nil, err
	}
	for range decideRetries {
		c, err := e.callOf(ctx, p, id, req.ConversationID)
		if err != nil {
			return nil, err
		}
		pd, dec, err := e.planDecision(ctx, c, d)
		if pd == nil {
			return dec, err
		}
		var updated *agentd.ToolCall
		err = e.commit(c.ConversationID, func() ([]agentd.Event, error) {
			cur, evs, err := e.store.UpdateToolCall(ctx, pd.u, pd.drafts)
			updated = cur
			return evs, err
		})
		if agentd.ErrorCode(err) == agentd.ECONFLICT {
			continue // decided concurrently: answer from the stored decision
		} else if err != nil {
			return nil, err
		}
		e.decided(pd, updated)
		if pd.refusal != nil {
			return nil, pd.refusal
		}
		return pd.result(), nil
	}
	return nil, agentd.Errorf(agentd.ECONFLICT, "the call is being decided concurrently; retry")
}

// callOf is the call id as p reaches it; ENOTFOUND also for a call not of
// conversation conv, when set (a chat protocol's thread names its calls).
func (e *decider) callOf(ctx context.Context, p agentd.Principal, id, conv string) (*agentd.ToolCall, error) {
	c, err := e.toolCall(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if conv != "" && c.ConversationID != conv {
		return nil, notFound("tool call")
	}
	return c, nil
}

// edit re-validates and re-classifies an approval's replacement arguments
// (SPEC §5) and turns u into the edited approval. Arguments that are not
// valid are EINVALID and change nothing. An edit that escalates the call
// (or that the policy refuses) makes the call refused, not run: u then
// records the approval and the refusal, and refusal is the EFORBIDDEN the
// approver gets.
func (e *decider) edit(ctx context.Context, c *agentd.ToolCall, args json.RawMessage, u *agentd.CallUpdate, drafts *[]agentd.EventDraft) (refusal error, err error) {
	if !slices.Contains(c.AllowedDecisions, "edit") {
		return nil, agentd.Errorf(agentd.EINVALID, "this call does not allow editing its arguments")
	}
	conv, err := e.store.Conversation(ctx, c.ConversationID)
	if err != nil {
		return nil, err
	}
	d := confirm.Classify(confirm.Call{Name: c.Name, Arguments: args, Tool: e.tools.now().visible(c.Name), Delegated: conv.Delegated, TenantID: c.TenantID})
	if d.Invalid {
		return nil, agentd.Errorf(agentd.EINVALID, "edited arguments: %s", d.Why)
	}
	if d.Digest == c.ArgumentsSHA256 {
		return nil, nil // the same arguments: a plain approval
	}
	if d.Connection != c.ConnectionName || d.Method != c.Method || d.PathTemplate != c.PathTemplate {
		// allow_edit is the approving endpoint's: an edit may change what
		// is sent there, not send it elsewhere.
		return nil, agentd.Errorf(agentd.EINVALID, "edited arguments may not change the connection, method or endpoint (%s %s on %q)",
			c.Method, cmp.Or(c.PathTemplate, c.Endpoint), c.ConnectionName)
	}
	u.Decision.EditedArguments, u.Decision.EditedArgumentsSHA256 = d.Arguments, d.Digest
	reason := d.Reason
	if !d.Refused {
		reason = c.Reason // approved as edited; the card's reason stands
	}
	u.Edit = &agentd.CallEdit{Arguments: d.Arguments, ArgumentsSHA256: d.Digest, Tier: d.Tier, Reason: reason,
		Escalated: d.Escalated || c.Escalated, Method: d.Method, Endpoint: d.Endpoint, PathTemplate: d.PathTemplate, Params: d.Params}
	(*drafts)[0] = e.resolvedEvent(*c, u.Decision)
	if !d.Refused {
		return nil, nil
	}
	u.Status, u.Error = agentd.StatusRefused, d.Reason
	*drafts = append(*drafts, e.event(c.ConversationID, &agentd.ToolCallRefusedPayload{
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID,
		Tier: d.Tier, Reason: d.Reason, Escalated: true,
	}))
	return editRefused(d.Reason), nil
}

// editRefused is what an approver hears when the edited arguments were
// refused; reason is the refusal the call recorded (the model reads the
// same), so the first answer and every repeat read alike.
func editRefused(reason string) error {
	return agentd.Errorf(agentd.EFORBIDDEN, "the edited arguments were refused, so the call was not run. %s", reason)
}

// effectiveDigest is the digest an approval's edited arguments would run
// with ("" without arguments; "-" for arguments that are not valid), so a
// repeat compares like with like.
func (e *decider) effectiveDigest(c *agentd.ToolCall, args json.RawMessage) string {
	if len(args) == 0 {
		return ""
	}
	d := confirm.Classify(confirm.Call{Name: c.Name, Arguments: args, Tool: e.tools.now().visible(c.Name), TenantID: c.TenantID})
	if d.Invalid || d.Digest == "" {
		return "-"
	}
	return d.Digest
}

// answerResolved answers a decision on a call that is no longer pending: the
// stored decision when it is the same (for an edit: the same effective
// arguments) and seen for the same digest (sawDigest, when given), else a
// conflict.
func answerResolved(c *agentd.ToolCall, decision, sawDigest, editedDigest string) (*agentd.Decision, error) {
	if c.Status == agentd.StatusExpired {
		return nil, agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed; nothing was done")
	}
	if n := len(c.Decisions); n > 0 {
		d := c.Decisions[n-1]
		if sawDigest != "" && sawDigest != d.ArgumentsSHA256 {
			return nil, agentd.Errorf(agentd.ESTALE, "arguments_sha256 does not match the arguments the call was decided on (%s)", d.ArgumentsSHA256)
		}
		if d.Decision == decision {
			switch {
			case d.EditedArgumentsSHA256 != "" && editedDigest != d.EditedArgumentsSHA256:
				return nil, agentd.Errorf(agentd.ECONFLICT, "the call was already approved with edited arguments (%s)", d.EditedArgumentsSHA256)
			case d.EditedArgumentsSHA256 == "" && editedDigest != "" && editedDigest != d.ArgumentsSHA256:
				return nil, agentd.Errorf(agentd.ECONFLICT, "the call was already approved with other arguments")
			}
			if c.Status == agentd.StatusRefused {
				return nil, editRefused(c.Error)
			}
			return &d, nil
		}
		return nil, agentd.Errorf(agentd.ECONFLICT, "the call was already %s", d.Decision)
	}
	return nil, agentd.Errorf(agentd.ECONFLICT, "the call is not awaiting confirmation (status %s)", c.Status)
}
