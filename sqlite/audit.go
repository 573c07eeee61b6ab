package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/agentd-dev/agentd"
)

// The audit log (agentd.Store's doc): entries of decisions, refusals and
// escalations are written here, inside the transaction of the change they
// record; AppendAudit adds the rest.

const auditColumns = `id, kind, tenant_id, project_id, conversation_id, run_id, tool_call_id, tool_name,
	key_id, role, via, decision, reason, tier, escalated, arguments_sha256, edited_arguments_sha256,
	connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at`

var insertAuditQuery = prepared(`INSERT INTO audit (kind, tenant_id, project_id, conversation_id, run_id,
	tool_call_id, tool_name, key_id, role, via, decision, reason, tier, escalated, arguments_sha256,
	edited_arguments_sha256, connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)

// insertAudit writes e inside tx (a write transaction) and returns its id.
func (db *DB) insertAudit(ctx context.Context, tx *sql.Tx, e *agentd.AuditEntry) (int64, error) {
	at, err := encTime("audit time", e.CreatedAt)
	if err != nil {
		return 0, err
	}
	res, err := db.w(tx).ExecContext(ctx, insertAuditQuery,
		e.Kind, e.TenantID, e.ProjectID, e.ConversationID, e.RunID, e.ToolCallID, e.ToolName, e.KeyID, e.Role,
		e.Via, e.Decision, e.Reason, e.Tier, e.Escalated, e.ArgumentsSHA256, e.EditedArgumentsSHA256,
		e.Connection, e.Method, e.Endpoint, e.Outcome, e.Subagent, e.TaskToolCallID, at)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// callEntry is an entry about call c, of kind, at c's UpdatedAt.
func callEntry(kind string, c *agentd.ToolCall) *agentd.AuditEntry {
	return &agentd.AuditEntry{Kind: kind, TenantID: c.TenantID, ProjectID: c.ProjectID, ConversationID: c.ConversationID,
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, Tier: c.Tier, Escalated: c.Escalated,
		ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: c.UpdatedAt}
}

// auditDecision records decision d on call c.
func (db *DB) auditDecision(ctx context.Context, tx *sql.Tx, c *agentd.ToolCall, d *agentd.Decision) error {
	kind := agentd.AuditDecision
	switch d.Decision {
	case agentd.DecisionExpired:
		kind = agentd.AuditExpiry
	case agentd.DecisionCancelled:
		kind = agentd.AuditCancellation
	}
	e := callEntry(kind, c)
	e.KeyID, e.Role, e.Via, e.Decision, e.Reason = d.DecidedBy, d.Role, d.Via, d.Decision, d.Reason
	e.ArgumentsSHA256, e.EditedArgumentsSHA256, e.CreatedAt = d.ArgumentsSHA256, d.EditedArgumentsSHA256, d.CreatedAt
	_, err := db.insertAudit(ctx, tx, e)
	return err
}

// auditDraft records the entry an appended event draft carries (a
// subagent's refusal), in the event's conversation, tenant and project.
func (db *DB) auditDraft(ctx context.Context, tx *sql.Tx, d agentd.EventDraft, tenant, project string) error {
	if d.Audit == nil {
		return nil
	}
	e := *d.Audit
	e.TenantID, e.ProjectID, e.ConversationID = tenant, project, d.ConversationID
	if !slices.Contains(agentd.AuditKinds, e.Kind) {
		return agentd.Errorf(agentd.EINVALID, "unknown audit kind %q", e.Kind)
	}
	_, err := db.insertAudit(ctx, tx, &e)
	return err
}

// auditCall records that call c, as now stored, was refused or parked
// escalated; any other state records nothing.
func (db *DB) auditCall(ctx context.Context, tx *sql.Tx, c *agentd.ToolCall) error {
	var e *agentd.AuditEntry
	switch {
	case c.Status == agentd.StatusRefused:
		e = callEntry(agentd.AuditRefusal, c)
		e.Reason = c.Error
		if e.Reason == "" {
			e.Reason = c.Reason
		}
	case c.Status == agentd.StatusRequiresConfirmation && c.Escalated:
		e = callEntry(agentd.AuditEscalation, c)
		e.Reason = c.Reason
	default:
		return nil
	}
	e.KeyID = "system"
	_, err := db.insertAudit(ctx, tx, e)
	return err
}

// AppendAudit implements agentd.Store.AppendAudit.
func (db *DB) AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error) {
	if !slices.Contains(agentd.AuditKinds, e.Kind) {
		return e, agentd.Errorf(agentd.EINVALID, "unknown audit kind %q", e.Kind)
	} else if e.TenantID == "" || e.ProjectID == "" {
		return e, agentd.Errorf(agentd.EINVALID, "an audit entry needs its tenant and project")
	}
	err := db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
		e.ID, err = db.insertAudit(ctx, tx, &e)
		return err
	})
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

// Audit implements agentd.Store.Audit. A limit outside 1..1000 means 1000.
func (db *DB) Audit(ctx context.Context, f agentd.AuditFilter) ([]agentd.AuditEntry, error) {
	if f.TenantID == "" || f.ProjectID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "the audit log is read per tenant and project")
	} else if f.Kind != "" && !slices.Contains(agentd.AuditKinds, f.Kind) {
		return nil, agentd.Errorf(agentd.EINVALID, "unknown audit kind %q", f.Kind)
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	where, args := auditWhere(f)
	var out []agentd.AuditEntry
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit WHERE `+where+` ORDER BY id LIMIT ?`,
			append(args, limit)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e agentd.AuditEntry
			var at sql.NullInt64
			if err := rows.Scan(&e.ID, &e.Kind, &e.TenantID, &e.ProjectID, &e.ConversationID, &e.RunID, &e.ToolCallID,
				&e.ToolName, &e.KeyID, &e.Role, &e.Via, &e.Decision, &e.Reason, &e.Tier, &e.Escalated,
				&e.ArgumentsSHA256, &e.EditedArgumentsSHA256, &e.Connection, &e.Method, &e.Endpoint, &e.Outcome,
				&e.Subagent, &e.TaskToolCallID, &at); err != nil {
				return err
			}
			e.CreatedAt = decTime(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

// auditWhere is Audit's condition and its parameters: only the filters
// that are set, so that a call's or a conversation's entries are read from
// the conversation's index (TestQueryPlans).
func auditWhere(f agentd.AuditFilter) (string, []any) {
	where := `tenant_id = ? AND project_id = ? AND id > ?`
	args := []any{f.TenantID, f.ProjectID, f.After}
	add := func(cond string, v any) {
		where += ` AND ` + cond
		args = append(args, v)
	}
	if f.Kind != "" {
		add(`kind = ?`, f.Kind)
	}
	if f.ConversationID != "" {
		add(`conversation_id = ?`, f.ConversationID)
	} else if f.ToolCallID != "" {
		// No index of its own (0013): the entries of a call carry its
		// conversation (callEntry), so they are read from the
		// conversation's index.
		add(`conversation_id = (SELECT COALESCE(conversation_id, '') FROM tool_calls WHERE id = ?)`, f.ToolCallID)
	}
	if f.ToolCallID != "" {
		// A task call's entries include those of its subagent's calls.
		where += ` AND (tool_call_id = ? OR task_tool_call_id = ?)`
		args = append(args, f.ToolCallID, f.ToolCallID)
	}
	if !f.Since.IsZero() {
		add(`created_at >= ?`, encBound(f.Since))
	}
	if !f.Until.IsZero() {
		add(`created_at < ?`, encBound(f.Until))
	}
	return where, args
}
