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

// nextAuditID is the id of the next audit entry, in audit or in decisions
// (0024): one more than the larger of both tables' largest, so that ids of
// both increase together in commit order (the single writer).
const nextAuditID = `MAX(COALESCE((SELECT MAX(id) FROM audit), 0), COALESCE((SELECT MAX(rid) FROM decisions), 0)) + 1`

var insertAuditQuery = prepared(`INSERT INTO audit (id, kind, tenant_id, project_id, conversation_id, run_id,
	tool_call_id, tool_name, key_id, role, via, decision, reason, tier, escalated, arguments_sha256,
	edited_arguments_sha256, connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at)
	VALUES (` + nextAuditID + `, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)

// insertDecisionQuery records a decision, with the call's tier and
// escalated flag as they are now, under the next audit id: the decision's
// row is its audit entry (0024, decisionEntries).
var insertDecisionQuery = prepared(`
	INSERT INTO decisions (rid, id, tool_call_id, decision, reason, decided_by, arguments_sha256, created_at,
		edited_arguments, edited_arguments_sha256, role, via, tier, escalated, tenant_id, project_id)
	SELECT ` + nextAuditID + `, ?, id, ?, ?, ?, ?, ?, ?, ?, ?, ?, tier, escalated, tenant_id, project_id
	FROM tool_calls WHERE id = ?`)

// insertDecision records decision d (decided at at; edited its edited
// arguments or nil) inside a write transaction.
func insertDecision(ctx context.Context, q querier, d *agentd.Decision, at, edited any) error {
	_, err := q.ExecContext(ctx, insertDecisionQuery, d.ID, d.Decision, d.Reason, d.DecidedBy, d.ArgumentsSHA256, at,
		edited, d.EditedArgumentsSHA256, d.Role, d.Via, d.ToolCallID)
	if err != nil {
		return insertErr(err, "decision", d.ID)
	}
	return nil
}

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
// Entries live in two tables (0024): the audit table, and the decisions
// recorded since 0024, each the entry of its decision, expiry or
// cancellation. Both are read in id order from one snapshot, up to limit
// each, and merged.
func (db *DB) Audit(ctx context.Context, f agentd.AuditFilter) ([]agentd.AuditEntry, error) {
	limit, err := f.Check()
	if err != nil {
		return nil, err
	}
	var rows, decided []agentd.AuditEntry
	err = db.readTx(ctx, func(tx *sql.Tx) (err error) {
		where, args := auditWhere(f)
		rows, err = queryAudit(ctx, tx, `SELECT `+auditColumns+` FROM audit WHERE `+where+` ORDER BY id LIMIT ?`, append(args, limit)...)
		if err != nil {
			return err
		}
		if q, args, ok := decisionEntries(f, db.decisionsFrom); ok {
			decided, err = queryAudit(ctx, tx, q, append(args, limit)...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return agentd.MergeAudit(rows, decided, limit), nil
}

// queryAudit reads entries, columns in auditColumns' order.
func queryAudit(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]agentd.AuditEntry, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []agentd.AuditEntry
	for rows.Next() {
		var e agentd.AuditEntry
		var at sql.NullInt64
		if err := rows.Scan(&e.ID, &e.Kind, &e.TenantID, &e.ProjectID, &e.ConversationID, &e.RunID, &e.ToolCallID,
			&e.ToolName, &e.KeyID, &e.Role, &e.Via, &e.Decision, &e.Reason, &e.Tier, &e.Escalated,
			&e.ArgumentsSHA256, &e.EditedArgumentsSHA256, &e.Connection, &e.Method, &e.Endpoint, &e.Outcome,
			&e.Subagent, &e.TaskToolCallID, &at); err != nil {
			return nil, err
		}
		e.CreatedAt = decTime(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// decisionColumns are auditColumns read from a decision d of call c, the
// kind from the decision's value.
const decisionColumns = `d.rid, CASE d.decision WHEN 'expired' THEN 'expiry' WHEN 'cancelled' THEN 'cancellation' ELSE 'decision' END,
	c.tenant_id, c.project_id, COALESCE(c.conversation_id, ''), COALESCE(c.run_id, ''), d.tool_call_id, c.name,
	d.decided_by, d.role, d.via, d.decision, d.reason, d.tier, d.escalated, d.arguments_sha256, d.edited_arguments_sha256,
	'', '', '', '', '', '', d.created_at`

// decisionEntries is the query of f's entries held by decisions rows
// (0024) and its parameters but the limit; false when f's kind is not one
// a decision is; from is the last rid whose entry is in audit. A call's
// entries are read from its decisions, a conversation's from its calls'
// (tool_calls_conversation, then decisions_tool_call), the others from the
// tenant's decisions in rid order (decisions_tenant), each joined to its
// call (TestQueryPlans).
func decisionEntries(f agentd.AuditFilter, from int64) (string, []any, bool) {
	tables := `decisions d CROSS JOIN tool_calls c ON c.id = d.tool_call_id`
	where := `d.rid > ? AND d.tenant_id = ? AND d.project_id = ?`
	if f.ConversationID != "" {
		// The conversation's calls first (tool_calls_conversation), the
		// tenant and project checked on each.
		tables = `tool_calls c CROSS JOIN decisions d ON d.tool_call_id = c.id`
		where = `d.rid > ? AND +d.tenant_id = ? AND +d.project_id = ? AND c.conversation_id = ?`
	}
	args := []any{max(f.After, from), f.TenantID, f.ProjectID}
	if f.ConversationID != "" {
		args = append(args, f.ConversationID)
	}
	add := func(cond string, v any) {
		where += ` AND ` + cond
		args = append(args, v)
	}
	switch f.Kind {
	case "":
	case agentd.AuditDecision:
		where += ` AND d.decision NOT IN ('expired', 'cancelled')`
	case agentd.AuditExpiry:
		where += ` AND d.decision = 'expired'`
	case agentd.AuditCancellation:
		where += ` AND d.decision = 'cancelled'`
	default:
		return "", nil, false
	}
	if f.ToolCallID != "" {
		add(`d.tool_call_id = ?`, f.ToolCallID)
	}
	if !f.Since.IsZero() {
		add(`d.created_at >= ?`, encBound(f.Since))
	}
	if !f.Until.IsZero() {
		add(`d.created_at < ?`, encBound(f.Until))
	}
	return `SELECT ` + decisionColumns + ` FROM ` + tables + ` WHERE ` + where + ` ORDER BY d.rid LIMIT ?`, args, true
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
