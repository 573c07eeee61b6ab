package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// This file is the contract of the audit log's order across the kinds of
// entries: a store may keep the entries of decisions, expiries and
// cancellations apart from the others (the SQLite store reads them from
// the decisions rows, docs/audit.md), but Audit lists one log, in commit
// order, paged by one cursor.

// Every kind of entry, written in turns: ids increase in commit order
// across all of them, the cursor pages through the same list at any page
// size and under any filter, and a call decided twice (approved, re-parked
// with another tier, denied) has two decision entries, each with the tier
// the call had when it was decided.
func testAuditInterleaved(t *testing.T, s agentd.Store) {
	conv, run, c := interleavedLog(t, s)
	all := auditAll(t, s, conv.TenantID, conv.ProjectID)
	wantIDs(t, "kinds in commit order", kinds(all),
		agentd.AuditRefusal, agentd.AuditEscalation, agentd.AuditApproval, agentd.AuditDecision, agentd.AuditConnectionRequest,
		agentd.AuditDecision, agentd.AuditGrantCreated, agentd.AuditDecision, agentd.AuditEscalation, agentd.AuditDecision,
		agentd.AuditExpiry, agentd.AuditToolEval, agentd.AuditCancellation, agentd.AuditCancellation, agentd.AuditCancellation,
		agentd.AuditConnectionRequest)
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Fatalf("ids not increasing: %d (%s) then %d (%s)", all[i-1].ID, all[i-1].Kind, all[i].ID, all[i].Kind)
		}
	}
	twice, escalated, c1, c2 := c["twice"], c["escalated"], c["c1"], c["c2"]
	if e := all[7]; e.ToolCallID != twice.ID || e.Tier != agentd.TierConfirm || e.Escalated || e.Via != agentd.ViaBulk ||
		e.Decision != agentd.DecisionApproved || e.ArgumentsSHA256 != "digest" || e.ConversationID != conv.ID || e.RunID != run.ID {
		t.Errorf("first decision of the call decided twice = %+v", e)
	}
	if e := all[9]; e.ToolCallID != twice.ID || e.Tier != agentd.TierReview || !e.Escalated || e.KeyID != "key-admin" ||
		e.Role != agentd.RoleAdmin || e.Via != agentd.ViaProtocol || e.Decision != agentd.DecisionDenied || e.ArgumentsSHA256 != "digest-2" {
		t.Errorf("second decision of the call decided twice = %+v", e)
	} else {
		sameTime(t, "second decision time", e.CreatedAt, at(7*time.Minute))
	}
	if cs := all[12:15]; cs[0].ToolCallID != escalated.ID || cs[1].ToolCallID != c1.ID || cs[2].ToolCallID != c2.ID ||
		cs[0].KeyID != "key-c" || cs[0].Role != agentd.RoleClient || cs[0].Reason != "stop" || !cs[0].Escalated {
		t.Errorf("cancellations = %+v", cs)
	}
	checkAuditPages(t, s, conv, c, all)
	if others := auditAll(t, s, "other-tenant", conv.ProjectID); len(others) != 0 {
		t.Errorf("another tenant reads %d entries", len(others))
	}
}

// interleavedLog writes testAuditInterleaved's facts in one conversation
// and returns it, its run and its calls by name.
func interleavedLog(t *testing.T, s agentd.Store) (*agentd.Conversation, *agentd.Run, map[string]*agentd.ToolCall) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	refused := newCall(run, 1, 0, agentd.StatusRefused)
	refused.Tier, refused.Error = agentd.TierNever, "never"
	escalated := newCall(run, 1, 1, agentd.StatusRequiresConfirmation)
	escalated.Escalated, escalated.Reason = true, "a hook asked"
	quorum, granted, expiring := newCall(run, 1, 2, agentd.StatusRequiresConfirmation), newCall(run, 1, 3, agentd.StatusRequiresConfirmation),
		newCall(run, 1, 4, agentd.StatusRequiresConfirmation)
	twice, c1, c2 := newCall(run, 1, 5, agentd.StatusRequiresConfirmation), newCall(run, 1, 6, agentd.StatusRequiresConfirmation),
		newCall(run, 1, 7, agentd.StatusRequiresConfirmation)
	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Now: t0,
		Calls: []*agentd.ToolCall{refused, escalated, quorum, granted, expiring, twice, c1, c2}}, nil)
	noErr(t, err, "RecordStep")
	must := func(what string, err error) {
		t.Helper()
		noErr(t, err, what)
	}
	update := func(what string, u agentd.CallUpdate) {
		t.Helper()
		_, _, err := s.UpdateToolCall(ctx, u, nil)
		noErr(t, err, what)
	}
	appendAudit := func(kind string, d time.Duration) {
		t.Helper()
		_, err := s.AppendAudit(ctx, agentd.AuditEntry{Kind: kind, TenantID: conv.TenantID, ProjectID: conv.ProjectID, KeyID: "key-d",
			Connection: "billing", Outcome: "preview", CreatedAt: at(d)})
		noErr(t, err, "AppendAudit "+kind)
	}

	// One approval of a quorum of two (an entry carried by its event), then
	// the approval that reaches it.
	partial := draft(conv.ID, agentd.EventConfirmationProgress, `{}`)
	partial.Audit = &agentd.AuditEntry{Kind: agentd.AuditApproval, RunID: run.ID, ToolCallID: quorum.ID, ToolName: "tool", KeyID: "key-1",
		Via: agentd.ViaSingle, Decision: agentd.DecisionApproved, Tier: agentd.TierConfirm, ArgumentsSHA256: "digest", CreatedAt: at(time.Minute)}
	_, err = s.AppendEvents(ctx, []agentd.EventDraft{partial})
	must("AppendEvents with the partial approval", err)
	update("approve the quorum", decided(quorum.ID, agentd.DecisionApproved, "key-2", agentd.RoleOperator, agentd.ViaSingle, at(2*time.Minute)))
	appendAudit(agentd.AuditConnectionRequest, 3*time.Minute)
	g := decided(granted.ID, agentd.DecisionApproved, "key-op", agentd.RoleOperator, agentd.ViaSingle, at(4*time.Minute))
	g.Grant = newGrant(conv, granted.ID, agentd.GrantConversation, "key-op", time.Hour)
	update("approve with a grant", g)
	update("approve twice", decided(twice.ID, agentd.DecisionApproved, "key-op", agentd.RoleOperator, agentd.ViaBulk, at(5*time.Minute)))
	update("repark", agentd.CallUpdate{ID: twice.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusRequiresConfirmation,
		Repark: &agentd.CallRepark{Arguments: json.RawMessage(`{"x":2}`), ArgumentsSHA256: "digest-2", Tier: agentd.TierReview,
			Reason: "changed", Escalated: true, RequiresApprovalAt: at(time.Hour), Method: "TOOL", Endpoint: "tool"},
		Now: at(6 * time.Minute)})
	second := decided(twice.ID, agentd.DecisionDenied, "key-admin", agentd.RoleAdmin, agentd.ViaProtocol, at(7*time.Minute))
	second.Decision.ArgumentsSHA256 = "digest-2"
	update("deny twice", second)
	update("expire", agentd.CallUpdate{ID: expiring.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusExpired, Now: at(8 * time.Minute), Decision: &agentd.Decision{Decision: agentd.DecisionExpired,
			DecidedBy: "system", Via: agentd.ViaDeadline, ArgumentsSHA256: "digest", CreatedAt: at(8 * time.Minute)}})
	appendAudit(agentd.AuditToolEval, 9*time.Minute)
	_, _, err = s.CancelRun(ctx, run.ID, "stop", agentd.Actor{KeyID: "key-c", Role: agentd.RoleClient}, at(10*time.Minute), nil)
	must("CancelRun", err)
	appendAudit(agentd.AuditConnectionRequest, 11*time.Minute)
	return conv, run, map[string]*agentd.ToolCall{"twice": twice, "escalated": escalated, "c1": c1, "c2": c2}
}

