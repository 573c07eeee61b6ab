package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/agentd-dev/agentd"
)

// ToolCallStore is the store's tool calls (agentd.ToolCallStore and the
// approval queue): their rows, the decisions made on them
// and the audit entries of refusals and escalations.
type ToolCallStore struct {
	b Backend
	d *Dialect
	q toolCallSQL
	// messageExists is ENOTFOUND unless the conversation has the message.
	messageExists func(ctx context.Context, conversationID, id string) error
	// grants records the grant an approval makes.
	grants *GrantStore
}

// newToolCallStore returns the tool-call role of backend b, whose SQL is
// d. messageExists answers whether a conversation has a message (a cursor
// of ToolCallsAfter); grants records the grants of approvals.
func newToolCallStore(b Backend, d *Dialect, messageExists func(ctx context.Context, conversationID, id string) error, grants *GrantStore) *ToolCallStore {
	return &ToolCallStore{b: b, d: d, q: newToolCallSQL(d), messageExists: messageExists, grants: grants}
}

const toolCallColumns = `id, tenant_id, project_id, COALESCE(conversation_id, ''), COALESCE(run_id, ''),
	correlation_id, message_id, step, idx, name, server_id, arguments, arguments_sha256, tier, reason,
	escalated, status, method, endpoint, requires_approval_at, allowed_decisions, result, error,
	created_at, updated_at, connection_name, path_template, params, diff, state_sha256, approval`

// selectToolCalls starts a read of calls; a WHERE condition follows.
const selectToolCalls = `SELECT ` + toolCallColumns + ` FROM tool_calls WHERE `

// toolCallSQL is the role's statements in its dialect. The conditions
// (…Where) follow selectToolCalls.
type toolCallSQL struct {
	insert, update, edit, repark, approvals, governance, decisions                 string
	byIDWhere, ofConversationWhere, ofRunWhere, ofMessagesWhere, afterMessageWhere string
	byStatusWhere, dueBetweenWhere, parkedCount, nextDeadline                      string
}

