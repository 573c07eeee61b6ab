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

// TestGrantDefaultTTL: a grant whose approval names no ttl lives
// min(agentd.DefaultGrantTTL, grant_max_ttl) — never past the rule's
// grant_max_ttl; a ttl up to grant_max_ttl is kept, one past it refused.
func TestGrantDefaultTTL(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := &agentd.ToolCall{ID: "call_1", TenantID: "t1", ProjectID: "p1", ConversationID: "conv_a", Name: "refund",
		ArgumentsSHA256: "d1", AllowedDecisions: []string{"approve", "deny", agentd.AllowedRemember}}
	plan := func(maxTTL, ttl string) (*agentd.Grant, error) {
		rule := agentd.ApprovalRule{Approvers: []string{"owner"}, RequesterMayApprove: true, Quorum: 1, AllowRemember: true, GrantMaxTTL: maxTTL}
		d := &checkedDecision{req: agentd.DecisionRequest{Decision: "approve", Remember: &agentd.Remember{Scope: agentd.GrantConversation, TTL: ttl}},
			want: agentd.StatusApproved, by: agentd.Actor{KeyID: "owner"}}
		return planGrant(c, d, rule, now)
	}
	for _, tc := range []struct {
		maxTTL, ttl string
		want        time.Duration
	}{
		{"", "", agentd.DefaultGrantTTL},
		{"24h", "", agentd.DefaultGrantTTL},
		{"8h", "", 8 * time.Hour},
		{"8h1s", "", agentd.DefaultGrantTTL},
		{"7h59m", "", 7*time.Hour + 59*time.Minute},
		{"2h", "", 2 * time.Hour},
		{"2h", "2h", 2 * time.Hour},
		{"2h", "1h", time.Hour},
		{"", "24h", agentd.DefaultGrantMaxTTL},
	} {
		g, err := plan(tc.maxTTL, tc.ttl)
		if err != nil || !g.ExpiresAt.Equal(now.Add(tc.want)) {
			t.Errorf("grant_max_ttl %q, ttl %q: %+v, %v; want it to expire after %s", tc.maxTTL, tc.ttl, g, err, tc.want)
		}
	}
	for maxTTL, ttl := range map[string]string{"2h": "2h1s", "": "24h1s"} {
		if _, err := plan(maxTTL, ttl); agentd.ErrorCode(err) != agentd.EGRANTTTLEXCEEDSMAX {
			t.Errorf("grant_max_ttl %q, ttl %q: %v, want %s", maxTTL, ttl, err, agentd.EGRANTTTLEXCEEDSMAX)
		}
	}
}