// checkAuditPages reads all (the whole log of conv's tenant and project)
// under each filter, whole and paged by 1, 2 and 3.
func checkAuditPages(t *testing.T, s agentd.Store, conv *agentd.Conversation, c map[string]*agentd.ToolCall, all []agentd.AuditEntry) {
	ctx := context.Background()
	twice, escalated := c["twice"], c["escalated"]
	f := agentd.AuditFilter{TenantID: conv.TenantID, ProjectID: conv.ProjectID}
	ids := func(es []agentd.AuditEntry) []int64 {
		out := make([]int64, len(es))
		for i, e := range es {
			out[i] = e.ID
		}
		return out
	}
	byFilter := func(keep func(agentd.AuditEntry) bool) []int64 {
		var out []int64
		for _, e := range all {
			if keep(e) {
				out = append(out, e.ID)
			}
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    agentd.AuditFilter
		want []int64
	}{
		{"all", f, ids(all)},
		{"kind decision", withKind(f, agentd.AuditDecision), byFilter(func(e agentd.AuditEntry) bool { return e.Kind == agentd.AuditDecision })},
		{"kind escalation", withKind(f, agentd.AuditEscalation), byFilter(func(e agentd.AuditEntry) bool { return e.Kind == agentd.AuditEscalation })},
		{"kind cancellation", withKind(f, agentd.AuditCancellation), ids(all[12:15])},
		{"conversation", withConversation(f, conv.ID), byFilter(func(e agentd.AuditEntry) bool { return e.ConversationID == conv.ID })},
		{"tool call", withCall(f, twice.ID), ids([]agentd.AuditEntry{all[7], all[8], all[9]})},
		{"tool call and kind", withKind(withCall(f, escalated.ID), agentd.AuditCancellation), ids(all[12:13])},
		{"since, until", withTimes(f, at(4*time.Minute), at(9*time.Minute)), byFilter(func(e agentd.AuditEntry) bool {
			return !e.CreatedAt.Before(at(4*time.Minute)) && e.CreatedAt.Before(at(9*time.Minute))
		})},
	} {
		got, err := s.Audit(ctx, c.f)
		noErr(t, err, "Audit "+c.name)
		if !slices.Equal(ids(got), c.want) {
			t.Errorf("%s: ids %v, want %v", c.name, ids(got), c.want)
		}
		for _, limit := range []int{1, 2, 3} {
			var paged []int64
			pf := c.f
			pf.Limit = limit
			for range len(all) + 1 {
				page, err := s.Audit(ctx, pf)
				noErr(t, err, "Audit page")
				if len(page) > limit {
					t.Fatalf("%s: a page of %d holds %d", c.name, limit, len(page))
				}
				if len(page) == 0 {
					break
				}
				paged = append(paged, ids(page)...)
				pf.After = page[len(page)-1].ID
			}
			if !slices.Equal(paged, c.want) {
				t.Errorf("%s paged by %d: ids %v, want %v", c.name, limit, paged, c.want)
			}
		}
	}
}

func withKind(f agentd.AuditFilter, kind string) agentd.AuditFilter { f.Kind = kind; return f }
func withCall(f agentd.AuditFilter, id string) agentd.AuditFilter   { f.ToolCallID = id; return f }
func withConversation(f agentd.AuditFilter, id string) agentd.AuditFilter {
	f.ConversationID = id
	return f
}
func withTimes(f agentd.AuditFilter, since, until time.Time) agentd.AuditFilter {
	f.Since, f.Until = since, until
	return f
}