func newToolCallSQL(d *Dialect) toolCallSQL {
	return toolCallSQL{
		insert: `INSERT INTO tool_calls (id, tenant_id, project_id, conversation_id, run_id,
	correlation_id, message_id, step, idx, name, server_id, arguments, arguments_sha256, tier, reason,
	escalated, status, method, endpoint, requires_approval_at, allowed_decisions, result, error,
	created_at, updated_at, connection_name, path_template, params, diff, state_sha256, approval)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		update: `UPDATE tool_calls SET status = ?, result = COALESCE(?, result),
				error = CASE WHEN ? = '' THEN error ELSE ? END,
				updated_at = COALESCE(?, updated_at)
			WHERE id = ? AND ` + d.In("status") + `
				AND (` + d.intParam + ` = 0 OR (SELECT COUNT(*) FROM decisions WHERE tool_call_id = tool_calls.id) = ` + d.intParam + ` - 1)`,
		edit: `UPDATE tool_calls SET arguments = ?, arguments_sha256 = ?, tier = ?, reason = ?, escalated = ?,
					method = ?, endpoint = ?, path_template = ?, params = ?
				WHERE id = ?`,
		repark: `UPDATE tool_calls SET arguments = ?, arguments_sha256 = ?, tier = ?, reason = ?, escalated = ?,
					allowed_decisions = ?, diff = ?, state_sha256 = ?, requires_approval_at = ?,
					method = ?, endpoint = ?, path_template = ?, params = ?,
					approval = COALESCE(` + d.textParam + `, ` + d.approval.dropApprovals + `)
				WHERE id = ?`,
		approvals:  d.approval.setApprovals,
		governance: d.approval.setGovernance,
		decisions: `SELECT id, tool_call_id, decision, reason, decided_by, arguments_sha256, created_at,
			edited_arguments, edited_arguments_sha256, role, via
		FROM decisions WHERE ` + d.In("tool_call_id") + ` ORDER BY rid`,
		byIDWhere:           `id = ?`,
		ofConversationWhere: `conversation_id = ? ORDER BY created_at, step, idx, rid`,
		ofRunWhere:          `run_id = ? ORDER BY step, idx, rid`,
		// The hint keeps SQLite's planner from reading all of the
		// conversation's calls from tool_calls_conversation for their
		// order: the few calls of the messages named come from
		// tool_calls_message and are sorted (0025).
		ofMessagesWhere: d.hint + `conversation_id = ? AND ` + d.In("message_id") + ` ORDER BY created_at, step, idx, rid`,
		// The calls of the messages after a cursor message: the messages
		// after the cursor's rid, their calls by message (ToolCallsAfter).
		afterMessageWhere: d.hint + `conversation_id = ? AND message_id IN (SELECT id FROM messages WHERE conversation_id = ?
		AND rid > (SELECT rid FROM messages WHERE id = ? AND conversation_id = ?)) ORDER BY created_at, step, idx, rid`,
		byStatusWhere: d.In("status") + ` ORDER BY created_at, rid`,
		// A range of the index on (status, requires_approval_at).
		dueBetweenWhere: `status = 'requires_confirmation' AND requires_approval_at > ? AND requires_approval_at <= ?
		ORDER BY requires_approval_at, rid`,
		// Counted from the index on (status, requires_approval_at).
		parkedCount: `SELECT COUNT(*) FROM tool_calls WHERE status = 'requires_confirmation'`,
		// The first entry of the index on (status, requires_approval_at).
		nextDeadline: `SELECT requires_approval_at FROM tool_calls
	WHERE status = 'requires_confirmation' AND requires_approval_at > ?
	ORDER BY requires_approval_at LIMIT 1`,
	}
}

// prepared is the role's statements that run on every state change of a
// call, and the reads of one call, a run's calls and a conversation's
// calls on every step (Store.Prepared).
func (s *ToolCallStore) prepared() []string {
	q := s.q
	return []string{q.insert, q.update, q.edit, q.repark, q.approvals, q.governance, q.decisions,
		selectToolCalls + q.byIDWhere, selectToolCalls + q.ofConversationWhere, selectToolCalls + q.ofRunWhere,
		selectToolCalls + q.ofMessagesWhere, selectToolCalls + q.afterMessageWhere}
}

// maxMessageIDs bounds MessageToolCalls' message ids.
const maxMessageIDs = 1000

// ToolCall returns one call with its decisions in the order they were
// made, or ENOTFOUND.
func (s *ToolCallStore) ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error) {
	var c *agentd.ToolCall
	err := s.b.Read(ctx, func(q Q) (err error) {
		c, err = s.get(ctx, q, id)
		return err
	})
	return c, err
}

// ToolCalls returns a conversation's calls, with decisions, ordered by
// CreatedAt, then Step, then Index, then insertion.
func (s *ToolCallStore) ToolCalls(ctx context.Context, conversationID string) ([]agentd.ToolCall, error) {
	return s.list(ctx, s.q.ofConversationWhere, conversationID)
}

// MessageToolCalls implements agentd.ToolCallStore.MessageToolCalls.
func (s *ToolCallStore) MessageToolCalls(ctx context.Context, conversationID string, messageIDs []string) ([]agentd.ToolCall, error) {
	if len(messageIDs) > maxMessageIDs {
		return nil, agentd.Errorf(agentd.EINVALID, "at most %d message ids, got %d", maxMessageIDs, len(messageIDs))
	}
	if len(messageIDs) == 0 {
		return nil, nil
	}
	return s.list(ctx, s.q.ofMessagesWhere, conversationID, listOf(s.d, messageIDs))
}

// ToolCallsAfter implements agentd.ToolCallStore.ToolCallsAfter: with
// an empty cursor the conversation's calls (ToolCalls); otherwise the
// calls of the messages after the cursor's rid, and only an empty answer
// looks the cursor up again, to tell "none after it" from an unknown
// cursor (as MessagesAfter).
func (s *ToolCallStore) ToolCallsAfter(ctx context.Context, conversationID, afterMessageID string) ([]agentd.ToolCall, error) {
	if afterMessageID == "" {
		return s.ToolCalls(ctx, conversationID)
	}
	calls, err := s.list(ctx, s.q.afterMessageWhere, conversationID, conversationID, afterMessageID, conversationID)
	if err != nil || len(calls) > 0 {
		return calls, err
	}
	return nil, s.messageExists(ctx, conversationID, afterMessageID)
}

// RunToolCalls returns the calls of one run, with decisions, ordered by
// Step, then Index, then insertion.
func (s *ToolCallStore) RunToolCalls(ctx context.Context, runID string) ([]agentd.ToolCall, error) {
	return s.list(ctx, s.q.ofRunWhere, runID)
}

// ToolCallsByStatus returns every call in one of the statuses, with
// decisions, ordered by CreatedAt, then insertion. No statuses, no calls.
func (s *ToolCallStore) ToolCallsByStatus(ctx context.Context, statuses ...agentd.CallStatus) ([]agentd.ToolCall, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	return s.list(ctx, s.q.byStatusWhere, listOf(s.d, statuses))
}

// PendingToolCalls implements agentd.ToolCallStore.PendingToolCalls. A limit
// outside 1..1000 means 1000.
func (s *ToolCallStore) PendingToolCalls(ctx context.Context, f agentd.PendingFilter) ([]agentd.ToolCall, error) {
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	where, args := pendingWhere(s.d, f)
	return s.list(ctx, where+` LIMIT ?`, append(args, limit)...)
}

// pendingWhere is PendingToolCalls' condition, with its ORDER BY, and its
// parameters, with only the filters that are set, so that each is served
// by its index (sqlite's TestQueryPlans): ServerID (with or without
// ToolName) by the parked calls' (server_id, id, name) index,
// ConversationID by the conversation's calls. ToolName alone walks the
// tenant's parked calls: the engine names the tool's server with it. With
// ExpiresBefore the calls come by deadline, then id, from the index of
// parked deadlines (the cursor is the last call's id: the page goes on
// after its deadline and id); otherwise by id.
func pendingWhere(d *Dialect, f agentd.PendingFilter) (string, []any) {
	where := `tenant_id = ? AND project_id = ? AND status = 'requires_confirmation'`
	if f.ConversationID != "" && f.ExpiresBefore.IsZero() && f.ServerID == "" {
		// A conversation's few calls, from its own index: the hint keeps
		// the planner off the indexes of the tenant's parked calls.
		where = d.hint + `tenant_id = ? AND ` + d.hint + `project_id = ? AND ` + d.hint + `status = 'requires_confirmation'`
	}
	args := []any{f.TenantID, f.ProjectID}
	add := func(cond string, v ...any) {
		where += ` AND ` + cond
		args = append(args, v...)
	}
	order := ` ORDER BY id`
	switch {
	case !f.ExpiresBefore.IsZero():
		add(`requires_approval_at < ?`, EncBound(f.ExpiresBefore))
		if f.After != "" {
			add(`(requires_approval_at, id) > ((SELECT requires_approval_at FROM tool_calls WHERE id = ?), ?)`, f.After, f.After)
		}
		order = ` ORDER BY requires_approval_at, id`
	default:
		add(`id > ?`, f.After)
	}
	if f.ToolName != "" {
		add(`name = ?`, f.ToolName)
	}
	if f.ServerID != "" {
		add(`server_id = ?`, f.ServerID)
	}
	if f.ConversationID != "" {
		add(`conversation_id = ?`, f.ConversationID)
	}
	if f.CreatedBy != "" {
		add(`conversation_id IN (SELECT id FROM conversations WHERE tenant_id = ? AND project_id = ? AND created_by = ?)`,
			f.TenantID, f.ProjectID, f.CreatedBy)
	}
	return where + order, args
}

// ParkedCount implements agentd.ToolCallStore.ParkedCount from the index on
// (status, requires_approval_at).
func (s *ToolCallStore) ParkedCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.b.Read(ctx, func(q Q) error {
		return q.QueryRow(ctx, s.q.parkedCount).Scan(&n)
	})
	return n, err
}

// DueToolCalls returns up to limit calls in requires_confirmation whose
// RequiresApprovalAt is at or before now, with decisions, earliest deadline
// first. Calls without a deadline are never due. A limit outside
// 1..agentd.MaxDuePage means agentd.MaxDuePage.
func (s *ToolCallStore) DueToolCalls(ctx context.Context, now time.Time, limit int) ([]agentd.ToolCall, error) {
	n, err := EncTime("now", now)
	if err != nil {
		return nil, err
	} else if n == nil {
		return nil, nil
	}
	return s.list(ctx, `status = 'requires_confirmation' AND requires_approval_at <= ?
		ORDER BY requires_approval_at, rid LIMIT ?`, n, agentd.DuePage(limit))
}

// ToolCallsDueBetween returns the calls in requires_confirmation whose
// RequiresApprovalAt is after after and at or before until, with
// decisions, earliest deadline first: a range of the index on (status,
// requires_approval_at).
func (s *ToolCallStore) ToolCallsDueBetween(ctx context.Context, after, until time.Time) ([]agentd.ToolCall, error) {
	switch {
	case after.IsZero() || until.IsZero():
		return nil, agentd.Errorf(agentd.EINVALID, "a deadline range needs both bounds")
	case until.Before(after):
		return nil, agentd.Errorf(agentd.EINVALID, "until %s is before after %s", until.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
	}
	return s.list(ctx, s.q.dueBetweenWhere, EncBound(after), EncBound(until))
}

// NextDeadline returns the earliest RequiresApprovalAt after after (any,
// when after is zero) of the calls in requires_confirmation, in UTC, or the
// zero time when there is none.
// It reads the first entry of the index on (status, requires_approval_at).
func (s *ToolCallStore) NextDeadline(ctx context.Context, after time.Time) (time.Time, error) {
	bound := EncBound(after)
	if after.IsZero() {
		bound = int64(math.MinInt64)
	}
	var at sql.NullInt64
	err := s.b.Read(ctx, func(q Q) error {
		return q.QueryRow(ctx, s.q.nextDeadline, bound).Scan(&at)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	} else if err != nil {
		return time.Time{}, err
	}
	return decTime(at), nil
}

// list reads the calls matching where (which may end in ORDER BY) and
// their decisions from one snapshot.
func (s *ToolCallStore) list(ctx context.Context, where string, args ...any) ([]agentd.ToolCall, error) {
	var calls []agentd.ToolCall
	err := s.b.Read(ctx, func(q Q) (err error) {
		calls, err = s.selectCalls(ctx, q, where, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return calls, nil
}

// get reads one call with its decisions, or ENOTFOUND.
func (s *ToolCallStore) get(ctx context.Context, q Q, id string) (*agentd.ToolCall, error) {
	calls, err := s.selectCalls(ctx, q, s.q.byIDWhere, id)
	if err != nil {
		return nil, err
	} else if len(calls) == 0 {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call %q not found", id)
	}
	return &calls[0], nil
}

// selectCalls reads the calls matching where (a condition of tool_calls, which
// may end in ORDER BY) and attaches their decisions in insertion order.
func (s *ToolCallStore) selectCalls(ctx context.Context, q Q, where string, args ...any) ([]agentd.ToolCall, error) {
	rows, err := q.Query(ctx, selectToolCalls+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var calls []agentd.ToolCall
	for rows.Next() {
		c, err := scanToolCall(rows)
		if err != nil {
			return nil, err
		}
		calls = append(calls, *c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if len(calls) == 0 {
		return calls, nil
	}
	return calls, s.attachDecisions(ctx, q, calls)
}

// attachDecisions reads the decisions of calls, in insertion order.
func (s *ToolCallStore) attachDecisions(ctx context.Context, q Q, calls []agentd.ToolCall) error {
	index := make(map[string]int, len(calls))
	ids := make([]string, len(calls))
	for i, c := range calls {
		index[c.ID] = i
		ids[i] = c.ID
	}
	rows, err := q.Query(ctx, s.q.decisions, s.d.list(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var d agentd.Decision
		var created sql.NullInt64
		var edited sql.NullString
		if err := rows.Scan(&d.ID, &d.ToolCallID, &d.Decision, &d.Reason, &d.DecidedBy, &d.ArgumentsSHA256, &created,
			&edited, &d.EditedArgumentsSHA256, &d.Role, &d.Via); err != nil {
			return err
		}
		d.CreatedAt = decTime(created)
		d.EditedArguments = decJSON(edited)
		c := &calls[index[d.ToolCallID]]
		c.Decisions = append(c.Decisions, d)
	}
	return rows.Err()
}

func scanToolCall(s scanner) (*agentd.ToolCall, error) {
	var c agentd.ToolCall
	var arguments, allowed, result, params, approval sql.NullString
	var deadline, created, updated sql.NullInt64
	if err := s.Scan(&c.ID, &c.TenantID, &c.ProjectID, &c.ConversationID, &c.RunID,
		&c.CorrelationID, &c.MessageID, &c.Step, &c.Index, &c.Name, &c.ServerID, &arguments, &c.ArgumentsSHA256, &c.Tier, &c.Reason,
		&c.Escalated, &c.Status, &c.Method, &c.Endpoint, &deadline, &allowed, &result, &c.Error,
		&created, &updated, &c.ConnectionName, &c.PathTemplate, &params, &c.Diff, &c.StateSHA256, &approval); err != nil {
		return nil, err
	}
	c.Arguments = decJSON(arguments)
	c.Params = decJSON(params)
	c.Result = decJSON(result)
	if allowed.Valid {
		if err := json.Unmarshal([]byte(allowed.String), &c.AllowedDecisions); err != nil {
			return nil, errors.New("allowed_decisions of tool call " + c.ID + ": " + err.Error())
		}
	}
	if deadline.Valid {
		t := decTime(deadline)
		c.RequiresApprovalAt = &t
	}
	c.CreatedAt, c.UpdatedAt = decTime(created), decTime(updated)
	if err := decodeApproval(&c, approval.String, approval.Valid); err != nil {
		return nil, err
	}
	return &c, nil
}

// validCallStatus reports whether s is a status of a tool call.
func validCallStatus(s agentd.CallStatus) bool {
	switch s {
	case agentd.StatusRequiresConfirmation, agentd.StatusRequiresInput, agentd.StatusApproved, agentd.StatusExecuting, agentd.StatusCompleted,
		agentd.StatusFailed, agentd.StatusDenied, agentd.StatusExpired, agentd.StatusRefused, agentd.StatusCancelled:
		return true
	}
	return false
}
