package agentd

import (
	"encoding/json"
	"fmt"
	"time"
)

// Remembered grants (SPEC §11.2): an approval that says "allow this again"
// creates a Grant in the decision's commit; a later call in the grant's
// scope, of base tier confirm, whose arguments match, then runs without a
// card — only where the grant's creator could decide it.

// Grant scopes.
const (
	GrantConversation = "conversation"
	GrantProject      = "project"
)

// Grant matches (Grant.Match as written, besides an object of constraints).
const (
	GrantMatchExact = "exact"
	GrantMatchAny   = "any"
)

// PrefixGrant prefixes grant ids.
const PrefixGrant = "grant"

// Grant is a remembered approval (SPEC §11.2).
type Grant struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenant_id"`
	ProjectID string `json:"project_id"`
	// Scope is GrantConversation or GrantProject.
	Scope string `json:"scope"`
	// ConversationID is the conversation the grant was made in (a
	// conversation grant applies only there; a project grant's events
	// still go to its stream); ToolCallID the call it was made on.
	ConversationID string `json:"conversation_id"`
	ToolCallID     string `json:"tool_call_id"`
	ToolName       string `json:"tool_name"`
	ServerID       string `json:"server_id"`
	// Connection, Method and Endpoint (the path template) are a
	// connection call's; match "any" covers only that method and template.
	Connection string `json:"connection,omitempty"`
	Method     string `json:"method,omitempty"`
	Endpoint   string `json:"endpoint,omitempty"`
	// Match is "exact", "any" or an object of constraints, as written
	// (package confirm's ParseGrantMatch reads it); ArgumentsSHA256 is the
	// digest "exact" compares with.
	Match           json.RawMessage `json:"match"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	// CreatedBy is the creator's key id; CreatorRole and CreatorGroups its
	// role and groups when it approved, for agentd.MayDecideCall on a
	// later call.
	CreatedBy     string     `json:"created_by"`
	CreatorRole   string     `json:"creator_role,omitempty"`
	CreatorGroups []string   `json:"-"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     time.Time  `json:"expires_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedBy     string     `json:"revoked_by,omitempty"`
}

// Creator is the principal the grant acts for: its creator as it was when
// it approved.
func (g *Grant) Creator() Principal {
	return Principal{TenantID: g.TenantID, ProjectID: g.ProjectID, Role: g.CreatorRole, KeyID: g.CreatedBy, Groups: g.CreatorGroups}
}

// ActiveAt reports whether g may apply at now: not revoked, not expired.
func (g *Grant) ActiveAt(now time.Time) bool {
	return g.RevokedAt == nil && now.Before(g.ExpiresAt)
}

// Remember is an approval's "remember" (SPEC §11.2), as decoded by the
// API (strictly) before the engine checks it against the call.
type Remember struct {
	Scope string          `json:"scope"`
	TTL   string          `json:"ttl,omitempty"`
	Match json.RawMessage `json:"match,omitempty"`
}

// CheckScope validates r's scope and ttl and returns the ttl (0 when
// empty: the default, DefaultGrantTTL bounded by the rule's
// grant_max_ttl). Errors name the field: EINVALID.
func (r *Remember) CheckScope() (time.Duration, error) {
	if r.Scope != GrantConversation && r.Scope != GrantProject {
		return 0, Errorf(EINVALID, `remember.scope: must be "conversation" or "project", got %q`, r.Scope)
	}
	if r.TTL == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(r.TTL)
	if err != nil || d <= 0 {
		return 0, Errorf(EINVALID, `remember.ttl: must be a positive Go duration such as "8h", got %q`, r.TTL)
	}
	return d, nil
}

// GrantRef is tool_call_started.granted_by: the grant a call ran under
// and its creator.
type GrantRef struct {
	GrantID string `json:"grant_id"`
	KeyID   string `json:"key_id"`
}

// GrantFilter selects grants for GrantStore.Grants.
type GrantFilter struct {
	TenantID, ProjectID string
	// ConversationCreatedBy, when set, keeps only grants made in
	// conversations that key created (what a client key may list).
	ConversationCreatedBy string
	// After is the cursor: only grants with a greater ID.
	After string
	// Limit bounds the result (1..1000; other values mean 1000).
	Limit int
}

// GrantQuery selects the grants that may apply to a call
// (GrantStore.ActiveGrants).
type GrantQuery struct {
	TenantID, ProjectID, ConversationID, ToolName string
	Now                                           time.Time
}

// CheckGrant validates a grant before it is stored: EINVALID naming the
// field.
func CheckGrant(g *Grant) error {
	switch {
	case g.ID == "":
		return Errorf(EINVALID, "a grant needs its id")
	case g.TenantID == "" || g.ProjectID == "":
		return Errorf(EINVALID, "grant %s: needs its tenant and project", g.ID)
	case g.Scope != GrantConversation && g.Scope != GrantProject:
		return Errorf(EINVALID, "grant %s: unknown scope %q", g.ID, g.Scope)
	case g.ConversationID == "" || g.ToolName == "" || g.CreatedBy == "":
		return Errorf(EINVALID, "grant %s: needs its conversation, tool name and creator", g.ID)
	case !json.Valid(g.Match):
		return Errorf(EINVALID, "grant %s: match is not JSON", g.ID)
	case !g.ExpiresAt.After(g.CreatedAt):
		return Errorf(EINVALID, "grant %s: expires_at must be after created_at", g.ID)
	}
	return nil
}

// GrantAudit is the audit entry of grant g, of kind (AuditGrantCreated,
// AuditGrantRevoked), by `by` at at; its reason names the grant.
func GrantAudit(kind string, g *Grant, by Actor, at time.Time) *AuditEntry {
	return &AuditEntry{Kind: kind, TenantID: g.TenantID, ProjectID: g.ProjectID, ConversationID: g.ConversationID,
		ToolCallID: g.ToolCallID, ToolName: g.ToolName, KeyID: by.KeyID, Role: by.Role,
		ArgumentsSHA256: g.ArgumentsSHA256, Reason: GrantReason(g), CreatedAt: at}
}

// GrantReason is the reason of a grant's audit entries: "grant <id>
// (<scope>, until <expires_at>)".
func GrantReason(g *Grant) string {
	return fmt.Sprintf("grant %s (%s, until %s)", g.ID, g.Scope, g.ExpiresAt.UTC().Format(time.RFC3339))
}

// AllowedRemember is the entry of a card's allowed_decisions that says an
// approval may carry remember.
const AllowedRemember = "remember"
