package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
)

// GrantStore is the store's remembered grants (agentd.GrantStore, SPEC
// §11.2): inserted by the approval that makes them (CallUpdate.Grant, in
// ToolCallStore.apply).
type GrantStore struct{ b Backend }

const grantColumns = `id, tenant_id, project_id, scope, conversation_id, tool_call_id, tool_name, server_id,
	connection, method, endpoint, match, arguments_sha256, created_by, creator_role, creator_groups,
	created_at, expires_at, revoked_at, revoked_by`

const insertGrantQuery = `INSERT INTO grants (` + grantColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, '')`

const activeGrantsQuery = `SELECT ` + grantColumns + ` FROM grants
	WHERE tenant_id = ? AND project_id = ? AND tool_name = ? AND scope = 'project' AND expires_at > ? AND revoked_at IS NULL
	UNION ALL SELECT ` + grantColumns + ` FROM grants
	WHERE tenant_id = ? AND project_id = ? AND tool_name = ? AND scope = 'conversation' AND conversation_id = ?
	AND expires_at > ? AND revoked_at IS NULL`

// insertGrant writes g, made by the approval of by, and its audit entry
// inside tx.
func (s *GrantStore) insert(ctx context.Context, tx Tx, g *agentd.Grant, by agentd.Actor) error {
	if err := agentd.CheckGrant(g); err != nil {
		return err
	}
	created, err := EncTime("grant created_at", g.CreatedAt)
	if err != nil {
		return err
	}
	expires, err := EncTime("grant expires_at", g.ExpiresAt)
	if err != nil {
		return err
	}
	groups, _ := json.Marshal(g.CreatorGroups)
	if _, err := tx.Exec(ctx, insertGrantQuery, g.ID, g.TenantID, g.ProjectID, g.Scope, g.ConversationID, g.ToolCallID,
		g.ToolName, g.ServerID, g.Connection, g.Method, g.Endpoint, string(g.Match), g.ArgumentsSHA256, g.CreatedBy,
		g.CreatorRole, string(groups), created, expires); err != nil {
		return InsertErr(s.b.Err, err, "grant", g.ID)
	}
	return tx.Audit(ctx, agentd.GrantAudit(agentd.AuditGrantCreated, g, by, g.CreatedAt))
}

// Grant implements agentd.GrantStore.Grant.
func (s *GrantStore) Grant(ctx context.Context, id string) (*agentd.Grant, error) {
	var g *agentd.Grant
	err := s.b.Read(ctx, func(tx Q) (err error) {
		g, err = getGrant(ctx, tx, id)
		return err
	})
	return g, err
}

func getGrant(ctx context.Context, q Q, id string) (*agentd.Grant, error) {
	g, err := scanGrant(q.QueryRow(ctx, `SELECT `+grantColumns+` FROM grants WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "grant %q not found", id)
	}
	return g, err
}

// Grants implements agentd.GrantStore.Grants. A limit outside 1..1000
// means 1000.
func (s *GrantStore) Grants(ctx context.Context, f agentd.GrantFilter, now time.Time) ([]agentd.Grant, error) {
	if f.TenantID == "" || f.ProjectID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "grants are listed per tenant and project")
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	at, err := EncTime("now", now)
	if err != nil {
		return nil, err
	}
	q := `SELECT ` + grantColumns + ` FROM grants WHERE tenant_id = ? AND project_id = ? AND id > ?
		AND revoked_at IS NULL AND expires_at > ?`
	args := []any{f.TenantID, f.ProjectID, f.After, at}
	if f.ConversationCreatedBy != "" {
		q += ` AND conversation_id IN (SELECT id FROM conversations WHERE tenant_id = ? AND project_id = ? AND created_by = ?)`
		args = append(args, f.TenantID, f.ProjectID, f.ConversationCreatedBy)
	}
	var out []agentd.Grant
	err = s.b.Read(ctx, func(tx Q) (err error) {
		out, err = queryGrants(ctx, tx, q+` ORDER BY id LIMIT ?`, append(args, limit)...)
		return err
	})
	return out, err
}

// ActiveGrants implements agentd.GrantStore.ActiveGrants.
func (s *GrantStore) ActiveGrants(ctx context.Context, q agentd.GrantQuery) ([]agentd.Grant, error) {
	if q.TenantID == "" || q.ProjectID == "" || q.ToolName == "" || q.ConversationID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "a grant lookup needs its tenant, project, conversation and tool")
	}
	at, err := EncTime("now", q.Now)
	if err != nil {
		return nil, err
	}
	var out []agentd.Grant
	err = s.b.Read(ctx, func(tx Q) (err error) {
		out, err = queryGrants(ctx, tx, activeGrantsQuery, q.TenantID, q.ProjectID, q.ToolName, at,
			q.TenantID, q.ProjectID, q.ToolName, q.ConversationID, at)
		return err
	})
	// In ID order, sorted here: an ORDER BY over the two ranges makes
	// the planner walk every grant of the project in id order instead.
	slices.SortFunc(out, func(a, b agentd.Grant) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// RevokeGrant implements agentd.GrantStore.RevokeGrant.
func (s *GrantStore) RevokeGrant(ctx context.Context, id string, by agentd.Actor, now time.Time, events []agentd.EventDraft) (*agentd.Grant, []agentd.Event, error) {
	if err := checkEvents(events); err != nil {
		return nil, nil, err
	}
	at, err := EncTime("now", now)
	if err != nil {
		return nil, nil, err
	}
	var g *agentd.Grant
	out, err := writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		g = nil
		res, err := tx.Exec(ctx, `UPDATE grants SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL`, at, by.KeyID, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if g, err = getGrant(ctx, tx, id); err != nil {
			return err
		}
		if n == 0 {
			return agentd.Errorf(agentd.ECONFLICT, "grant %q was revoked already", id)
		}
		return tx.Audit(ctx, agentd.GrantAudit(agentd.AuditGrantRevoked, g, by, now.UTC()))
	})
	if err != nil {
		if agentd.ErrorCode(err) == agentd.ECONFLICT && g != nil {
			return g, nil, err
		}
		return nil, nil, err
	}
	return g, out, nil
}

func queryGrants(ctx context.Context, q Q, query string, args ...any) ([]agentd.Grant, error) {
	return queryAll(ctx, q, scanGrant, query, args...)
}

func scanGrant(s scanner) (*agentd.Grant, error) {
	var g agentd.Grant
	var match, groups string
	var created, expires, revoked sql.NullInt64
	if err := s.Scan(&g.ID, &g.TenantID, &g.ProjectID, &g.Scope, &g.ConversationID, &g.ToolCallID, &g.ToolName, &g.ServerID,
		&g.Connection, &g.Method, &g.Endpoint, &match, &g.ArgumentsSHA256, &g.CreatedBy, &g.CreatorRole, &groups,
		&created, &expires, &revoked, &g.RevokedBy); err != nil {
		return nil, err
	}
	g.Match = json.RawMessage(match)
	if err := json.Unmarshal([]byte(groups), &g.CreatorGroups); err != nil {
		return nil, err
	}
	g.CreatedAt, g.ExpiresAt = decTime(created), decTime(expires)
	if revoked.Valid {
		t := decTime(revoked)
		g.RevokedAt = &t
	}
	return &g, nil
}
