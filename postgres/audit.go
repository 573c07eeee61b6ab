package postgres

import (
	"context"
	"slices"

	"github.com/agentd-dev/agentd"
)

// The audit log (agentd.Store's doc): entries of decisions, refusals and
// escalations are written here, inside the transaction of the change they
// record; AppendAudit adds the rest.

const auditColumns = `id, kind, tenant_id, project_id, conversation_id, run_id, tool_call_id, tool_name,
	key_id, role, via, decision, reason, tier, escalated, arguments_sha256, edited_arguments_sha256,
	connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at`

const insertAuditQuery = `INSERT INTO audit (kind, tenant_id, project_id, conversation_id, run_id,
	tool_call_id, tool_name, key_id, role, via, decision, reason, tier, escalated, arguments_sha256,
	edited_arguments_sha256, connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// insertAudit writes e inside tx (a write transaction), under the feed lock
// (its id is taken in commit order, txn.lockFeed), and returns its id.
func (tx *txn) insertAudit(ctx context.Context, e *agentd.AuditEntry) (int64, error) {
	at, err := encTime("audit time", e.CreatedAt)
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
	if _, err := encTime("audit time", e.CreatedAt); err != nil {
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

// AppendAudit implements agentd.Store.AppendAudit.
func (db *DB) AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error) {
	if !slices.Contains(agentd.AuditKinds, e.Kind) {
		return e, agentd.Errorf(agentd.EINVALID, "unknown audit kind %q", e.Kind)
	} else if e.TenantID == "" || e.ProjectID == "" {
		return e, agentd.Errorf(agentd.EINVALID, "an audit entry needs its tenant and project")
	}
	err := db.writeTx(ctx, func(tx *txn) (err error) {
		e.ID, err = tx.insertAudit(ctx, &e)
		return err
	})
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

// Audit implements agentd.Store.Audit. A limit outside 1..1000 means 1000.
// Entries live in two tables (0009): the audit table, and the decisions
// recorded since 0009 (those with an audit_id), each the entry of its
// decision, expiry or cancellation. Both are read in id order from one
// snapshot, up to limit each, and merged.
func (db *DB) Audit(ctx context.Context, f agentd.AuditFilter) ([]agentd.AuditEntry, error) {
	limit, err := f.Check()
	if err != nil {
		return nil, err
	}
	var rows, decided []agentd.AuditEntry
	err = db.readTx(ctx, func(tx *txn) (err error) {
		where, args := auditWhere(f)
		rows, err = queryAudit(ctx, tx, `SELECT `+auditColumns+` FROM audit WHERE `+where+` ORDER BY id LIMIT ?`, append(args, limit)...)
		if err != nil {
			return err
		}
		if q, args, ok := decisionEntries(f); ok {
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
func queryAudit(ctx context.Context, tx *txn, q string, args ...any) ([]agentd.AuditEntry, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []agentd.AuditEntry
	for rows.Next() {
		var e agentd.AuditEntry
		var at *int64
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
	if f.ConversationID != "" {
		add(`c.conversation_id = ?`, f.ConversationID)
	}
	if !f.Since.IsZero() {
		add(`d.created_at >= ?`, encBound(f.Since))
	}
	if !f.Until.IsZero() {
		add(`d.created_at < ?`, encBound(f.Until))
	}
	return `SELECT ` + decisionColumns + ` FROM decisions d JOIN tool_calls c ON c.id = d.tool_call_id WHERE ` + where +
		` ORDER BY d.audit_id LIMIT ?`, args, true
}

// auditWhere is Audit's condition and its parameters: only the filters
// that are set, so that a call's or a conversation's entries are read from
// the conversation's index.
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
