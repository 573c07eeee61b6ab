package sqlite

import (
	"context"
	"database/sql"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// The audit log (agentd.Store's doc): entries of decisions, refusals and
// escalations are written here, inside the transaction of the change they
// record; AppendAudit adds the rest.

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
	at, err := sqlstore.EncTime("audit time", e.CreatedAt)
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
	kind, ok := sqlstore.DecisionKindCondition(f.Kind)
	if !ok {
		return "", nil, false
	}
	where += kind
	if f.ToolCallID != "" {
		add(`d.tool_call_id = ?`, f.ToolCallID)
	}
	if !f.Since.IsZero() {
		add(`d.created_at >= ?`, sqlstore.EncBound(f.Since))
	}
	if !f.Until.IsZero() {
		add(`d.created_at < ?`, sqlstore.EncBound(f.Until))
	}
	return `SELECT ` + decisionColumns + ` FROM ` + tables + ` WHERE ` + where + ` ORDER BY d.rid LIMIT ?`, args, true
}
