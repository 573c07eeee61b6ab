package loop

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// TestGrantApplies: a grant answers a call only when every check of SPEC
// §11.2 holds; each row breaks one check, so each fails when its check is
// removed from grantApplies.
func TestGrantApplies(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	base := func() (*agentd.Grant, *agentd.ToolCall) {
		g := &agentd.Grant{ID: "grant_1", TenantID: "t1", ProjectID: "p1", Scope: agentd.GrantConversation, ConversationID: "conv_a",
			ToolName: "refund", ServerID: "go", Match: json.RawMessage(`"exact"`), ArgumentsSHA256: "d1", CreatedBy: "op1",
			CreatorRole: agentd.RoleOperator, CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}
		c := &agentd.ToolCall{ID: "call_1", TenantID: "t1", ProjectID: "p1", ConversationID: "conv_a", Name: "refund", ServerID: "go",
			Arguments: json.RawMessage(`{"amount":5}`), ArgumentsSHA256: "d1", Tier: agentd.TierConfirm, Method: "TOOL", Endpoint: "refund"}
		g.Method, g.Endpoint = c.Method, c.Endpoint
		return g, c
	}
	if g, c := base(); !grantApplies(g, c, now) {
		t.Fatal("the base grant does not apply")
	}
	revokedAt := now.Add(-time.Minute)
	for name, change := range map[string]func(g *agentd.Grant, c *agentd.ToolCall){
		"another tenant":               func(g *agentd.Grant, c *agentd.ToolCall) { c.TenantID = "t2" },
		"another project":              func(g *agentd.Grant, c *agentd.ToolCall) { c.ProjectID = "p2" },
		"expired":                      func(g *agentd.Grant, c *agentd.ToolCall) { g.ExpiresAt = now },
		"revoked":                      func(g *agentd.Grant, c *agentd.ToolCall) { g.RevokedAt = &revokedAt },
		"conversation scope elsewhere": func(g *agentd.Grant, c *agentd.ToolCall) { c.ConversationID = "conv_b" },
		"unknown scope":                func(g *agentd.Grant, c *agentd.ToolCall) { g.Scope = "tenant" },
		"another tool":                 func(g *agentd.Grant, c *agentd.ToolCall) { c.Name = "pay" },
		"another server":               func(g *agentd.Grant, c *agentd.ToolCall) { c.ServerID = "mcp" },
		"other arguments (exact)":      func(g *agentd.Grant, c *agentd.ToolCall) { c.ArgumentsSHA256 = "d2" },
		"another endpoint":             func(g *agentd.Grant, c *agentd.ToolCall) { c.Endpoint = "/other" },
		"above max": func(g *agentd.Grant, c *agentd.ToolCall) {
			g.Match, c.ArgumentsSHA256 = json.RawMessage(`{"amount":{"max":4}}`), "d2"
		},
		"a path the arguments lack": func(g *agentd.Grant, c *agentd.ToolCall) {
			g.Match, c.ArgumentsSHA256 = json.RawMessage(`{"currency":{"equals":"EUR"}}`), "d2"
		},
		"connection constraints read the grouped arguments": func(g *agentd.Grant, c *agentd.ToolCall) {
			g.Connection, c.ConnectionName = "billing", "billing"
			g.Match, c.Params = json.RawMessage(`{"body.amount":{"max":100}}`), json.RawMessage(`{"body":{"amount":500}}`)
		},
	} {
		g, c := base()
		change(g, c)
		if grantApplies(g, c, now) {
			t.Errorf("%s: the grant applies", name)
		}
	}
	// And the positive sides of the same checks.
	for name, change := range map[string]func(g *agentd.Grant, c *agentd.ToolCall){
		"project scope elsewhere": func(g *agentd.Grant, c *agentd.ToolCall) { g.Scope, c.ConversationID = agentd.GrantProject, "conv_b" },
		"any":                     func(g *agentd.Grant, c *agentd.ToolCall) { g.Match, c.ArgumentsSHA256 = json.RawMessage(`"any"`), "d2" },
		"within max": func(g *agentd.Grant, c *agentd.ToolCall) {
			g.Match, c.ArgumentsSHA256 = json.RawMessage(`{"amount":{"max":5}}`), "d2"
		},
		"connection within max": func(g *agentd.Grant, c *agentd.ToolCall) {
			g.Connection, c.ConnectionName = "billing", "billing"
			g.Match, c.Params = json.RawMessage(`{"body.amount":{"max":100}}`), json.RawMessage(`{"body":{"amount":50}}`)
			c.ArgumentsSHA256 = "d2"
		},
	} {
		g, c := base()
		change(g, c)
		if !grantApplies(g, c, now) {
			t.Errorf("%s: the grant does not apply", name)
		}
	}
}

// TestCreatorMayDecide: a grant applies only where its creator could
// decide the call itself: it reaches the conversation and the call's rule
// (agentd.MayDecideCall) covers it and, with requester_may_approve false,
// it did not start the run.
func TestCreatorMayDecide(t *testing.T) {
	conv := &agentd.Conversation{ID: "conv_a", TenantID: "t1", ProjectID: "p1", CreatedBy: "owner"}
	grant := func(key, role string, groups ...string) *agentd.Grant {
		return &agentd.Grant{TenantID: "t1", ProjectID: "p1", CreatedBy: key, CreatorRole: role, CreatorGroups: groups}
	}
	call := func(r *agentd.ApprovalRule) *agentd.ToolCall {
		return &agentd.ToolCall{ConversationID: conv.ID, Approval: r}
	}
	def := agentd.DefaultApprovalRule()
	ops := &agentd.ApprovalRule{Approvers: []string{"operator"}, RequesterMayApprove: true, Quorum: 1}
	fin := &agentd.ApprovalRule{Approvers: []string{"group:finance"}, RequesterMayApprove: true, Quorum: 1}
	noReq := &agentd.ApprovalRule{Approvers: []string{"owner", "operator"}, RequesterMayApprove: false, Quorum: 1}
	for _, c := range []struct {
		name      string
		g         *agentd.Grant
		c         *agentd.ToolCall
		requester string
		want      bool
	}{
		{"the owner in its conversation", grant("owner", agentd.RoleClient), call(&def), "", true},
		{"another client's conversation", grant("other", agentd.RoleClient), call(&def), "", false},
		{"an operator anywhere in its project", grant("op1", agentd.RoleOperator), call(&def), "", true},
		{"an operator of another project", &agentd.Grant{TenantID: "t1", ProjectID: "p2", CreatedBy: "op1", CreatorRole: agentd.RoleOperator}, call(&def), "", false},
		{"the owner where only operators decide", grant("owner", agentd.RoleClient), call(ops), "", false},
		{"an operator outside group:finance", grant("op1", agentd.RoleOperator), call(fin), "", false},
		{"an operator in group:finance", grant("op1", agentd.RoleOperator, "finance"), call(fin), "", true},
		{"the requester where it may not approve", grant("op1", agentd.RoleOperator), call(noReq), "op1", false},
		{"not the requester", grant("op1", agentd.RoleOperator), call(noReq), "owner", true},
		{"a delegate", grant("bot", agentd.RoleDelegate), call(&def), "", false},
	} {
		if got := creatorMayDecide(c.g, c.c, conv, c.requester); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
