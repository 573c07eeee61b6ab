package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

const toolCallColumns = `id, tenant_id, project_id, COALESCE(conversation_id, ''), COALESCE(run_id, ''),
	correlation_id, message_id, step, idx, name, server_id, arguments, arguments_sha256, tier, reason,
	escalated, status, method, endpoint, requires_approval_at, allowed_decisions, result, error,
	created_at, updated_at, connection_name, path_template, params, diff, state_sha256, approval`

var insertToolCall = `INSERT INTO tool_calls (id, tenant_id, project_id, conversation_id, run_id,
	correlation_id, message_id, step, idx, name, server_id, arguments, arguments_sha256, tier, reason,
	escalated, status, method, endpoint, requires_approval_at, allowed_decisions, result, error,
	created_at, updated_at, connection_name, path_template, params, diff, state_sha256, approval)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// The tool-call statements of every state change of a call, and the reads
// of one call, a run's calls and a conversation's calls.
const (
	callByID            = `id = ?`
	callsOfConversation = `conversation_id = ? ORDER BY created_at, step, idx, rid`
	callsOfRun          = `run_id = ? ORDER BY step, idx, rid`
	callsOfMessages     = `conversation_id = ? AND message_id = ANY(?) ORDER BY created_at, step, idx, rid`
	callsAfterMessage   = `conversation_id = ? AND message_id IN (SELECT id FROM messages WHERE conversation_id = ?
		AND rid > (SELECT rid FROM messages WHERE id = ? AND conversation_id = ?)) ORDER BY created_at, step, idx, rid`
)

// maxMessageIDs bounds MessageToolCalls' message ids.
const maxMessageIDs = 1000

var (
	updateCallStatusQuery = `
			UPDATE tool_calls SET status = ?, result = COALESCE(?, result),
				error = CASE WHEN ? = '' THEN error ELSE ? END,
				updated_at = COALESCE(?, updated_at)
			WHERE id = ? AND status = ANY(?)
				AND (?::int = 0 OR (SELECT COUNT(*) FROM decisions WHERE tool_call_id = tool_calls.id) = ?::int - 1)`
	editCallQuery = `
				UPDATE tool_calls SET arguments = ?, arguments_sha256 = ?, tier = ?, reason = ?, escalated = ?,
					method = ?, endpoint = ?, path_template = ?, params = ?
				WHERE id = ?`
	reparkCallQuery = `
				UPDATE tool_calls SET arguments = ?, arguments_sha256 = ?, tier = ?, reason = ?, escalated = ?,
					allowed_decisions = ?, diff = ?, state_sha256 = ?, requires_approval_at = ?,
					method = ?, endpoint = ?, path_template = ?, params = ?,
					approval = COALESCE(?::text, (approval::jsonb - 'approvals')::text)
				WHERE id = ?`
	approvalsQuery = `
				UPDATE tool_calls SET approval = jsonb_set(approval::jsonb, '{approvals}', ?::jsonb)::text
				WHERE id = ? AND approval IS NOT NULL AND COALESCE(jsonb_array_length(approval::jsonb -> 'approvals'), 0) = ?::int`
	governanceQuery = `
				UPDATE tool_calls SET approval = jsonb_set(jsonb_set(approval::jsonb, '{reminded}', ?::jsonb), '{extended_ms}', to_jsonb(?::bigint))::text,
					requires_approval_at = COALESCE(?::bigint, requires_approval_at)
				WHERE id = ? AND approval IS NOT NULL AND requires_approval_at = ?::bigint
					AND COALESCE(jsonb_array_length(approval::jsonb -> 'reminded'), 0) = ?::int`
	decisionsOfCallsQuery = `
		SELECT id, tool_call_id, decision, reason, decided_by, arguments_sha256, created_at,
			edited_arguments, edited_arguments_sha256, role, via
		FROM decisions WHERE tool_call_id = ANY(?) ORDER BY rid`
)

// selectToolCalls starts a read of calls; a WHERE condition follows.
const selectToolCalls = `SELECT ` + toolCallColumns + ` FROM tool_calls WHERE `

// CreateToolCalls inserts calls and appends events, in one transaction.
// EINVALID if a call has no id, an unknown status, JSON fields that are not
// valid JSON, or decisions (decisions are added only by UpdateToolCall);
// ENOTFOUND if a call's conversation or run does not exist; ECONFLICT if an
// id exists. An empty ConversationID or RunID is stored as none. On any
// error nothing is written.
func (db *DB) CreateToolCalls(ctx context.Context, calls []*agentd.ToolCall, events []agentd.EventDraft) ([]agentd.Event, error) {
	rows := make([][]any, 0, len(calls))
	for _, c := range calls {
		args, err := toolCallArgs(c)
		if err != nil {
			return nil, err
		}
		rows = append(rows, args)
	}
	if err := checkEvents(events); err != nil {
		return nil, err
	}
	var out []agentd.Event
	err := db.writeTx(ctx, func(tx *txn) error {
		if err := db.insertToolCalls(ctx, tx, calls, rows); err != nil {
			return err
		}
		var err error
		out, err = db.appendEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertToolCalls inserts calls, whose column values are rows
// (toolCallArgs), with the audit entries of the refused and the escalated.
func (db *DB) insertToolCalls(ctx context.Context, tx *txn, calls []*agentd.ToolCall, rows [][]any) error {
	for i, args := range rows {
		if _, err := tx.Exec(ctx, insertToolCall, args...); err != nil {
			return insertErr(err, "tool call", calls[i].ID)
		}
		if err := db.auditCall(ctx, tx, calls[i]); err != nil {
			return err
		}
	}
	return nil
}

// toolCallArgs validates c and returns its column values in insert order.
func toolCallArgs(c *agentd.ToolCall) ([]any, error) {
	if c == nil || c.ID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "tool call id is required")
	} else if !validCallStatus(c.Status) {
		return nil, agentd.Errorf(agentd.EINVALID, "tool call %q: unknown status %q", c.ID, c.Status)
	} else if len(c.Decisions) > 0 {
		return nil, agentd.Errorf(agentd.EINVALID, "tool call %q: decisions are added by UpdateToolCall only", c.ID)
	}
	arguments, err := encJSON("tool call arguments", c.Arguments)
	if err != nil {
		return nil, err
	}
	result, err := encJSON("tool call result", c.Result)
	if err != nil {
		return nil, err
	}
	params, err := encJSON("tool call params", c.Params)
	if err != nil {
		return nil, err
	}
	var allowed any
	if c.AllowedDecisions != nil {
		b, err := json.Marshal(c.AllowedDecisions)
		if err != nil {
			return nil, err
		}
		allowed = string(b)
	}
	var deadline any
	if c.RequiresApprovalAt != nil {
		if deadline, err = encTime("requires_approval_at", *c.RequiresApprovalAt); err != nil {
			return nil, err
		}
	}
	created, err := encTime("tool call created_at", c.CreatedAt)
	if err != nil {
		return nil, err
	}
	updated, err := encTime("tool call updated_at", c.UpdatedAt)
	if err != nil {
		return nil, err
	}
	approval, err := agentd.EncodeCallApprovalColumn(c)
	if err != nil {
		return nil, err
	}
	return []any{c.ID, c.TenantID, c.ProjectID, nullString(c.ConversationID), nullString(c.RunID),
		c.CorrelationID, c.MessageID, c.Step, c.Index, c.Name, c.ServerID, arguments, c.ArgumentsSHA256, c.Tier, c.Reason,
		c.Escalated, c.Status, c.Method, c.Endpoint, deadline, allowed, result, c.Error,
		created, updated, c.ConnectionName, c.PathTemplate, params, c.Diff, c.StateSHA256, approval}, nil
}

// ToolCall returns one call with its decisions in the order they were
// made, or ENOTFOUND.
func (db *DB) ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error) {
	var c *agentd.ToolCall
	err := db.readTx(ctx, func(tx *txn) (err error) {
		c, err = getToolCall(ctx, tx, id)
		return err
	})
	return c, err
}

// ToolCalls returns a conversation's calls, with decisions, ordered by
// CreatedAt, then Step, then Index, then insertion.
func (db *DB) ToolCalls(ctx context.Context, conversationID string) ([]agentd.ToolCall, error) {
	return db.listToolCalls(ctx, callsOfConversation, conversationID)
}

// MessageToolCalls implements agentd.ToolCallStore.MessageToolCalls.
func (db *DB) MessageToolCalls(ctx context.Context, conversationID string, messageIDs []string) ([]agentd.ToolCall, error) {
	if len(messageIDs) > maxMessageIDs {
		return nil, agentd.Errorf(agentd.EINVALID, "at most %d message ids, got %d", maxMessageIDs, len(messageIDs))
	}
	if len(messageIDs) == 0 {
		return nil, nil
	}
	return db.listToolCalls(ctx, callsOfMessages, conversationID, messageIDs)
}

// ToolCallsAfter implements agentd.ToolCallStore.ToolCallsAfter: with
// an empty cursor the conversation's calls (ToolCalls); otherwise the
// calls of the messages after the cursor's rid, and only an empty answer
// looks the cursor up again, to tell "none after it" from an unknown
// cursor (as MessagesAfter).
func (db *DB) ToolCallsAfter(ctx context.Context, conversationID, afterMessageID string) ([]agentd.ToolCall, error) {
	if afterMessageID == "" {
		return db.ToolCalls(ctx, conversationID)
	}
	calls, err := db.listToolCalls(ctx, callsAfterMessage, conversationID, conversationID, afterMessageID, conversationID)
	if err != nil || len(calls) > 0 {
		return calls, err
	}
	return nil, db.messageExists(ctx, conversationID, afterMessageID)
}

// RunToolCalls returns the calls of one run, with decisions, ordered by
// Step, then Index, then insertion.
func (db *DB) RunToolCalls(ctx context.Context, runID string) ([]agentd.ToolCall, error) {
	return db.listToolCalls(ctx, callsOfRun, runID)
}

// ToolCallsByStatus returns every call in one of the statuses, with
// decisions, ordered by CreatedAt, then insertion. No statuses, no calls.
func (db *DB) ToolCallsByStatus(ctx context.Context, statuses ...agentd.CallStatus) ([]agentd.ToolCall, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	return db.listToolCalls(ctx, `status = ANY(?) ORDER BY created_at, rid`, strList(statuses))
}

// PendingToolCalls implements agentd.Store.PendingToolCalls. A limit
// outside 1..1000 means 1000.
func (db *DB) PendingToolCalls(ctx context.Context, f agentd.PendingFilter) ([]agentd.ToolCall, error) {
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	where, args := pendingWhere(f)
	return db.listToolCalls(ctx, where+` LIMIT ?`, append(args, limit)...)
}

// pendingWhere is PendingToolCalls' condition, with its ORDER BY, and its
// parameters, with only the filters that are set, so that each is served
// by its index: ServerID (with or without ToolName) by
// the parked calls' (server_id, id, name) index, ConversationID by the
// conversation's calls. ToolName alone walks the tenant's parked calls:
// the engine names the tool's server with it. With ExpiresBefore the calls come by
// deadline, then id, from the index of parked deadlines (the cursor is the
// last call's id: the page goes on after its deadline and id); otherwise
// by id.
func pendingWhere(f agentd.PendingFilter) (string, []any) {
	where := `tenant_id = ? AND project_id = ? AND status = 'requires_confirmation'`
	args := []any{f.TenantID, f.ProjectID}
	add := func(cond string, v ...any) {
		where += ` AND ` + cond
		args = append(args, v...)
	}
	order := ` ORDER BY id`
	switch {
	case !f.ExpiresBefore.IsZero():
		add(`requires_approval_at < ?`, encBound(f.ExpiresBefore))
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

// ParkedCount implements agentd.Store.ParkedCount from the index on
// (status, requires_approval_at).
func (db *DB) ParkedCount(ctx context.Context) (int64, error) {
	var n int64
	err := db.readTx(ctx, func(tx *txn) error {
		return tx.QueryRow(ctx, parkedCountQuery).Scan(&n)
	})
	return n, err
}

// parkedCountQuery is ParkedCount's query; it
// counts index entries.
const parkedCountQuery = `SELECT COUNT(*) FROM tool_calls WHERE status = 'requires_confirmation'`

// DueToolCalls returns up to limit calls in requires_confirmation whose
// RequiresApprovalAt is at or before now, with decisions, earliest deadline
// first. Calls without a deadline are never due. A limit outside
// 1..agentd.MaxDuePage means agentd.MaxDuePage.
func (db *DB) DueToolCalls(ctx context.Context, now time.Time, limit int) ([]agentd.ToolCall, error) {
	n, err := encTime("now", now)
	if err != nil {
		return nil, err
	} else if n == nil {
		return nil, nil
	}
	return db.listToolCalls(ctx, `status = 'requires_confirmation' AND requires_approval_at <= ?
		ORDER BY requires_approval_at, rid LIMIT ?`, n, agentd.DuePage(limit))
}

// ToolCallsDueBetween returns the calls in requires_confirmation whose
// RequiresApprovalAt is after after and at or before until, with
// decisions, earliest deadline first: a range of the index on (status,
// requires_approval_at).
func (db *DB) ToolCallsDueBetween(ctx context.Context, after, until time.Time) ([]agentd.ToolCall, error) {
	switch {
	case after.IsZero() || until.IsZero():
		return nil, agentd.Errorf(agentd.EINVALID, "a deadline range needs both bounds")
	case until.Before(after):
		return nil, agentd.Errorf(agentd.EINVALID, "until %s is before after %s", until.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
	}
	return db.listToolCalls(ctx, `status = 'requires_confirmation' AND requires_approval_at > ? AND requires_approval_at <= ?
		ORDER BY requires_approval_at, rid`, encBound(after), encBound(until))
}

// NextDeadline returns the earliest RequiresApprovalAt after after (any,
// when after is zero) of the calls in requires_confirmation, in UTC, or the
// zero time when there is none.
// It reads the first entry of the index on (status, requires_approval_at).
func (db *DB) NextDeadline(ctx context.Context, after time.Time) (time.Time, error) {
	bound := encBound(after)
	if after.IsZero() {
		bound = int64(math.MinInt64)
	}
	var at *int64
	err := db.readTx(ctx, func(tx *txn) error {
		return tx.QueryRow(ctx, nextDeadlineQuery, bound).Scan(&at)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	} else if err != nil {
		return time.Time{}, err
	}
	return decTime(at), nil
}

// nextDeadlineQuery is NextDeadline's query; it
// is answered from the index.
const nextDeadlineQuery = `SELECT requires_approval_at FROM tool_calls
	WHERE status = 'requires_confirmation' AND requires_approval_at > ?
	ORDER BY requires_approval_at LIMIT 1`

// UpdateToolCall applies u if the call's status is in u.From, inserts
// u.Decision if set, and appends events, in one transaction, and returns
// the updated call with its decisions. Status is always set, Result and
// Error when non-empty, UpdatedAt to u.Now unless it is zero. A decision
// without ToolCallID gets u.ID, without ID a new UUID, without CreatedAt
// u.Now. ECONFLICT, with the current call, when the status does not match;
// ENOTFOUND when there is no such call; EINVALID when From is empty, a
// status or decision value is unknown, the decision names another call, or
// Result is not valid JSON. On any error nothing is written.
func (db *DB) UpdateToolCall(ctx context.Context, u agentd.CallUpdate, events []agentd.EventDraft) (*agentd.ToolCall, []agentd.Event, error) {
	p, err := prepareUpdate(u)
	if err != nil {
		return nil, nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, nil, err
	}
	var call *agentd.ToolCall
	var out []agentd.Event
	err = db.writeTx(ctx, func(tx *txn) error {
		if call, err = p.apply(ctx, db, tx); err != nil {
			return err
		}
		out, err = db.appendEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		if agentd.ErrorCode(err) == agentd.ECONFLICT && call != nil {
			return call, nil, err
		}
		return nil, nil, err
	}
	return call, out, nil
}

// reparkArgs checks u.Repark and returns its column values in the order
// of UpdateToolCall's statement; nil without a Repark. A call is parked
// again only into requires_confirmation, with a deadline and a digest.
func reparkArgs(u agentd.CallUpdate) ([]any, error) {
	r := u.Repark
	if r == nil {
		return nil, nil
	}
	switch {
	case u.Status != agentd.StatusRequiresConfirmation:
		return nil, agentd.Errorf(agentd.EINVALID, "a call is parked again only into requires_confirmation, not %q", u.Status)
	case r.ArgumentsSHA256 == "":
		return nil, agentd.Errorf(agentd.EINVALID, "a call parked again needs its arguments_sha256")
	case r.RequiresApprovalAt.IsZero():
		return nil, agentd.Errorf(agentd.EINVALID, "a call parked again needs its deadline")
	}
	args, err := encJSON("re-parked arguments", r.Arguments)
	if err != nil {
		return nil, err
	}
	deadline, err := encTime("requires_approval_at", r.RequiresApprovalAt)
	if err != nil {
		return nil, err
	}
	allowed, err := json.Marshal(r.AllowedDecisions)
	if err != nil {
		return nil, err
	}
	params, err := encJSON("re-parked params", r.Params)
	if err != nil {
		return nil, err
	}
	rule, err := agentd.EncodeApprovalColumn(r.Approval, nil)
	if err != nil {
		return nil, err
	}
	return []any{args, r.ArgumentsSHA256, r.Tier, r.Reason, r.Escalated, string(allowed), r.Diff, r.StateSHA256, deadline,
		r.Method, r.Endpoint, r.PathTemplate, params, rule}, nil
}

// UpdateToolCalls implements agentd.Store.UpdateToolCalls: every update
// of us as UpdateToolCall applies it, and events, in one transaction.
func (db *DB) UpdateToolCalls(ctx context.Context, us []agentd.CallUpdate, events []agentd.EventDraft) ([]agentd.ToolCall, []agentd.Event, error) {
	ps := make([]*preparedUpdate, len(us))
	seen := make(map[string]bool, len(us))
	for i, u := range us {
		p, err := prepareUpdate(u)
		if err != nil {
			return nil, nil, err
		} else if seen[u.ID] {
			return nil, nil, agentd.Errorf(agentd.EINVALID, "tool call %q is updated twice in one transaction", u.ID)
		}
		seen[u.ID] = true
		ps[i] = p
	}
	if err := checkEvents(events); err != nil {
		return nil, nil, err
	}
	calls := make([]agentd.ToolCall, len(us))
	var out []agentd.Event
	err := db.writeTx(ctx, func(tx *txn) error {
		for i, p := range ps {
			c, err := p.apply(ctx, db, tx)
			if err != nil {
				return err
			}
			calls[i] = *c
		}
		var err error
		out, err = db.appendEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return calls, out, nil
}

// preparedUpdate is a validated CallUpdate with its column values.
type preparedUpdate struct {
	u                    agentd.CallUpdate
	result, now          any
	editArgs, editParams any
	repark               []any // reparkArgs
	d                    *agentd.Decision
	decided, decidedArgs any
}

// prepareUpdate validates u and encodes its values (UpdateToolCall's
// EINVALID cases).
func prepareUpdate(u agentd.CallUpdate) (*preparedUpdate, error) {
	if u.ID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "tool call id is required")
	} else if len(u.From) == 0 {
		return nil, agentd.Errorf(agentd.EINVALID, "a tool call transition needs the statuses it may start from")
	} else if !validCallStatus(u.Status) {
		return nil, agentd.Errorf(agentd.EINVALID, "unknown tool call status %q", u.Status)
	}
	for _, s := range u.From {
		if !validCallStatus(s) {
			return nil, agentd.Errorf(agentd.EINVALID, "unknown tool call status %q", s)
		}
	}
	p := &preparedUpdate{u: u}
	var err error
	if p.result, err = encJSON("tool call result", u.Result); err != nil {
		return nil, err
	}
	if p.now, err = encTime("now", u.Now); err != nil {
		return nil, err
	}
	if u.Edit != nil {
		if p.editArgs, err = encJSON("edited arguments", u.Edit.Arguments); err != nil {
			return nil, err
		}
		if p.editParams, err = encJSON("edited params", u.Edit.Params); err != nil {
			return nil, err
		}
	}
	if p.repark, err = reparkArgs(u); err != nil {
		return nil, err
	}
	if u.Grant != nil && (u.Decision == nil || u.Decision.Decision != agentd.DecisionApproved) {
		return nil, agentd.Errorf(agentd.EINVALID, "a grant is made only by an approval")
	}
	if u.Decision == nil {
		return p, nil
	}
	cp := *u.Decision
	d := &cp
	if d.ToolCallID == "" {
		d.ToolCallID = u.ID
	} else if d.ToolCallID != u.ID {
		return nil, agentd.Errorf(agentd.EINVALID, "decision for tool call %q given for %q", d.ToolCallID, u.ID)
	}
	if d.ID == "" {
		d.ID = uuid.NewString()
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = u.Now
	}
	switch d.Decision {
	case agentd.DecisionApproved, agentd.DecisionDenied, agentd.DecisionExpired, agentd.DecisionCancelled:
	default:
		return nil, agentd.Errorf(agentd.EINVALID, "unknown decision %q", d.Decision)
	}
	if p.decided, err = encTime("decision created_at", d.CreatedAt); err != nil {
		return nil, err
	}
	if p.decidedArgs, err = encJSON("decision edited arguments", d.EditedArguments); err != nil {
		return nil, err
	}
	p.d = d
	return p, nil
}

// apply performs the update inside tx, with its decision and audit
// entries, and returns the call as updated; ECONFLICT with the current
// call when its status does not match.
func (p *preparedUpdate) apply(ctx context.Context, db *DB, tx *txn) (*agentd.ToolCall, error) {
	u, q := p.u, tx
	res, err := q.Exec(ctx, updateCallStatusQuery, u.Status, p.result, u.Error, u.Error, p.now, u.ID, strList(u.From), u.Card, u.Card)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		cur, err := getToolCall(ctx, q, u.ID)
		if err != nil {
			return nil, err
		}
		return cur, agentd.Errorf(agentd.ECONFLICT, "tool call %q is %s", u.ID, cur.Status)
	}
	if e := u.Edit; e != nil {
		if _, err := q.Exec(ctx, editCallQuery, p.editArgs, e.ArgumentsSHA256, e.Tier, e.Reason, e.Escalated, e.Method, e.Endpoint, e.PathTemplate, p.editParams, u.ID); err != nil {
			return nil, err
		}
	}
	if err := p.applyApprovals(ctx, q); err != nil {
		return nil, err
	}
	if err := p.applyGovernance(ctx, q); err != nil {
		return nil, err
	}
	if p.repark != nil {
		if _, err := q.Exec(ctx, reparkCallQuery, append(p.repark, u.ID)...); err != nil {
			return nil, err
		}
	}
	call, err := getToolCall(ctx, q, u.ID)
	if err != nil {
		return nil, err
	}
	if d := p.d; d != nil {
		// Queued, with the call's tier as it is now: written under the
		// feed lock, its row its audit entry (queueDecision). The call is
		// returned with it.
		tx.queueDecision(d, p.decided, p.decidedArgs, call)
		call.Decisions = append(call.Decisions, storedDecision(d, p.decided, p.decidedArgs))
	}
	if g := u.Grant; g != nil {
		if err := db.insertGrant(ctx, tx, g, agentd.Actor{KeyID: p.d.DecidedBy, Role: p.d.Role}); err != nil {
			return nil, err
		}
	}
	if u.Status == agentd.StatusRefused || (u.Status == agentd.StatusRequiresConfirmation && u.Approvals == nil && u.Governance == nil) {
		if err := db.auditCall(ctx, tx, call); err != nil {
			return nil, err
		}
	}
	return call, nil
}

// listToolCalls reads the calls matching where (which may end in ORDER BY)
// and their decisions from one snapshot.
func (db *DB) listToolCalls(ctx context.Context, where string, args ...any) ([]agentd.ToolCall, error) {
	var calls []agentd.ToolCall
	err := db.readTx(ctx, func(tx *txn) (err error) {
		calls, err = queryToolCalls(ctx, tx, where, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return calls, nil
}

// getToolCall reads one call with its decisions inside tx, or ENOTFOUND.
func getToolCall(ctx context.Context, tx *txn, id string) (*agentd.ToolCall, error) {
	calls, err := queryToolCalls(ctx, tx, callByID, id)
	if err != nil {
		return nil, err
	} else if len(calls) == 0 {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call %q not found", id)
	}
	return &calls[0], nil
}

// queryToolCalls reads the calls matching where and attaches their
// decisions in insertion order.
func queryToolCalls(ctx context.Context, tx *txn, where string, args ...any) ([]agentd.ToolCall, error) {
	rows, err := tx.Query(ctx, selectToolCalls+where, args...)
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

	index := make(map[string]int, len(calls))
	ids := make([]string, len(calls))
	for i, c := range calls {
		index[c.ID] = i
		ids[i] = c.ID
	}
	drows, err := tx.Query(ctx, decisionsOfCallsQuery, strList(ids))
	if err != nil {
		return nil, err
	}
	defer drows.Close()
	for drows.Next() {
		var d agentd.Decision
		var created *int64
		var edited *string
		if err := drows.Scan(&d.ID, &d.ToolCallID, &d.Decision, &d.Reason, &d.DecidedBy, &d.ArgumentsSHA256, &created,
			&edited, &d.EditedArgumentsSHA256, &d.Role, &d.Via); err != nil {
			return nil, err
		}
		d.CreatedAt = decTime(created)
		d.EditedArguments = decJSON(edited)
		c := &calls[index[d.ToolCallID]]
		c.Decisions = append(c.Decisions, d)
	}
	return calls, drows.Err()
}

func scanToolCall(s scanner) (*agentd.ToolCall, error) {
	var c agentd.ToolCall
	var arguments, allowed, result, params, approval *string
	var deadline, created, updated *int64
	if err := s.Scan(&c.ID, &c.TenantID, &c.ProjectID, &c.ConversationID, &c.RunID,
		&c.CorrelationID, &c.MessageID, &c.Step, &c.Index, &c.Name, &c.ServerID, &arguments, &c.ArgumentsSHA256, &c.Tier, &c.Reason,
		&c.Escalated, &c.Status, &c.Method, &c.Endpoint, &deadline, &allowed, &result, &c.Error,
		&created, &updated, &c.ConnectionName, &c.PathTemplate, &params, &c.Diff, &c.StateSHA256, &approval); err != nil {
		return nil, err
	}
	c.Arguments = decJSON(arguments)
	c.Params = decJSON(params)
	c.Result = decJSON(result)
	if allowed != nil {
		if err := json.Unmarshal([]byte(*allowed), &c.AllowedDecisions); err != nil {
			return nil, errors.New("allowed_decisions of tool call " + c.ID + ": " + err.Error())
		}
	}
	if deadline != nil {
		t := decTime(deadline)
		c.RequiresApprovalAt = &t
	}
	c.CreatedAt, c.UpdatedAt = decTime(created), decTime(updated)
	if approval != nil {
		if err := agentd.DecodeApprovalColumn(&c, *approval, true); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

func validCallStatus(s agentd.CallStatus) bool {
	switch s {
	case agentd.StatusRequiresConfirmation, agentd.StatusApproved, agentd.StatusExecuting, agentd.StatusCompleted,
		agentd.StatusFailed, agentd.StatusDenied, agentd.StatusExpired, agentd.StatusRefused, agentd.StatusCancelled:
		return true
	}
	return false
}

// applyApprovals records an approval of a call whose quorum it does not
// reach yet (CallUpdate.Approvals); ECONFLICT when the call's approvals
// are no longer Before many (another approval won the race).
func (p *preparedUpdate) applyApprovals(ctx context.Context, q *txn) error {
	a := p.u.Approvals
	if a == nil {
		return nil
	}
	after, err := agentd.EncodeApprovals(a.After)
	if err != nil {
		return err
	}
	res, err := q.Exec(ctx, approvalsQuery, after, p.u.ID, a.Before)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return agentd.Errorf(agentd.ECONFLICT, "tool call %q was approved by another key meanwhile", p.u.ID)
	}
	return nil
}

// applyGovernance records a reminder or an extension of a parked call
// (CallUpdate.Governance); ECONFLICT when its deadline or its reminders
// changed meanwhile.
func (p *preparedUpdate) applyGovernance(ctx context.Context, q *txn) error {
	g := p.u.Governance
	if g == nil {
		return nil
	}
	reminded, err := agentd.EncodeReminders(g.Reminded)
	if err != nil {
		return err
	}
	deadline, err := encTime("deadline", g.Deadline)
	if err != nil {
		return err
	}
	next, err := encTime("new deadline", g.NewDeadline)
	if err != nil {
		return err
	}
	if deadline == nil {
		return agentd.Errorf(agentd.EINVALID, "a governance update needs the call's deadline")
	}
	res, err := q.Exec(ctx, governanceQuery, reminded, g.Extended.Milliseconds(), next, p.u.ID, deadline, g.RemindedBefore)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return agentd.Errorf(agentd.ECONFLICT, "tool call %q was reminded, extended or parked again meanwhile", p.u.ID)
	}
	return nil
}
