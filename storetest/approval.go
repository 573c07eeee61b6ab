package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// This file is the contract of approval rules (SPEC §11.1): a call keeps
// the rule it was parked with, a run the key that started it, and the
// approvals of a quorum are recorded one conditional update at a time.

// partial is an approval by key of call id that does not reach the
// quorum: the call stays requires_confirmation with approvals before+1.
func partial(id string, card int, before []agentd.Approval, key string, now time.Time) agentd.CallUpdate {
	after := append(slices.Clone(before), agentd.Approval{KeyID: key, Role: agentd.RoleOperator, Via: agentd.ViaSingle, At: now})
	return agentd.CallUpdate{ID: id, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusRequiresConfirmation,
		CardRevision: card, Now: now, Approvals: &agentd.ApprovalsUpdate{Before: len(before), After: after}}
}

func testRunRequestedBy(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := &agentd.Run{
		ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: conv.TenantID, ProjectID: conv.ProjectID,
		CorrelationID: "corr", Status: agentd.RunRunning, RequestedBy: "key-alice", CreatedAt: t0, UpdatedAt: t0,
	}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "hi", CreatedAt: t0}
	_, err := s.StartRun(ctx, run, msg, nil)
	noErr(t, err, "StartRun")
	got, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.RequestedBy != "key-alice" {
		t.Errorf("RequestedBy = %q, want key-alice", got.RequestedBy)
	}
}

// testToolCallApprovalRule: the rule round-trips; a call without one
// reads back without one; approvals are recorded only while their count
// is what the update saw (a lost race is ECONFLICT and writes nothing,
// neither the approvals nor the events); a partial approval writes no
// audit entry of its own (an escalated call is not audited again); a
// re-park clears the approvals and keeps the rule.
func testToolCallApprovalRule(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	rule := &agentd.ApprovalRule{Approvers: []string{"operator", "group:finance"}, RequesterMayApprove: false, Quorum: 2}
	c, plain := newCall(run, 1, 0, agentd.StatusRequiresConfirmation), newCall(run, 1, 1, agentd.StatusRequiresConfirmation)
	c.Approval, c.Escalated = rule, true
	createCalls(t, s, c, plain)
	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if got.Approval == nil || !slices.Equal(got.Approval.Approvers, rule.Approvers) || got.Approval.RequesterMayApprove || got.Approval.Quorum != 2 || len(got.Approvals) != 0 {
		t.Fatalf("stored rule = %+v, approvals %+v; want %+v and none", got.Approval, got.Approvals, rule)
	}
	if p, _ := s.ToolCall(ctx, plain.ID); p.Approval != nil {
		t.Fatalf("a call without a rule reads back with %+v", p.Approval)
	}
	audits := len(auditAll(t, s, conv.TenantID, conv.ProjectID))

	first, evs, err := s.UpdateToolCall(ctx, partial(c.ID, 1, nil, "op-1", at(time.Minute)), []agentd.EventDraft{draft(conv.ID, "x", `{"n":1}`)})
	noErr(t, err, "first approval")
	if first.Status != agentd.StatusRequiresConfirmation || len(first.Approvals) != 1 || first.Approvals[0].KeyID != "op-1" || len(evs) != 1 {
		t.Fatalf("after the first approval: %s, approvals %+v, %d events", first.Status, first.Approvals, len(evs))
	}
	sameTime(t, "approval at", first.Approvals[0].At, at(time.Minute))
	// A second approval planned on the call before the first: it lost.
	if _, _, err := s.UpdateToolCall(ctx, partial(c.ID, 1, nil, "op-2", at(2*time.Minute)), []agentd.EventDraft{draft(conv.ID, "x", `{"n":2}`)}); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Fatalf("an approval planned on a stale count: %v, want conflict", err)
	}
	if n := len(allEvents(t, s, conv.ID)); n != 1 {
		t.Errorf("the lost approval appended its event: %d events, want 1", n)
	}
	if now := len(auditAll(t, s, conv.TenantID, conv.ProjectID)); now != audits {
		t.Errorf("partial approvals wrote %d audit entries of the store's own, want 0 (the loop's event carries it)", now-audits)
	}
	// A call without a rule records no approvals.
	if _, _, err := s.UpdateToolCall(ctx, partial(plain.ID, 1, nil, "op-1", at(time.Minute)), nil); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Errorf("approvals on a call without a rule: %v, want conflict", err)
	}

	// The approval that reaches the quorum is a decision, planned on the
	// approvals it saw.
	u := approval(c.ID, "op-2", at(3*time.Minute))
	u.Status, u.CardRevision, u.Approvals = agentd.StatusApproved, 1, &agentd.ApprovalsUpdate{Before: 1, After: first.Approvals}
	done, _, err := s.UpdateToolCall(ctx, u, nil)
	noErr(t, err, "quorum")
	if done.Status != agentd.StatusApproved || len(done.Approvals) != 1 || len(done.Decisions) != 1 {
		t.Fatalf("after the quorum: %s, approvals %+v, decisions %d", done.Status, done.Approvals, len(done.Decisions))
	}
	rp := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusRequiresConfirmation,
		Repark: &agentd.CallRepark{Arguments: json.RawMessage(`{"x":2}`), ArgumentsSHA256: "digest-2", Tier: agentd.TierConfirm,
			AllowedDecisions: []string{"approve", "deny"}, RequiresApprovalAt: at(time.Hour), Method: "TOOL", Endpoint: "tool"},
		Now: at(4 * time.Minute)}
	re, _, err := s.UpdateToolCall(ctx, rp, nil)
	noErr(t, err, "repark")
	if len(re.Approvals) != 0 || re.Approval == nil || re.Approval.Quorum != 2 {
		t.Errorf("after a re-park: approvals %+v, rule %+v; want none and the rule", re.Approvals, re.Approval)
	}
	// A re-park with a rule gives the new card that rule.
	u = approval(c.ID, "op-1", at(5*time.Minute))
	u.Status, u.CardRevision = agentd.StatusApproved, 2
	_, _, err = s.UpdateToolCall(ctx, u, nil)
	noErr(t, err, "approve card 2")
	rp.Repark.Approval, rp.Now = &agentd.ApprovalRule{Approvers: []string{"admin"}, RequesterMayApprove: true, Quorum: 1}, at(6*time.Minute)
	re, _, err = s.UpdateToolCall(ctx, rp, nil)
	noErr(t, err, "repark with a rule")
	if re.Approval == nil || !slices.Equal(re.Approval.Approvers, []string{"admin"}) || re.Approval.Quorum != 1 || len(re.Approvals) != 0 {
		t.Errorf("after a re-park with a rule: %+v, approvals %+v", re.Approval, re.Approvals)
	}
}

