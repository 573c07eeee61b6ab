package loop

import (
	"context"
	"slices"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// This file applies approval rules (SPEC §11.1): which rule a call is
// parked with (ruleFor), who may decide it (mayDecide, the one check every
// decision path and the pending list's ?decidable=true run) and the
// approvals of a quorum (planPartial).

// ruleFor is the approval rule of a call classified as d: the endpoint's
// or the tool's, else agent (the agent's), else the default.
func ruleFor(d confirm.Classification, agent *agentd.ApprovalRule) *agentd.ApprovalRule {
	r := agentd.DefaultApprovalRule()
	switch {
	case d.Approval != nil:
		r = *d.Approval
	case agent != nil:
		r = *agent
	}
	return &r
}

// allowedFor is the decisions a card offers under rule r: a call that
// needs more than one approval cannot be edited (each approver approves
// the same arguments); one whose rule allows remember offers it.
func allowedFor(allowed []string, r *agentd.ApprovalRule) []string {
	if r != nil && r.AllowRemember && r.Quorum == 1 && !slices.Contains(allowed, agentd.AllowedRemember) {
		// SPEC §11.2: the card offers remember.
		return append(slices.Clone(allowed), agentd.AllowedRemember)
	}
	if r == nil || r.Quorum <= 1 || !slices.Contains(allowed, "edit") {
		return allowed
	}
	return slices.DeleteFunc(slices.Clone(allowed), func(s string) bool { return s == "edit" })
}

// mayDecide is agentd.MayDecideCall for p on c (which p reaches), reading
// the conversation only when the rule's owner entry is what could let p
// decide, and the run only when the requester may not approve.
func (e *decider) mayDecide(ctx context.Context, p agentd.Principal, c *agentd.ToolCall) error {
	return e.mayDecideWith(ctx, p, c, nil)
}

// ruleReads remembers the conversations and runs mayDecideWith read, for
// a page of calls.
type ruleReads struct {
	convs      map[string]*agentd.Conversation
	requesters map[string]string
}

func (e *decider) mayDecideWith(ctx context.Context, p agentd.Principal, c *agentd.ToolCall, rr *ruleReads) error {
	r := c.ApprovalOf()
	var conv *agentd.Conversation
	if !r.Covers(p, nil) && slices.Contains(r.Approvers, agentd.ApproverOwner) {
		var ok bool
		if rr != nil {
			conv, ok = rr.convs[c.ConversationID]
		}
		if !ok {
			var err error
			if conv, err = e.store.Conversation(ctx, c.ConversationID); err != nil {
				return err
			}
			if rr != nil {
				rr.convs[c.ConversationID] = conv
			}
		}
	}
	requester := ""
	if !r.RequesterMayApprove {
		var ok bool
		if rr != nil {
			requester, ok = rr.requesters[c.RunID]
		}
		if !ok {
			run, err := e.store.Run(ctx, c.RunID)
			if err != nil {
				return err
			}
			requester = run.RequestedBy
			if rr != nil {
				rr.requesters[c.RunID] = requester
			}
		}
	}
	return agentd.MayDecideCall(r, p, conv, requester)
}

// decidableScan bounds how many store pages one ?decidable=true page
// reads: past it the page ends short, and its next_cursor goes on from
// the last call read.
const decidableScan = 20

// decidable reads pending calls of f from the store, page after page, and
// keeps those p may decide now (mayDecideWith, and not approved by p
// already) until it has limit+1 of them or read decidableScan pages. next
// is the cursor of the following page ("" at the end).
func (e *decider) decidable(ctx context.Context, p agentd.Principal, f agentd.PendingFilter, limit int) (kept []agentd.ToolCall, next string, err error) {
	rr := &ruleReads{convs: map[string]*agentd.Conversation{}, requesters: map[string]string{}}
	for range decidableScan {
		calls, err := e.store.PendingToolCalls(ctx, f)
		if err != nil {
			return nil, "", err
		}
		for i := range calls {
			c := &calls[i]
			err := e.mayDecideWith(ctx, p, c, rr)
			switch {
			case err == nil && repeatedApproval(c, c.ApprovalOf(), p.KeyID) == nil:
				kept = append(kept, *c)
			case err != nil && agentd.ErrorCode(err) != agentd.EAPPROVERNOTALLOWED && agentd.ErrorCode(err) != agentd.EREQUESTERMAYNOTAPPROVE:
				return nil, "", err
			}
			if len(kept) > limit {
				return kept[:limit], kept[limit-1].ID, nil
			}
		}
		if len(calls) < f.Limit {
			return kept, "", nil
		}
		f.After = calls[len(calls)-1].ID
	}
	return kept, f.After, nil
}

// approvalAnswer is what an approver of a call with a quorum above one
// hears: the approval as a decision object with the call's status, the
// approvals so far and the quorum. A decision that reached the quorum is
// dec itself (stored); an approval short of it has no decision row (no id).
func approvalAnswer(c *agentd.ToolCall, r agentd.ApprovalRule, approvals []agentd.Approval, dec *agentd.Decision, status agentd.CallStatus) *agentd.Decision {
	a := *dec
	a.Status, a.Approvals, a.Quorum = status, approvals, r.Quorum
	return &a
}

// repeatedApproval answers an approval by a key that approved c's current
// card already: nothing changes.
func repeatedApproval(c *agentd.ToolCall, r agentd.ApprovalRule, key string) *agentd.Decision {
	i := slices.IndexFunc(c.Approvals, func(a agentd.Approval) bool { return a.KeyID == key })
	if i < 0 {
		return nil
	}
	a := c.Approvals[i]
	dec := &agentd.Decision{ToolCallID: c.ID, Decision: agentd.DecisionApproved, DecidedBy: a.KeyID, Role: a.Role, Via: a.Via,
		ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: a.At}
	return approvalAnswer(c, r, c.Approvals, dec, agentd.StatusRequiresConfirmation)
}

// planPartial plans an approval by d of call c that does not reach its
// quorum: the approval is recorded on the call (conditional on the stored
// count of approvals seen, so concurrent approvals each count once),
// announced by confirmation_progress and audited, and the call stays
// parked. c.Approvals are those that still count (liveApprovals).
func (e *decider) planPartial(c *agentd.ToolCall, d *checkedDecision, r agentd.ApprovalRule, card, stored int, now time.Time) *plannedDecision {
	mine := agentd.Approval{KeyID: d.by.KeyID, Role: d.by.Role, Via: d.via, At: now.UTC()}
	after := append(slices.Clone(c.Approvals), mine)
	draft := e.event(c.ConversationID, &agentd.ConfirmationProgressPayload{
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, Approvals: len(after), Quorum: r.Quorum,
		ApprovedBy: agentd.ApprovedBy(after, ""),
	})
	draft.Audit = &agentd.AuditEntry{Kind: agentd.AuditApproval, RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name,
		KeyID: d.by.KeyID, Role: d.by.Role, Via: d.via, Decision: agentd.DecisionApproved, Reason: d.req.Reason,
		Tier: c.Tier, Escalated: c.Escalated, ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now.UTC()}
	dec := &agentd.Decision{ToolCallID: c.ID, Decision: agentd.DecisionApproved, Reason: d.req.Reason, DecidedBy: mine.KeyID,
		Role: mine.Role, Via: mine.Via, ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: mine.At}
	return &plannedDecision{call: c,
		u: agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusRequiresConfirmation,
			CardRevision: card, Now: now, Approvals: &agentd.ApprovalsUpdate{Before: stored, After: after}},
		drafts: []agentd.EventDraft{draft},
		answer: approvalAnswer(c, r, after, dec, agentd.StatusRequiresConfirmation),
	}
}

// liveApprovals keeps in c.Approvals only the approvals that still count
// towards its quorum under rule (confirm.LiveApprovals: the key still
// exists, per Options.Keys, and could still decide c), reading c's
// conversation and run for it. Without Options.Keys every approval counts.
func (e *decider) liveApprovals(ctx context.Context, c *agentd.ToolCall, rule agentd.ApprovalRule) error {
	if e.opts.Keys == nil || len(c.Approvals) == 0 {
		return nil
	}
	conv, err := e.store.Conversation(ctx, c.ConversationID)
	if err != nil {
		return err
	}
	requester := ""
	if !rule.RequesterMayApprove {
		run, err := e.store.Run(ctx, c.RunID)
		if err != nil {
			return err
		}
		requester = run.RequestedBy
	}
	c.Approvals = confirm.LiveApprovals(rule, c.Approvals, e.opts.Keys, conv, requester)
	return nil
}
