package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// This file is the contract of bulk decisions (UpdateToolCalls), the
// filters of the pending list, ParkedCount and the audit log.

// decided returns an approval or a denial of call id by key as CallUpdate.
func decided(id, decision, key, role, via string, now time.Time) agentd.CallUpdate {
	status := agentd.StatusApproved
	if decision == agentd.DecisionDenied {
		status = agentd.StatusDenied
	}
	return agentd.CallUpdate{ID: id, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: status, Now: now,
		Decision: &agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: id, Decision: decision,
			Reason: "because", DecidedBy: key, Role: role, Via: via, ArgumentsSHA256: "digest", CreatedAt: now}}
}

func testUpdateToolCallsApplies(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	a, b := newCall(run, 1, 0, agentd.StatusRequiresConfirmation), newCall(run, 1, 1, agentd.StatusRequiresConfirmation)
	createCalls(t, s, a, b)
	calls, evs, err := s.UpdateToolCalls(ctx, []agentd.CallUpdate{
		decided(a.ID, agentd.DecisionApproved, "k1", agentd.RoleOperator, agentd.ViaBulk, at(time.Minute)),
		decided(b.ID, agentd.DecisionDenied, "k1", agentd.RoleOperator, agentd.ViaBulk, at(time.Minute)),
	}, []agentd.EventDraft{draft(conv.ID, "x", `{"n":1}`), draft(conv.ID, "x", `{"n":2}`)})
	noErr(t, err, "UpdateToolCalls")
	if len(calls) != 2 || calls[0].ID != a.ID || calls[0].Status != agentd.StatusApproved || calls[1].ID != b.ID || calls[1].Status != agentd.StatusDenied {
		t.Fatalf("UpdateToolCalls returned %+v, want a approved and b denied, in order", calls)
	}
	wantSeqs(t, "UpdateToolCalls events", evs, 1, 2)
	got, err := s.ToolCall(ctx, b.ID)
	noErr(t, err, "ToolCall")
	if len(got.Decisions) != 1 || got.Decisions[0].Role != agentd.RoleOperator || got.Decisions[0].Via != agentd.ViaBulk || got.Decisions[0].DecidedBy != "k1" {
		t.Errorf("decision of b = %+v, want k1/operator/bulk", got.Decisions)
	}
}

