package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// The tenant and project conditions of the reads an operator makes, each
// checked where a filter names an object of another tenant or project
// (issue 17): naming a conversation, a call or an endpoint never reaches
// past the caller's tenant and project. Each case runs in its role's
// suite (roles.go): RunToolCalls, RunAudit, RunWebhookOutbox.

// testPendingByConversationScoped: the pending list filtered by
// conversation_id (alone, or with a tool name, a server id or a deadline,
// each read from another index) is empty for another tenant or project
// naming the conversation.
func testPendingByConversationScoped(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversationIn(t, s, "t1", "p1")
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	due := at(time.Minute)
	c.RequiresApprovalAt = &due
	createCalls(t, s, c)
	for _, f := range []agentd.PendingFilter{
		{ConversationID: conv.ID},
		{ConversationID: conv.ID, ToolName: c.Name},
		{ConversationID: conv.ID, ServerID: c.ServerID},
		{ConversationID: conv.ID, ExpiresBefore: at(time.Hour)},
	} {
		for _, tp := range [][2]string{{"t1", "p1"}, {"t2", "p1"}, {"t1", "p2"}} {
			f.TenantID, f.ProjectID, f.Limit = tp[0], tp[1], 10
			calls, err := s.PendingToolCalls(ctx, f)
			noErr(t, err, "PendingToolCalls")
			if tp == [2]string{"t1", "p1"} {
				wantIDs(t, fmt.Sprintf("own %+v", f), ids(calls), c.ID)
			} else {
				wantIDs(t, fmt.Sprintf("%s/%s naming the conversation %+v", tp[0], tp[1], f), ids(calls))
			}
		}
	}
}

// testAuditOtherProject: the audit log of another project of the same
// tenant is empty, also filtered by the conversation or the call.
func testAuditOtherProject(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversationIn(t, s, "t1", "p1")
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)
	_, _, err := s.UpdateToolCall(ctx, decided(c.ID, agentd.DecisionApproved, "k", agentd.RoleOperator, agentd.ViaSingle, at(time.Minute)), nil)
	noErr(t, err, "approve")
	_, err = s.AppendAudit(ctx, agentd.AuditEntry{Kind: agentd.AuditConnectionRequest, TenantID: "t1", ProjectID: "p1",
		KeyID: "key-d", Role: agentd.RoleDelegate, Connection: "billing", Method: "POST", Endpoint: "/x", Outcome: "preview", CreatedAt: at(2 * time.Minute)})
	noErr(t, err, "AppendAudit")
	if es := auditAll(t, s, "t1", "p1"); len(es) != 2 {
		t.Fatalf("own project: %d entries, want 2", len(es))
	}
	for _, f := range []agentd.AuditFilter{{}, {ConversationID: conv.ID}, {ToolCallID: c.ID}, {Kind: agentd.AuditDecision}} {
		for _, tp := range [][2]string{{"t1", "p2"}, {"t2", "p1"}} {
			f.TenantID, f.ProjectID = tp[0], tp[1]
			es, err := s.Audit(ctx, f)
			noErr(t, err, "Audit")
			if len(es) != 0 {
				t.Errorf("%s/%s reads %d audit entries of t1/p1 with %+v", tp[0], tp[1], len(es), f)
			}
		}
	}
}

// testWebhookQueueDepthByTenant: the depth of a tenant's project counts its
// own pending deliveries only, on an endpoint that carries every tenant's.
func testWebhookQueueDepthByTenant(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	pos := webhookFixture(t, s, 6)
	var ds []agentd.WebhookDelivery
	for i, tp := range [][2]string{{"t", "p"}, {"t", "p"}, {"t", "p"}, {"t", "q"}, {"u", "p"}, {"u", "p"}} {
		ds = append(ds, delivery("all", pos[i], tp[0], tp[1], "e", at(0)))
	}
	ds = append(ds, delivery("t-only", pos[0], "t", "p", "e", at(0)))
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[5], ds), "Enqueue")
	// A delivered one is no backlog.
	got, err := s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: "t-only", Now: at(time.Second), Owner: "me", LeaseUntil: at(time.Minute), Limit: 1})
	noErr(t, err, "Claim")
	noErr(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: got[0].ID, Owner: "me",
		Attempt: agentd.WebhookAttempt{At: at(time.Second), StatusCode: 204}, Status: agentd.DeliverySucceeded}), "Record success")
	for _, c := range []struct {
		tenant, project, want string
	}{
		{"", "", "map[all:6]"},
		{"t", "p", "map[all:3]"},
		{"t", "q", "map[all:1]"},
		{"u", "p", "map[all:2]"},
		{"v", "p", "map[]"},
	} {
		depth, err := s.WebhookQueueDepth(ctx, c.tenant, c.project)
		noErr(t, err, "WebhookQueueDepth")
		if fmt.Sprint(depth) != c.want {
			t.Errorf("WebhookQueueDepth(%q, %q) = %v, want %s", c.tenant, c.project, depth, c.want)
		}
	}
	for _, tp := range [][2]string{{"t", ""}, {"", "p"}} {
		_, err := s.WebhookQueueDepth(ctx, tp[0], tp[1])
		wantCode(t, err, agentd.EINVALID)
	}
}
