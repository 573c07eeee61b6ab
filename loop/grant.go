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

// This file applies remembered grants (SPEC §11.2): the grant an approval
// makes (planGrant, committed with the decision), the grant that answers a
// later call's card at classification (grantFor), and the grants' list
// and revocation.

// planGrant checks an approval's remember against call c and rule, and
// returns the grant it makes (d.req.Remember set). Errors:
// EREMEMBERNOTALLOWED (the card does not offer remember), EINVALID (a
// deny, edited arguments, a bad scope, ttl or match, naming the field),
// EGRANTTTLEXCEEDSMAX (a ttl above the rule's grant_max_ttl).
func planGrant(c *agentd.ToolCall, d *checkedDecision, rule agentd.ApprovalRule, now time.Time) (*agentd.Grant, error) {
	rem := d.req.Remember
	switch {
	case d.want != agentd.StatusApproved:
		return nil, agentd.Errorf(agentd.EINVALID, "remember: only an approval may be remembered")
	case !rule.AllowRemember || rule.Quorum != 1 || !slices.Contains(c.AllowedDecisions, agentd.AllowedRemember):
		return nil, agentd.Errorf(agentd.EREMEMBERNOTALLOWED, "remember: this call's approval rule does not allow remembered grants (allow_remember)")
	case len(d.req.Arguments) > 0:
		return nil, agentd.Errorf(agentd.EINVALID, "remember: an approval with edited arguments cannot be remembered")
	}
	ttl, err := rem.CheckScope()
	if err != nil {
		return nil, err
	}
	limit := rule.GrantMaxTTLOf()
	switch {
	case ttl == 0:
		ttl = min(agentd.DefaultGrantTTL, limit)
	case ttl > limit:
		return nil, agentd.Errorf(agentd.EGRANTTTLEXCEEDSMAX, "remember.ttl: %s is above this call's grant_max_ttl %s", rem.TTL, limit)
	}
	m, err := confirm.ParseGrantMatch(rem.Match)
	if err != nil {
		return nil, err
	}
	match := rem.Match
	if m.Kind == agentd.GrantMatchExact { // also when match is absent
		match = json.RawMessage(`"` + agentd.GrantMatchExact + `"`)
	}
	return &agentd.Grant{
		ID: agentd.NewID(agentd.PrefixGrant), TenantID: c.TenantID, ProjectID: c.ProjectID, Scope: rem.Scope,
		ConversationID: c.ConversationID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID,
		Connection: c.ConnectionName, Method: c.Method, Endpoint: cmp.Or(c.PathTemplate, c.Endpoint),
		Match: match, ArgumentsSHA256: c.ArgumentsSHA256,
		CreatedBy: d.by.KeyID, CreatorRole: d.p.Role, CreatorGroups: d.p.Groups,
		CreatedAt: now.UTC(), ExpiresAt: now.Add(ttl).UTC(),
	}, nil
}

// grantCreated is the event of a grant made on call c.
func (e *decider) grantCreated(g *agentd.Grant) agentd.EventDraft {
	return e.event(g.ConversationID, &agentd.GrantCreatedPayload{GrantID: g.ID, Scope: g.Scope, ToolName: g.ToolName,
		ExpiresAt: g.ExpiresAt, ToolCallID: g.ToolCallID, CreatedBy: g.CreatedBy})
}

// grantApplies reports whether grant g answers the card of call c (of
// base tier confirm, classified now) — every check of SPEC §11.2 but the
// creator's right to decide, which grantFor adds: the same tenant and
// project, live (not revoked, not expired), in scope (a conversation
// grant: the same conversation), the same tool (and, for a connection,
// the same connection, method and endpoint template), and the arguments
// matching (a connection call's grouped arguments for constraints).
func grantApplies(g *agentd.Grant, c *agentd.ToolCall, now time.Time) bool {
	switch {
	case g.TenantID != c.TenantID || g.ProjectID != c.ProjectID:
		return false
	case !g.ActiveAt(now):
		return false
	case g.Scope == agentd.GrantConversation && g.ConversationID != c.ConversationID:
		return false
	case g.Scope != agentd.GrantConversation && g.Scope != agentd.GrantProject:
		return false
	case g.ToolName != c.Name || g.ServerID != c.ServerID:
		return false
	case g.Connection != c.ConnectionName || g.Method != c.Method || g.Endpoint != cmp.Or(c.PathTemplate, c.Endpoint):
		return false
	}
	m, err := confirm.ParseGrantMatch(g.Match)
	if err != nil {
		return false
	}
	doc := c.Arguments
	if c.ConnectionName != "" {
		doc = c.Params
	}
	return m.Matches(g.ArgumentsSHA256, c.ArgumentsSHA256, doc)
}