// One update that does not apply: nothing of the transaction is written,
// neither the other calls' changes, their decisions, their audit entries
// nor the events.
func testUpdateToolCallsAtomic(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	a, b := newCall(run, 1, 0, agentd.StatusRequiresConfirmation), newCall(run, 1, 1, agentd.StatusCompleted)
	createCalls(t, s, a, b)
	before := auditAll(t, s, conv.TenantID, conv.ProjectID)
	_, evs, err := s.UpdateToolCalls(ctx, []agentd.CallUpdate{
		decided(a.ID, agentd.DecisionApproved, "k1", agentd.RoleOperator, agentd.ViaBulk, at(time.Minute)),
		decided(b.ID, agentd.DecisionApproved, "k1", agentd.RoleOperator, agentd.ViaBulk, at(time.Minute)),
	}, []agentd.EventDraft{draft(conv.ID, "x", `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	if len(evs) != 0 {
		t.Errorf("failed UpdateToolCalls returned events %v", evs)
	}
	got, err := s.ToolCall(ctx, a.ID)
	noErr(t, err, "ToolCall")
	if got.Status != agentd.StatusRequiresConfirmation || len(got.Decisions) != 0 {
		t.Errorf("a after a failed batch: %s with %d decisions, want requires_confirmation and none", got.Status, len(got.Decisions))
	}
	if n := len(allEvents(t, s, conv.ID)); n != 0 {
		t.Errorf("a failed batch appended %d events", n)
	}
	if after := auditAll(t, s, conv.TenantID, conv.ProjectID); len(after) != len(before) {
		t.Errorf("a failed batch wrote audit entries: %d → %d", len(before), len(after))
	}
	_, _, err = s.UpdateToolCalls(ctx, []agentd.CallUpdate{
		decided(a.ID, agentd.DecisionApproved, "k1", "", "", at(time.Minute)),
		decided(a.ID, agentd.DecisionDenied, "k1", "", "", at(time.Minute)),
	}, nil)
	wantCode(t, err, agentd.EINVALID)
	_, _, err = s.UpdateToolCalls(ctx, []agentd.CallUpdate{decided(agentd.NewID(agentd.PrefixToolCall), agentd.DecisionApproved, "k", "", "", t0)}, nil)
	wantCode(t, err, agentd.ENOTFOUND)
}

// 20 concurrent transactions naming the same call: exactly one applies.
func testUpdateToolCallsConcurrent(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		other := newCall(run, 2, i, agentd.StatusRequiresConfirmation)
		createCalls(t, s, other)
		wg.Go(func() {
			<-start
			_, _, errs[i] = s.UpdateToolCalls(ctx, []agentd.CallUpdate{
				decided(other.ID, agentd.DecisionApproved, "k", "", "", at(time.Minute)),
				decided(c.ID, agentd.DecisionApproved, fmt.Sprintf("k%d", i), "", "", at(time.Minute)),
			}, nil)
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch agentd.ErrorCode(err) {
		case "":
			ok++
		case agentd.ECONFLICT:
		default:
			t.Errorf("batch %d: %v", i, err)
		}
	}
	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if ok != 1 || len(got.Decisions) != 1 {
		t.Errorf("%d batches applied, the call has %d decisions; want 1 and 1", ok, len(got.Decisions))
	}
	parked, err := s.ParkedCount(ctx)
	noErr(t, err, "ParkedCount")
	if parked != n-1 {
		t.Errorf("ParkedCount = %d, want %d (the losers' other calls)", parked, n-1)
	}
}

func testPendingFilters(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv, conv2 := newConversation(t, s), newConversation(t, s)
	run, run2 := startRun(t, s, conv), startRun(t, s, conv2)
	mk := func(run *agentd.Run, i int, name, server string, deadline time.Duration) *agentd.ToolCall {
		c := newCall(run, 1, i, agentd.StatusRequiresConfirmation)
		c.Name, c.ServerID = name, server
		if deadline > 0 {
			d := at(deadline)
			c.RequiresApprovalAt = &d
		}
		createCalls(t, s, c)
		return c
	}
	pay := mk(run, 0, "pay", "billing", time.Minute)
	refund := mk(run, 1, "refund", "billing", time.Hour)
	mail := mk(run2, 0, "mail", "mailer", 2*time.Minute)
	pay2 := mk(run2, 1, "pay", "billing", 0)
	soon := mk(run2, 2, "mail", "mailer", 30*time.Second) // created last, due first
	list := func(f agentd.PendingFilter) []string {
		t.Helper()
		f.TenantID, f.ProjectID, f.Limit = conv.TenantID, conv.ProjectID, 10
		calls, err := s.PendingToolCalls(ctx, f)
		noErr(t, err, "PendingToolCalls")
		return ids(calls)
	}
	wantIDs(t, "tool_name pay", list(agentd.PendingFilter{ToolName: "pay"}), pay.ID, pay2.ID)
	wantIDs(t, "server_id billing", list(agentd.PendingFilter{ServerID: "billing"}), pay.ID, refund.ID, pay2.ID)
	wantIDs(t, "conversation 2", list(agentd.PendingFilter{ConversationID: conv2.ID}), mail.ID, pay2.ID, soon.ID)
	// By deadline, then id; a call without a deadline never expires, so it
	// is never "before". The cursor is the last call of the page.
	wantIDs(t, "expires before +5m", list(agentd.PendingFilter{ExpiresBefore: at(5 * time.Minute)}), soon.ID, pay.ID, mail.ID)
	wantIDs(t, "expires before +5m after soon", list(agentd.PendingFilter{ExpiresBefore: at(5 * time.Minute), After: soon.ID}), pay.ID, mail.ID)
	wantIDs(t, "expires before +5m after pay", list(agentd.PendingFilter{ExpiresBefore: at(5 * time.Minute), After: pay.ID}), mail.ID)
	wantIDs(t, "expires before exactly +30s", list(agentd.PendingFilter{ExpiresBefore: at(30 * time.Second)}))
	// Bounds past what a time column holds are clamped, not refused.
	wantIDs(t, "expires before year 2999", list(agentd.PendingFilter{ExpiresBefore: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}), soon.ID, pay.ID, mail.ID, refund.ID)
	wantIDs(t, "expires before year 1000", list(agentd.PendingFilter{ExpiresBefore: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)}))
	wantIDs(t, "pay in conversation 2", list(agentd.PendingFilter{ToolName: "pay", ConversationID: conv2.ID}), pay2.ID)
	wantIDs(t, "billing after pay", list(agentd.PendingFilter{ServerID: "billing", After: pay.ID}), refund.ID, pay2.ID)
	wantIDs(t, "unknown tool", list(agentd.PendingFilter{ToolName: "nope"}))
	_, _, err := s.UpdateToolCall(ctx, decided(pay.ID, agentd.DecisionDenied, "k", "", "", at(time.Second)), nil)
	noErr(t, err, "deny pay")
	wantIDs(t, "tool_name pay after deny", list(agentd.PendingFilter{ToolName: "pay"}), pay2.ID)
	n, err := s.ParkedCount(ctx)
	noErr(t, err, "ParkedCount")
	if n != 4 {
		t.Errorf("ParkedCount = %d, want 4", n)
	}
}

// auditAll returns every audit entry of a tenant and project.
func auditAll(t *testing.T, s agentd.Store, tenant, project string) []agentd.AuditEntry {
	t.Helper()
	es, err := s.Audit(context.Background(), agentd.AuditFilter{TenantID: tenant, ProjectID: project})
	noErr(t, err, "Audit")
	return es
}

// kinds returns the kinds of es, in order.
func kinds(es []agentd.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

// Every fact the store audits by itself gets its entry in its own
// transaction: refusals and escalations as calls are stored, decisions,
// expiries and cancellations as they are inserted, a refusal after an
// edit; ids increase; each entry says who, when, which digests.
func testAuditWrittenWithFacts(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	refused := newCall(run, 1, 0, agentd.StatusRefused)
	refused.Tier, refused.Reason, refused.Error = agentd.TierNever, "never", "the policy says never"
	escalated := newCall(run, 1, 1, agentd.StatusRequiresConfirmation)
	escalated.Escalated, escalated.Reason = true, "a hook asked"
	plain := newCall(run, 1, 2, agentd.StatusRequiresConfirmation)
	expiring := newCall(run, 1, 3, agentd.StatusRequiresConfirmation)
	edited := newCall(run, 1, 4, agentd.StatusRequiresConfirmation)
	auto := newCall(run, 1, 5, agentd.StatusApproved)
	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Now: t0,
		Calls: []*agentd.ToolCall{refused, escalated, plain, expiring, edited, auto}}, nil)
	noErr(t, err, "RecordStep")

	u := decided(plain.ID, agentd.DecisionApproved, "key-op", agentd.RoleOperator, agentd.ViaSingle, at(time.Minute))
	_, _, err = s.UpdateToolCall(ctx, u, nil)
	noErr(t, err, "approve")
	_, _, err = s.UpdateToolCall(ctx, agentd.CallUpdate{ID: expiring.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusExpired, Now: at(2 * time.Minute), Decision: &agentd.Decision{Decision: agentd.DecisionExpired,
			DecidedBy: "system", Via: agentd.ViaDeadline, ArgumentsSHA256: "digest"}}, nil)
	noErr(t, err, "expire")
	eu := decided(edited.ID, agentd.DecisionApproved, "key-op", agentd.RoleAdmin, agentd.ViaBulk, at(3*time.Minute))
	eu.Status, eu.Error = agentd.StatusRefused, "escalated to review"
	eu.Decision.EditedArguments, eu.Decision.EditedArgumentsSHA256 = json.RawMessage(`{"x":2}`), "edited-digest"
	eu.Edit = &agentd.CallEdit{Arguments: json.RawMessage(`{"x":2}`), ArgumentsSHA256: "edited-digest", Tier: agentd.TierReview, Escalated: true}
	_, _, err = s.UpdateToolCall(ctx, eu, nil)
	noErr(t, err, "edit that escalates")
	// A transition that does not apply audits nothing.
	_, _, err = s.UpdateToolCall(ctx, decided(plain.ID, agentd.DecisionDenied, "key-op", "", "", at(4*time.Minute)), nil)
	wantCode(t, err, agentd.ECONFLICT)
	_, _, err = s.CancelRun(ctx, run.ID, "cancelled", agentd.Actor{KeyID: "key-c", Role: agentd.RoleClient}, at(5*time.Minute), nil)
	noErr(t, err, "CancelRun")

	es := auditAll(t, s, conv.TenantID, conv.ProjectID)
	want := []string{agentd.AuditRefusal, agentd.AuditEscalation, agentd.AuditDecision, agentd.AuditExpiry,
		agentd.AuditDecision, agentd.AuditRefusal, agentd.AuditCancellation}
	wantIDs(t, "audit kinds", kinds(es), want...)
	for i := 1; i < len(es); i++ {
		if es[i].ID <= es[i-1].ID {
			t.Errorf("audit ids not increasing: %d then %d", es[i-1].ID, es[i].ID)
		}
	}
	if e := es[0]; e.ToolCallID != refused.ID || e.Tier != agentd.TierNever || e.Reason != "the policy says never" ||
		e.ConversationID != conv.ID || e.RunID != run.ID || e.ToolName != "tool" || e.TenantID != conv.TenantID {
		t.Errorf("refusal entry = %+v", e)
	}
	if e := es[1]; e.ToolCallID != escalated.ID || !e.Escalated || e.Reason != "a hook asked" {
		t.Errorf("escalation entry = %+v", e)
	}
	if e := es[2]; e.ToolCallID != plain.ID || e.KeyID != "key-op" || e.Role != agentd.RoleOperator || e.Via != agentd.ViaSingle ||
		e.Decision != agentd.DecisionApproved || e.Reason != "because" || e.ArgumentsSHA256 != "digest" {
		t.Errorf("decision entry = %+v", e)
	} else {
		sameTime(t, "decision entry time", e.CreatedAt, at(time.Minute))
	}
	if e := es[3]; e.ToolCallID != expiring.ID || e.KeyID != "system" || e.Via != agentd.ViaDeadline || e.Decision != agentd.DecisionExpired {
		t.Errorf("expiry entry = %+v", e)
	}
	if e := es[4]; e.ToolCallID != edited.ID || e.EditedArgumentsSHA256 != "edited-digest" || e.ArgumentsSHA256 != "digest" || e.Role != agentd.RoleAdmin {
		t.Errorf("edited decision entry = %+v", e)
	}
	if e := es[5]; e.ToolCallID != edited.ID || e.Reason != "escalated to review" || e.Tier != agentd.TierReview || !e.Escalated {
		t.Errorf("refusal after the edit = %+v", e)
	}
	if e := es[6]; e.ToolCallID != escalated.ID || e.KeyID != "key-c" || e.Role != agentd.RoleClient || e.Via != agentd.ViaCancel ||
		e.Decision != agentd.DecisionCancelled {
		t.Errorf("cancellation entry = %+v", e)
	}
	if others := auditAll(t, s, "other-tenant", conv.ProjectID); len(others) != 0 {
		t.Errorf("another tenant reads %d audit entries", len(others))
	}
}

func testAuditFilters(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv, conv2 := newConversation(t, s), newConversation(t, s)
	run, run2 := startRun(t, s, conv), startRun(t, s, conv2)
	a, b := newCall(run, 1, 0, agentd.StatusRequiresConfirmation), newCall(run2, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, a, b)
	_, _, err := s.UpdateToolCall(ctx, decided(a.ID, agentd.DecisionApproved, "k", agentd.RoleOperator, agentd.ViaSingle, at(time.Minute)), nil)
	noErr(t, err, "approve a")
	_, _, err = s.UpdateToolCall(ctx, decided(b.ID, agentd.DecisionDenied, "k", agentd.RoleOperator, agentd.ViaSingle, at(3*time.Minute)), nil)
	noErr(t, err, "deny b")
	req, err := s.AppendAudit(ctx, agentd.AuditEntry{Kind: agentd.AuditConnectionRequest, TenantID: conv.TenantID, ProjectID: conv.ProjectID,
		KeyID: "key-d", Role: agentd.RoleDelegate, Connection: "billing", Method: "POST", Endpoint: "/invoices/1/pay",
		Outcome: "preview", CreatedAt: at(5 * time.Minute)})
	noErr(t, err, "AppendAudit")
	if req.ID == 0 {
		t.Errorf("AppendAudit returned no id")
	}
	get := func(f agentd.AuditFilter) []agentd.AuditEntry {
		t.Helper()
		f.TenantID, f.ProjectID = conv.TenantID, conv.ProjectID
		es, err := s.Audit(ctx, f)
		noErr(t, err, "Audit")
		return es
	}
	all := get(agentd.AuditFilter{})
	wantIDs(t, "all", kinds(all), agentd.AuditDecision, agentd.AuditDecision, agentd.AuditConnectionRequest)
	if e := all[2]; e.Connection != "billing" || e.Method != "POST" || e.Endpoint != "/invoices/1/pay" || e.Outcome != "preview" || e.KeyID != "key-d" {
		t.Errorf("connection request entry = %+v", e)
	}
	wantIDs(t, "kind", kinds(get(agentd.AuditFilter{Kind: agentd.AuditConnectionRequest})), agentd.AuditConnectionRequest)
	if es := get(agentd.AuditFilter{ToolCallID: b.ID}); len(es) != 1 || es[0].Decision != agentd.DecisionDenied {
		t.Errorf("by tool call: %+v", es)
	}
	if es := get(agentd.AuditFilter{ConversationID: conv.ID}); len(es) != 1 || es[0].ToolCallID != a.ID {
		t.Errorf("by conversation: %+v", es)
	}
	if es := get(agentd.AuditFilter{Since: at(time.Minute), Until: at(3 * time.Minute)}); len(es) != 1 || es[0].ToolCallID != a.ID {
		t.Errorf("since +1m until +3m (exclusive): %+v", es)
	}
	if es := get(agentd.AuditFilter{Since: at(3 * time.Minute)}); len(es) != 2 {
		t.Errorf("since +3m: %d entries, want 2", len(es))
	}
	if es := get(agentd.AuditFilter{Since: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}); len(es) != 3 {
		t.Errorf("from year 1000 to 2999: %d entries, want 3", len(es))
	}
	page := get(agentd.AuditFilter{Limit: 2})
	if len(page) != 2 {
		t.Fatalf("page of 2: %d", len(page))
	}
	if rest := get(agentd.AuditFilter{After: page[1].ID, Limit: 2}); len(rest) != 1 || rest[0].ID != req.ID {
		t.Errorf("page 2 = %+v, want the connection request", rest)
	}
	_, err = s.Audit(ctx, agentd.AuditFilter{TenantID: conv.TenantID, ProjectID: conv.ProjectID, Kind: "nope"})
	wantCode(t, err, agentd.EINVALID)
	_, err = s.Audit(ctx, agentd.AuditFilter{})
	wantCode(t, err, agentd.EINVALID)
	_, err = s.AppendAudit(ctx, agentd.AuditEntry{Kind: "nope", TenantID: "t", ProjectID: "p"})
	wantCode(t, err, agentd.EINVALID)
	_, err = s.AppendAudit(ctx, agentd.AuditEntry{Kind: agentd.AuditConnectionRequest})
	wantCode(t, err, agentd.EINVALID)
}

// An event draft that carries an audit entry (a subagent's refusal, which
// is no stored call) gets it in the transaction that appends the event,
// with the event's conversation and that conversation's tenant and
// project whatever the draft said; a task call's entries include its
// subagent's; a draft that cannot be appended writes no entry.
func testAuditWithEvent(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	task := newCall(run, 1, 0, agentd.StatusExecuting)
	createCalls(t, s, task)
	before := auditAll(t, s, conv.TenantID, conv.ProjectID)
	d := draft(conv.ID, agentd.EventSubagentEvent, `{"n":1}`)
	d.Audit = &agentd.AuditEntry{Kind: agentd.AuditRefusal, TenantID: "forged", ProjectID: "forged", ConversationID: "conv_forged",
		RunID: run.ID, ToolCallID: "call_inner", ToolName: "pay", KeyID: "system", Reason: "needs a person", Tier: agentd.TierConfirm,
		ArgumentsSHA256: "digest", Subagent: "researcher", TaskToolCallID: task.ID, CreatedAt: at(time.Minute)}
	bad := draft("conv_missing", agentd.EventSubagentEvent, `{"n":2}`)
	bad.Audit = d.Audit
	_, err := s.AppendEvents(ctx, []agentd.EventDraft{bad})
	wantCode(t, err, agentd.ENOTFOUND)
	_, err = s.AppendEvents(ctx, []agentd.EventDraft{d, draft(conv.ID, agentd.EventTextDelta, `{}`)})
	noErr(t, err, "AppendEvents")
	es := auditAll(t, s, conv.TenantID, conv.ProjectID)
	if len(es) != len(before)+1 {
		t.Fatalf("%d audit entries after one audited event, want %d", len(es), len(before)+1)
	}
	e := es[len(es)-1]
	if e.Kind != agentd.AuditRefusal || e.ConversationID != conv.ID || e.TenantID != conv.TenantID || e.ProjectID != conv.ProjectID ||
		e.ToolCallID != "call_inner" || e.Subagent != "researcher" || e.TaskToolCallID != task.ID || e.Tier != agentd.TierConfirm ||
		e.Reason != "needs a person" || e.ArgumentsSHA256 != "digest" || e.KeyID != "system" {
		t.Errorf("entry = %+v", e)
	}
	sameTime(t, "entry time", e.CreatedAt, at(time.Minute))
	byTask, err := s.Audit(ctx, agentd.AuditFilter{TenantID: conv.TenantID, ProjectID: conv.ProjectID, ToolCallID: task.ID})
	noErr(t, err, "Audit by task call")
	if len(byTask) != 1 || byTask[0].ID != e.ID {
		t.Errorf("the task call's entries: %+v, want its subagent's refusal", byTask)
	}
	if forged := auditAll(t, s, "forged", "forged"); len(forged) != 0 {
		t.Errorf("the draft's own tenant was used: %+v", forged)
	}
}
