package sqlstore

import (
	"context"
	"database/sql"
	"slices"

	"github.com/agentd-dev/agentd"
)

// AuditLog is the store's audit log (agentd.AuditLog and the store
// contract's doc): entries of decisions, refusals and escalations are
// written inside the transaction of the change they record (Tx.Audit,
// Tx.Decide); AppendAudit adds the rest. Entries live in two tables: the
// audit table, and the decisions, each row the entry of its decision,
// expiry or cancellation (Backend.DecisionEntries reads them).
type AuditLog struct{ b Backend }

// auditColumns are the columns queryAudit scans, in its order.
const auditColumns = `id, kind, tenant_id, project_id, conversation_id, run_id, tool_call_id, tool_name,
	key_id, role, via, decision, reason, tier, escalated, arguments_sha256, edited_arguments_sha256,
	connection, method, endpoint, outcome, subagent, task_tool_call_id, created_at`

// AppendAudit implements agentd.AuditLog.AppendAudit.
func (s *AuditLog) AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error) {
	if !slices.Contains(agentd.AuditKinds, e.Kind) {
		return e, agentd.Errorf(agentd.EINVALID, "unknown audit kind %q", e.Kind)
	} else if e.TenantID == "" || e.ProjectID == "" {
		return e, agentd.Errorf(agentd.EINVALID, "an audit entry needs its tenant and project")
	}
	err := s.b.Write(ctx, func(ctx context.Context, tx Tx) (err error) {
		e.ID, err = tx.InsertAudit(ctx, &e)
		return err
	})
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

// Audit implements agentd.AuditLog.Audit. A limit outside 1..1000 means 1000.
// The entries of both tables are read in id order from one snapshot, up
// to limit each, and merged.
func (s *AuditLog) Audit(ctx context.Context, f agentd.AuditFilter) ([]agentd.AuditEntry, error) {
	limit, err := f.Check()
	if err != nil {
		return nil, err
	}
	var rows, decided []agentd.AuditEntry
	err = s.b.Read(ctx, func(q Q) (err error) {
		query, args := auditQuery(f)
		rows, err = queryAudit(ctx, q, query, append(args, limit)...)
		if err != nil {
			return err
		}
		if query, args, ok := s.b.DecisionEntries(f); ok {
			decided, err = queryAudit(ctx, q, query, append(args, limit)...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return mergeAudit(rows, decided, limit), nil
}

// auditQuery is Audit's read of the audit table and its parameters but
// the limit.
func auditQuery(f agentd.AuditFilter) (string, []any) {
	where, args := auditWhere(f)
	return `SELECT ` + auditColumns + ` FROM audit WHERE ` + where + ` ORDER BY id LIMIT ?`, args
}

// mergeAudit merges a and b, each in ID order, into the first limit
// entries in ID order: the entries of the audit table and those of the
// decisions.
func mergeAudit(a, b []agentd.AuditEntry, limit int) []agentd.AuditEntry {
	if len(b) == 0 {
		return a
	} else if len(a) == 0 {
		return b
	}
	out := make([]agentd.AuditEntry, 0, min(len(a)+len(b), limit))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && a[0].ID < b[0].ID) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// queryAudit reads entries, columns in auditColumns' order.
func queryAudit(ctx context.Context, tx Q, q string, args ...any) ([]agentd.AuditEntry, error) {
	rows, err := tx.Query(ctx, q, args...)
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

// auditWhere is Audit's condition and its parameters: only the filters
// that are set, so that a call's or a conversation's entries are read from
// the conversation's index (sqlite's TestQueryPlans).
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
		add(`created_at >= ?`, EncBound(f.Since))
	}
	if !f.Until.IsZero() {
		add(`created_at < ?`, EncBound(f.Until))
	}
	return where, args
}

// DecisionKindCondition is the condition (" AND …" on the decisions row d)
// that selects the decisions rows holding audit entries of kind ("" for
// every kind); false when no decisions row is of that kind.
func DecisionKindCondition(kind string) (string, bool) {
	switch kind {
	case "":
		return "", true
	case agentd.AuditDecision:
		return ` AND d.decision NOT IN ('expired', 'cancelled')`, true
	case agentd.AuditExpiry:
		return ` AND d.decision = 'expired'`, true
	case agentd.AuditCancellation:
		return ` AND d.decision = 'cancelled'`, true
	}
	return "", false
}
