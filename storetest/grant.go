package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// This file is the contract of remembered grants (SPEC §11.2): a grant is
// inserted by the approval that makes it, in the decision's transaction;
// lookups see only live grants of their tenant, project, tool and scope;
// a revocation is one conditional update with its event and audit entry.

// RunGrants tests the GrantStore role and CallUpdate.Grant.
func RunGrants(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"Grant/WithDecision", testGrantWithDecision},
		{"Grant/Lookup", testGrantLookup},
		{"Grant/Revoke", testGrantRevoke},
		{"Grant/List", testGrantList},
	})
}

// newGrant is a grant of conv's call callID on tool "tool", made by key
// at t0, expiring after ttl.
func newGrant(conv *agentd.Conversation, callID, scope, key string, ttl time.Duration) *agentd.Grant {
	return &agentd.Grant{ID: agentd.NewID(agentd.PrefixGrant), TenantID: conv.TenantID, ProjectID: conv.ProjectID, Scope: scope,
		ConversationID: conv.ID, ToolCallID: callID, ToolName: "tool", ServerID: "server", Match: json.RawMessage(`"exact"`),
		ArgumentsSHA256: "digest", CreatedBy: key, CreatorRole: agentd.RoleOperator, CreatorGroups: []string{"finance"},
		CreatedAt: t0, ExpiresAt: t0.Add(ttl)}
}

// approveWith is an approval of call id by key that makes grant g.
func approveWith(id, key string, g *agentd.Grant) agentd.CallUpdate {
	return agentd.CallUpdate{ID: id, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusApproved,
		Decision: &agentd.Decision{Decision: agentd.DecisionApproved, DecidedBy: key, Role: agentd.RoleOperator, Via: agentd.ViaSingle,
			ArgumentsSHA256: "digest"}, Grant: g, Now: t0}
}

// parkedCall stores a parked call of a new run of conv.
func parkedCall(t *testing.T, s agentd.Store, conv *agentd.Conversation) *agentd.ToolCall {
	t.Helper()
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)
	finishRun(t, s, run)
	return c
}

// testGrantWithDecision: the grant commits with the approval and its
// audit entry; an update that fails (the call decided already) writes
// no grant; a grant without an approval, or an invalid one, is EINVALID.
func testGrantWithDecision(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	c := parkedCall(t, s, conv)
	g := newGrant(conv, c.ID, agentd.GrantConversation, "op-1", 8*time.Hour)
	_, evs, err := s.UpdateToolCall(ctx, approveWith(c.ID, "op-1", g), []agentd.EventDraft{draft(conv.ID, "grant_created", `{}`)})
	noErr(t, err, "approval with a grant")
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	got, err := s.Grant(ctx, g.ID)
	noErr(t, err, "Grant")
	if got.Scope != g.Scope || got.ConversationID != conv.ID || got.ToolCallID != c.ID || got.CreatedBy != "op-1" ||
		got.CreatorRole != agentd.RoleOperator || !slices.Equal(got.CreatorGroups, []string{"finance"}) || got.RevokedAt != nil ||
		got.ArgumentsSHA256 != "digest" || got.ToolName != "tool" || got.ServerID != "server" {
		t.Fatalf("stored grant %+v, want %+v", got, g)
	}
	sameJSON(t, "match", got.Match, g.Match)
	sameTime(t, "expires_at", got.ExpiresAt, g.ExpiresAt)
	es := auditAll(t, s, conv.TenantID, conv.ProjectID)
	if !slices.Contains(kinds(es), agentd.AuditGrantCreated) {
		t.Errorf("audit kinds %v: no %s", kinds(es), agentd.AuditGrantCreated)
	}
	// The call is decided: a second approval with a grant conflicts and
	// stores no grant.
	g2 := newGrant(conv, c.ID, agentd.GrantProject, "op-2", time.Hour)
	_, _, err = s.UpdateToolCall(ctx, approveWith(c.ID, "op-2", g2), nil)
	wantCode(t, err, agentd.ECONFLICT)
	if _, err := s.Grant(ctx, g2.ID); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("the grant of a failed update was stored: %v", err)
	}
	c2 := parkedCall(t, s, conv)
	deny := approveWith(c2.ID, "op-1", newGrant(conv, c2.ID, agentd.GrantConversation, "op-1", time.Hour))
	deny.Status, deny.Decision.Decision = agentd.StatusDenied, agentd.DecisionDenied
	_, _, err = s.UpdateToolCall(ctx, deny, nil)
	wantCode(t, err, agentd.EINVALID)
	bad := newGrant(conv, c2.ID, "tenant", "op-1", time.Hour)
	_, _, err = s.UpdateToolCall(ctx, approveWith(c2.ID, "op-1", bad), nil)
	wantCode(t, err, agentd.EINVALID)
	if cur, _ := s.ToolCall(ctx, c2.ID); cur.Status != agentd.StatusRequiresConfirmation {
		t.Fatalf("a refused grant changed the call: %s", cur.Status)
	}
}

