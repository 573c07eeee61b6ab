package loop

import (
	"context"
	"fmt"

	"github.com/agentd-dev/agentd"
)

// decideBatch is Engine.DecideBatch.
func (e *decider) decideBatch(ctx context.Context, p agentd.Principal, items []agentd.BatchDecisionItem, atomic bool) ([]agentd.BatchDecisionResult, error) {
	if !p.MayDecide() {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	}
	ds := make([]agentd.CallDecision, len(items))
	for i, it := range items {
		ds[i] = agentd.CallDecision{ToolCallID: it.ToolCallID, Request: itemRequest(it)}
	}
	if err := checkBatch(ds); err != nil {
		return nil, err
	}
	if atomic {
		return e.decideAtomic(ctx, p, ds, false)
	}
	out := make([]agentd.BatchDecisionResult, len(items))
	for i, d := range ds {
		dec, err := e.decide(ctx, p, d.ToolCallID, d.Request)
		out[i] = itemResult(d.ToolCallID, dec, err)
	}
	return out, nil
}

// decideAll is Engine.DecideAll.
func (e *decider) decideAll(ctx context.Context, p agentd.Principal, ds []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error) {
	if !p.MayDecide() {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	}
	if err := checkBatch(ds); err != nil {
		return nil, err
	}
	return e.decideAtomic(ctx, p, ds, expiredIsAnswer)
}

// checkBatch bounds a batch: 1..MaxBatchDecisions items, each call named
// once (a second decision of one call in the same batch would be either a
// repeat or a conflict with the first; the client means one of them).
func checkBatch(items []agentd.CallDecision) error {
	if len(items) == 0 {
		return agentd.Errorf(agentd.EINVALID, `"approvals" must list at least one decision`)
	}
	if len(items) > agentd.MaxBatchDecisions {
		return agentd.Errorf(agentd.EINVALID, "a batch holds at most %d decisions, not %d", agentd.MaxBatchDecisions, len(items))
	}
	first := make(map[string]int, len(items))
	for i, it := range items {
		if j, ok := first[it.ToolCallID]; ok {
			return agentd.Errorf(agentd.EINVALID, "approvals[%d] names tool call %q again (first at approvals[%d]); name each call once", i, it.ToolCallID, j)
		}
		first[it.ToolCallID] = i
	}
	return nil
}

// itemRequest is a bulk item as the single route's request.
func itemRequest(it agentd.BatchDecisionItem) agentd.DecisionRequest {
	req := agentd.DecisionRequest{Decision: "deny", Reason: it.Reason, Arguments: it.Arguments,
		ArgumentsSHA256: it.ArgumentsSHA256, CardRevision: it.CardRevision, Via: agentd.ViaBulk, Remember: it.Remember}
	if it.Approve {
		req.Decision = "approve"
	}
	return req
}

// itemResult is the result of an item decided alone.
func itemResult(id string, dec *agentd.Decision, err error) agentd.BatchDecisionResult {
	if err != nil {
		return agentd.BatchDecisionResult{ToolCallID: id, Status: agentd.BatchFailed, Error: agentd.NewItemError(err)}
	}
	return agentd.BatchDecisionResult{ToolCallID: id, Status: agentd.BatchApplied, Decision: dec}
}

// decideAtomic plans every item against the calls as stored and commits
// the plans in one transaction; when another decision wins a race to one
// of the calls, the transaction applies nothing and the batch is planned
// again (the call is then resolved: answerResolved). With expiredIsAnswer an
// expired item is not a failure of the batch.
func (e *decider) decideAtomic(ctx context.Context, p agentd.Principal, items []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error) {
	for range decideRetries {
		out, plans, ok := e.planBatch(ctx, p, items, expiredIsAnswer)
		if !ok {
			return notApplied(out), nil
		}
		updated, err := e.commitPlans(ctx, plans)
		if agentd.ErrorCode(err) == agentd.ECONFLICT {
			continue
		} else if err != nil {
			return nil, err
		}
		for i, pd := range plans {
			e.decided(pd, &updated[i])
		}
		return out, nil
	}
	return nil, agentd.Errorf(agentd.ECONFLICT, "the calls are being decided concurrently; retry")
}

// planBatch plans each item (checkDecision, planDecision). Settled items
// (idempotent repeats) are applied already; the others' plans are
// returned in item order, and each of their results is filled in with the
// decision to be committed. ok is false when an item failed — an edit
// that would be refused counts as a failure, since committing it would
// apply the refusal; an expired item is not, with expiredIsAnswer.
func (e *decider) planBatch(ctx context.Context, p agentd.Principal, items []agentd.CallDecision, expiredIsAnswer bool) (out []agentd.BatchDecisionResult, plans []*plannedDecision, ok bool) {
	out = make([]agentd.BatchDecisionResult, len(items))
	ok = true
	for i, it := range items {
		pd, dec, err := e.planItem(ctx, p, it)
		switch {
		case err != nil && expiredIsAnswer && agentd.ErrorCode(err) == agentd.EEXPIRED:
			out[i] = itemResult(it.ToolCallID, nil, err)
		case err != nil:
			out[i], ok = itemResult(it.ToolCallID, nil, err), false
		case pd == nil:
			out[i] = itemResult(it.ToolCallID, dec, nil)
		case pd.refusal != nil:
			out[i], ok = itemResult(it.ToolCallID, nil, pd.refusal), false
		default:
			out[i] = itemResult(it.ToolCallID, pd.result(), nil)
			plans = append(plans, pd)
		}
	}
	return out, plans, ok
}

// planItem is Decide's checks and plan for one item, without a commit.
func (e *decider) planItem(ctx context.Context, p agentd.Principal, it agentd.CallDecision) (*plannedDecision, *agentd.Decision, error) {
	d, err := checkDecision(p, it.Request)
	if err != nil {
		return nil, nil, err
	}
	c, err := e.callOf(ctx, p, it.ToolCallID, it.Request.ConversationID)
	if err != nil {
		return nil, nil, err
	}
	return e.planDecision(ctx, c, d)
}

// notApplied turns the results of a batch that failed into its answer:
// the failed items keep their errors, every other says it was not applied.
func notApplied(out []agentd.BatchDecisionResult) []agentd.BatchDecisionResult {
	var failed []int
	for i, r := range out {
		if r.Status == agentd.BatchFailed {
			failed = append(failed, i)
		}
	}
	for i, r := range out {
		if r.Status != agentd.BatchFailed {
			out[i] = agentd.BatchDecisionResult{ToolCallID: r.ToolCallID, Status: agentd.BatchNotApplied, Error: &agentd.ItemError{
				Code:    agentd.ENOTAPPLIED,
				Message: fmt.Sprintf("not applied: the batch is atomic and approvals%v failed", failed),
			}}
		}
	}
	return out
}

// commitPlans commits plans in one store transaction under the locks of
// every conversation they touch, and publishes the events.
func (e *decider) commitPlans(ctx context.Context, plans []*plannedDecision) ([]agentd.ToolCall, error) {
	if len(plans) == 0 {
		return nil, nil
	}
	us := make([]agentd.CallUpdate, len(plans))
	var drafts []agentd.EventDraft
	convs := make([]string, 0, len(plans))
	for i, pd := range plans {
		us[i] = pd.u
		drafts = append(drafts, pd.drafts...)
		convs = append(convs, pd.call.ConversationID)
	}
	var updated []agentd.ToolCall
	err := e.commitMany(convs, func() ([]agentd.Event, error) {
		calls, evs, err := e.store.UpdateToolCalls(ctx, us, drafts)
		updated = calls
		return evs, err
	})
	return updated, err
}
