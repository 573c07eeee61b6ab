package postgres

import (
	"context"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// The audit log (agentd.Store's doc): entries of decisions, refusals and
// escalations are written here, inside the transaction of the change they
// record; AppendAudit adds the rest.

const insertAuditQuery = `INSERT INTO audit (kind, tenant_id, project_id, conversation_id, run_id,
	tool_call_id, tool_name, key_id, role, via, decision, reason, tier, escalated, arguments_sha256,
	edited_arguments_sha256, connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// insertAudit writes e inside tx (a write transaction), under the feed lock
// (its id is taken in commit order, txn.lockFeed), and returns its id.
func (tx *txn) insertAudit(ctx context.Context, e *agentd.AuditEntry) (int64, error) {
	at, err := sqlstore.EncTime("audit time", e.CreatedAt)
	if err != nil {
		return 0, err
	}
	if err := tx.lockFeed(ctx); err != nil {
		return 0, err
	}
	var id int64
	err = tx.QueryRow(ctx, insertAuditQuery,
		e.Kind, e.TenantID, e.ProjectID, e.ConversationID, e.RunID, e.ToolCallID, e.ToolName, e.KeyID, e.Role,
		e.Via, e.Decision, e.Reason, e.Tier, e.Escalated, e.ArgumentsSHA256, e.EditedArgumentsSHA256,
		e.Connection, e.Method, e.Endpoint, e.Outcome, e.Subagent, e.TaskToolCallID, at).Scan(&id)
	return id, err
}

// queued is a write of tx held until it appends its events or commits
// (flushAudit), so that it takes its audit id under the feed lock taken as
// late as possible, after every row lock the transaction takes on calls and
// runs: an audit entry, or a decision whose row is its entry (0009).
type queued struct {
	e *agentd.AuditEntry
	d *queuedDecision
}

// queuedDecision is a decision to insert, with its encoded time and edited
// arguments, the call's tier and escalated flag when it was decided and
// its tenant and project.
type queuedDecision struct {
	d               *agentd.Decision
	at, edited      any
	tier            agentd.Tier
	escalated       bool
	tenant, project string
}

// insertDecisionQuery records a decision under the next audit id (the
// audit table's identity sequence): the row is its audit entry.
const insertDecisionQuery = `
	INSERT INTO decisions (id, tool_call_id, decision, reason, decided_by, arguments_sha256, created_at,
		edited_arguments, edited_arguments_sha256, role, via, tier, escalated, tenant_id, project_id, audit_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, nextval('audit_id_seq'))`

// queueAudit queues e (queued).
func (tx *txn) queueAudit(e *agentd.AuditEntry) error {
	if _, err := sqlstore.EncTime("audit time", e.CreatedAt); err != nil {
		return err
	}
	tx.audit = append(tx.audit, queued{e: e})
	return nil
}

// queueDecision queues decision d of call c (queued); at and edited are
// its encoded time and edited arguments.
func (tx *txn) queueDecision(d *agentd.Decision, at, edited any, c *agentd.ToolCall) {
	tx.audit = append(tx.audit, queued{d: &queuedDecision{d: d, at: at, edited: edited, tier: c.Tier, escalated: c.Escalated,
		tenant: c.TenantID, project: c.ProjectID}})
}

// flushAudit writes the queued audit entries and decisions of tx, in the
// order they were queued.
func (tx *txn) flushAudit(ctx context.Context) error {
	for _, q := range tx.audit {
		if q.e != nil {
			if _, err := tx.insertAudit(ctx, q.e); err != nil {
				return err
			}
			continue
		}
		if err := tx.lockFeed(ctx); err != nil {
			return err
		}
		d := q.d.d
		if _, err := tx.Exec(ctx, insertDecisionQuery, d.ID, d.ToolCallID, d.Decision, d.Reason, d.DecidedBy, d.ArgumentsSHA256, q.d.at,
			q.d.edited, d.EditedArgumentsSHA256, d.Role, d.Via, q.d.tier, q.d.escalated, q.d.tenant, q.d.project); err != nil {
			return insertErr(err, "decision", d.ID)
		}
	}
	tx.audit = nil
	return nil
}

// decisionColumns are auditColumns read from a decision d of call c, the
// kind from the decision's value.
const decisionColumns = `d.audit_id, CASE d.decision WHEN 'expired' THEN 'expiry' WHEN 'cancelled' THEN 'cancellation' ELSE 'decision' END,
	c.tenant_id, c.project_id, COALESCE(c.conversation_id, ''), COALESCE(c.run_id, ''), d.tool_call_id, c.name,
	d.decided_by, d.role, d.via, d.decision, d.reason, d.tier, d.escalated, d.arguments_sha256, d.edited_arguments_sha256,
	'', '', '', '', '', '', d.created_at`

// decisionEntries is the query of f's entries held by decisions rows
// (0009) and its parameters but the limit; false when f's kind is not one
// a decision is. A tenant's are read from decisions_tenant, a call's from
// decisions_tool_call.
func decisionEntries(f agentd.AuditFilter) (string, []any, bool) {
	where := `d.audit_id > ? AND d.tenant_id = ? AND d.project_id = ?`
	args := []any{f.After, f.TenantID, f.ProjectID}
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
	if f.ConversationID != "" {
		add(`c.conversation_id = ?`, f.ConversationID)
	}
	if !f.Since.IsZero() {
		add(`d.created_at >= ?`, sqlstore.EncBound(f.Since))
	}
	if !f.Until.IsZero() {
		add(`d.created_at < ?`, sqlstore.EncBound(f.Until))
	}
	return `SELECT ` + decisionColumns + ` FROM decisions d JOIN tool_calls c ON c.id = d.tool_call_id WHERE ` + where +
		` ORDER BY d.audit_id LIMIT ?`, args, true
}