// storeGrant makes g by approving a new parked call of conv.
func storeGrant(t *testing.T, s agentd.Store, conv *agentd.Conversation, scope, key string, ttl time.Duration) *agentd.Grant {
	t.Helper()
	c := parkedCall(t, s, conv)
	g := newGrant(conv, c.ID, scope, key, ttl)
	_, _, err := s.UpdateToolCall(context.Background(), approveWith(c.ID, key, g), nil)
	noErr(t, err, "approval with a grant")
	return g
}

// testGrantLookup: ActiveGrants sees the live grants of its tenant,
// project and tool — a conversation grant only in its conversation, a
// project grant in every one — and never an expired or revoked one, nor
// another tenant's or project's.
func testGrantLookup(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv, other := newConversation(t, s), newConversation(t, s)
	convGrant := storeGrant(t, s, conv, agentd.GrantConversation, "op-1", time.Hour)
	projGrant := storeGrant(t, s, conv, agentd.GrantProject, "op-1", time.Hour)
	short := storeGrant(t, s, conv, agentd.GrantProject, "op-1", time.Minute)
	revoked := storeGrant(t, s, conv, agentd.GrantProject, "op-1", time.Hour)
	_, _, err := s.RevokeGrant(ctx, revoked.ID, agentd.Actor{KeyID: "op-1"}, t0, nil)
	noErr(t, err, "RevokeGrant")
	elsewhere := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant-2", ProjectID: "project", Agent: "agent", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, elsewhere), "CreateConversation")
	storeGrant(t, s, elsewhere, agentd.GrantProject, "op-x", time.Hour)
	otherProject := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant", ProjectID: "project-2", Agent: "agent", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, otherProject), "CreateConversation")
	storeGrant(t, s, otherProject, agentd.GrantProject, "op-y", time.Hour)

	lookup := func(conv *agentd.Conversation, tool string, now time.Time) []string {
		t.Helper()
		gs, err := s.ActiveGrants(ctx, agentd.GrantQuery{TenantID: conv.TenantID, ProjectID: conv.ProjectID,
			ConversationID: conv.ID, ToolName: tool, Now: now})
		noErr(t, err, "ActiveGrants")
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	sorted := func(xs ...string) []string { slices.Sort(xs); return xs }
	if got := lookup(conv, "tool", at(time.Second)); !slices.Equal(got, sorted(convGrant.ID, projGrant.ID, short.ID)) {
		t.Errorf("in its conversation: %v, want the conversation, project and short grants", got)
	}
	if got := lookup(other, "tool", at(time.Second)); !slices.Equal(got, sorted(projGrant.ID, short.ID)) {
		t.Errorf("in another conversation: %v, want the project grants only", got)
	}
	if got := lookup(conv, "tool", at(time.Minute)); !slices.Equal(got, sorted(convGrant.ID, projGrant.ID)) {
		t.Errorf("at the short grant's expiry: %v, want it gone", got)
	}
	if got := lookup(conv, "other-tool", at(time.Second)); len(got) != 0 {
		t.Errorf("another tool: %v", got)
	}
	if got := lookup(elsewhere, "tool", at(time.Second)); len(got) != 1 {
		t.Errorf("the other tenant sees %v, want its own one", got)
	}
	if got := lookup(otherProject, "tool", at(time.Second)); len(got) != 1 {
		t.Errorf("the other project sees %v, want its own one", got)
	}
	_, err = s.ActiveGrants(ctx, agentd.GrantQuery{TenantID: "tenant", ProjectID: "project", ToolName: "tool", Now: t0})
	wantCode(t, err, agentd.EINVALID)
}

// testGrantRevoke: a revocation writes its event and audit entry once; a
// second is ECONFLICT with the grant and writes nothing; an unknown id is
// ENOTFOUND.
func testGrantRevoke(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	g := storeGrant(t, s, conv, agentd.GrantConversation, "op-1", time.Hour)
	got, evs, err := s.RevokeGrant(ctx, g.ID, agentd.Actor{KeyID: "admin-1", Role: agentd.RoleAdmin}, at(time.Minute),
		[]agentd.EventDraft{draft(conv.ID, "grant_revoked", `{}`)})
	noErr(t, err, "RevokeGrant")
	if got.RevokedAt == nil || got.RevokedBy != "admin-1" || len(evs) != 1 {
		t.Fatalf("revoked %+v, %d events", got, len(evs))
	}
	sameTime(t, "revoked_at", *got.RevokedAt, at(time.Minute))
	again, evs, err := s.RevokeGrant(ctx, g.ID, agentd.Actor{KeyID: "op-1"}, at(2*time.Minute), []agentd.EventDraft{draft(conv.ID, "grant_revoked", `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	if again == nil || again.RevokedBy != "admin-1" || len(evs) != 0 {
		t.Fatalf("second revoke: %+v, %d events", again, len(evs))
	}
	if n := len(allEvents(t, s, conv.ID)); n != 1 {
		t.Errorf("%d events after two revocations, want 1", n)
	}
	es := auditAll(t, s, conv.TenantID, conv.ProjectID)
	revocations := 0
	for _, e := range es {
		if e.Kind == agentd.AuditGrantRevoked {
			revocations++
			if e.KeyID != "admin-1" || e.ConversationID != conv.ID {
				t.Errorf("revocation entry %+v", e)
			}
		}
	}
	if revocations != 1 {
		t.Errorf("%d revocation entries, want 1", revocations)
	}
	_, _, err = s.RevokeGrant(ctx, agentd.NewID(agentd.PrefixGrant), agentd.Actor{KeyID: "op-1"}, t0, nil)
	wantCode(t, err, agentd.ENOTFOUND)
}

// testGrantList: Grants pages the live grants of a tenant and project in
// ID order; ConversationCreatedBy keeps those of that key's
// conversations; another tenant's are never listed.
func testGrantList(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	mine := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant", ProjectID: "project", Agent: "agent",
		CreatedBy: "client-1", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, mine), "CreateConversation")
	theirs := newConversation(t, s)
	a := storeGrant(t, s, mine, agentd.GrantConversation, "client-1", time.Hour)
	b := storeGrant(t, s, theirs, agentd.GrantProject, "op-1", time.Hour)
	c := storeGrant(t, s, theirs, agentd.GrantProject, "op-1", time.Hour)
	storeGrant(t, s, theirs, agentd.GrantProject, "op-1", time.Second) // expired at the listing
	elsewhere := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant-2", ProjectID: "project", Agent: "agent", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, elsewhere), "CreateConversation")
	storeGrant(t, s, elsewhere, agentd.GrantProject, "op-x", time.Hour)
	list := func(f agentd.GrantFilter) []string {
		t.Helper()
		gs, err := s.Grants(ctx, f, at(time.Minute))
		noErr(t, err, "Grants")
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	all := []string{a.ID, b.ID, c.ID}
	slices.Sort(all)
	if got := list(agentd.GrantFilter{TenantID: "tenant", ProjectID: "project"}); !slices.Equal(got, all) {
		t.Errorf("all: %v, want %v", got, all)
	}
	if got := list(agentd.GrantFilter{TenantID: "tenant", ProjectID: "project", Limit: 2}); !slices.Equal(got, all[:2]) {
		t.Errorf("first page: %v", got)
	}
	if got := list(agentd.GrantFilter{TenantID: "tenant", ProjectID: "project", After: all[1]}); !slices.Equal(got, all[2:]) {
		t.Errorf("after: %v", got)
	}
	if got := list(agentd.GrantFilter{TenantID: "tenant", ProjectID: "project", ConversationCreatedBy: "client-1"}); !slices.Equal(got, []string{a.ID}) {
		t.Errorf("client-1's: %v, want %v", got, a.ID)
	}
	if got := list(agentd.GrantFilter{TenantID: "tenant-2", ProjectID: "project", ConversationCreatedBy: "client-1"}); len(got) != 0 {
		t.Errorf("another tenant's under client-1: %v", got)
	}
	_, err := s.Grants(ctx, agentd.GrantFilter{TenantID: "tenant"}, t0)
	wantCode(t, err, agentd.EINVALID)
}