// grantFor returns the grant that lets call c (being classified in run,
// of tier confirm, with its rule as configured now in c.Approval) run
// without a card, or nil: never when a hook asked, and only a grant that
// applies (grantApplies) where confirm.GrantAnswers holds for c's rule
// and the grant's creator as it is now (decider.creator) — the rule still
// allows remembering with a quorum of 1, and the creator could decide c
// itself. A store error is logged and means no grant (the call gets its
// card).
func (e *decider) grantFor(ctx context.Context, run *agentd.Run, c *agentd.ToolCall, hookAsked bool, now time.Time) *agentd.GrantRef {
	if hookAsked || c.Tier != agentd.TierConfirm || c.Approval == nil {
		return nil
	}
	gs, err := e.store.ActiveGrants(ctx, agentd.GrantQuery{TenantID: c.TenantID, ProjectID: c.ProjectID,
		ConversationID: c.ConversationID, ToolName: c.Name, Now: now})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error().Err(err).Str("tool_call_id", c.ID).Msg("grant lookup")
		}
		return nil
	}
	var conv *agentd.Conversation
	for i := range gs {
		g := &gs[i]
		if !grantApplies(g, c, now) {
			continue
		}
		if conv == nil {
			if conv, err = e.store.Conversation(ctx, c.ConversationID); err != nil {
				if ctx.Err() == nil {
					e.log.Error().Err(err).Str("tool_call_id", c.ID).Msg("grant lookup: read conversation")
				}
				return nil
			}
		}
		if p, ok := e.creator(g); ok && confirm.GrantAnswers(c.ApprovalOf(), p, conv, run.RequestedBy) {
			return &agentd.GrantRef{GrantID: g.ID, KeyID: g.CreatedBy}
		}
	}
	return nil
}

// creator is the principal grant g acts for: its creator's key as
// configured now (Options.Keys; false when the key no longer exists or
// moved to another tenant or project), or, without Options.Keys, the
// creator as it was when it approved.
func (e *decider) creator(g *agentd.Grant) (agentd.Principal, bool) {
	if e.opts.Keys == nil {
		return g.Creator(), true
	}
	p, ok := e.opts.Keys(g.CreatedBy)
	return p, ok && p.TenantID == g.TenantID && p.ProjectID == g.ProjectID
}

// grantUse is the audit entry of call c run under its grant.
func grantUse(c *agentd.ToolCall, now time.Time) *agentd.AuditEntry {
	return &agentd.AuditEntry{Kind: agentd.AuditGrantUse, RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name,
		KeyID: c.GrantedBy.KeyID, Tier: c.Tier, ArgumentsSHA256: c.ArgumentsSHA256,
		Reason: "grant " + c.GrantedBy.GrantID, CreatedAt: now.UTC()}
}

// grants is Engine.Grants.
func (e *decider) grants(ctx context.Context, p agentd.Principal, cursor string, limit int) ([]agentd.Grant, string, error) {
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 100 {
		return nil, "", agentd.Errorf(agentd.EINVALID, "limit must be between 1 and 100")
	}
	if cursor != "" {
		if err := agentd.CheckID(agentd.PrefixGrant, "cursor", cursor); err != nil {
			return nil, "", agentd.Errorf(agentd.EINVALID, "cursor must be the next_cursor of a previous page")
		}
	}
	f := agentd.GrantFilter{TenantID: p.TenantID, ProjectID: p.ProjectID, After: cursor, Limit: limit + 1}
	if !p.SeesAll() {
		f.ConversationCreatedBy = cmp.Or(p.KeyID, "-")
	}
	gs, err := e.store.Grants(ctx, f, e.clock.Now())
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(gs) > limit {
		gs, next = gs[:limit], gs[limit-1].ID
	}
	if gs == nil {
		gs = []agentd.Grant{}
	}
	return gs, next, nil
}

// revokeGrant is Engine.RevokeGrant.
func (e *decider) revokeGrant(ctx context.Context, p agentd.Principal, id string) (*agentd.Grant, error) {
	if err := agentd.CheckID(agentd.PrefixGrant, "grant id", id); err != nil {
		return nil, err
	}
	g, err := e.store.Grant(ctx, id)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		return nil, notFound("grant")
	} else if err != nil {
		return nil, err
	}
	if _, err := e.reach(ctx, p, g.ConversationID, "grant"); err != nil || g.TenantID != p.TenantID || g.ProjectID != p.ProjectID {
		if err == nil {
			err = notFound("grant")
		}
		return nil, err
	}
	if !p.SeesAll() && (p.KeyID == "" || p.KeyID != g.CreatedBy) {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "only the grant's creator (%s), an operator or an admin may revoke it", g.CreatedBy)
	}
	if g.RevokedAt != nil {
		return g, nil
	}
	by := agentd.Actor{KeyID: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Role: p.Role}
	var revoked *agentd.Grant
	err = e.commit(g.ConversationID, func() ([]agentd.Event, error) {
		cur, evs, err := e.store.RevokeGrant(ctx, id, by, e.clock.Now(), []agentd.EventDraft{e.event(g.ConversationID,
			&agentd.GrantRevokedPayload{GrantID: g.ID, Scope: g.Scope, ToolName: g.ToolName, ExpiresAt: g.ExpiresAt, RevokedBy: by.KeyID})})
		revoked = cur
		return evs, err
	})
	if agentd.ErrorCode(err) == agentd.ECONFLICT && revoked != nil {
		return revoked, nil // revoked concurrently
	} else if err != nil {
		return nil, err
	}
	e.log.Info().Str("grant_id", g.ID).Str("conversation_id", g.ConversationID).Str("key_id", by.KeyID).Msg("grant revoked")
	return revoked, nil
}