// testToolCallGovernance (SPEC §11.3): a reminder and an extension are
// recorded only while the call's deadline and reminder count are what
// the update saw (else ECONFLICT, nothing written); an extension moves
// the deadline and the total; a reminder keeps the total it is given.
func testToolCallGovernance(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run := startRun(t, s, newConversation(t, s))
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	deadline := at(10 * time.Minute)
	c.RequiresApprovalAt, c.Approval = &deadline, &agentd.ApprovalRule{Approvers: []string{"operator"}, Quorum: 1, Reminders: []string{"1m"}, MaxExtension: "1h"}
	createCalls(t, s, c)
	gov := func(g agentd.GovernanceUpdate) error {
		_, _, err := s.UpdateToolCall(ctx, agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
			Status: agentd.StatusRequiresConfirmation, Governance: &g}, nil)
		return err
	}
	sent := []agentd.Reminder{{Deadline: deadline, Before: "1m"}}
	noErr(t, gov(agentd.GovernanceUpdate{Deadline: deadline, Reminded: sent}), "a reminder")
	wantCode(t, gov(agentd.GovernanceUpdate{Deadline: deadline, Reminded: append(sent, sent[0])}), agentd.ECONFLICT) // a stale count
	later := deadline.Add(30 * time.Minute)
	wantCode(t, gov(agentd.GovernanceUpdate{Deadline: at(time.Minute), RemindedBefore: 1, NewDeadline: later, Extended: 30 * time.Minute}), agentd.ECONFLICT)
	noErr(t, gov(agentd.GovernanceUpdate{Deadline: deadline, RemindedBefore: 1, NewDeadline: later, Extended: 30 * time.Minute}), "an extension")
	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if !got.RequiresApprovalAt.Equal(later) || got.Extended != 30*time.Minute || len(got.Reminded) != 0 || got.Approval.MaxExtension != "1h" ||
		!slices.Equal(got.Approval.Reminders, []string{"1m"}) {
		t.Fatalf("after the extension: deadline %v, extended %v, reminded %v, rule %+v", got.RequiresApprovalAt, got.Extended, got.Reminded, got.Approval)
	}
	noErr(t, gov(agentd.GovernanceUpdate{Deadline: later, Reminded: []agentd.Reminder{{Deadline: later, Before: "1m"}}, Extended: got.Extended}), "a reminder of the new deadline")
	if got, _ = s.ToolCall(ctx, c.ID); len(got.Reminded) != 1 || !got.Reminded[0].Deadline.Equal(later) || got.Extended != 30*time.Minute {
		t.Fatalf("after the second reminder: %+v, extended %v", got.Reminded, got.Extended)
	}
}
