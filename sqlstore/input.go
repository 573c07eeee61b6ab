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

// InputStore is the store's input requests (agentd.InputStore, SPEC §12):
// inserted with their call's park (RunStore.RecordStep), resolved once by
// a conditional update of their status and their call's.
type InputStore struct{ b Backend }

const inputColumns = `id, tenant_id, project_id, conversation_id, run_id, tool_call_id, tool_name, server_id,
	status, source, key, round, mode, message, schema, answerers, expires_at, created_at,
	action, content, answered_by, answered_at, via, reason`

const insertInputQuery = `INSERT INTO inputs (` + inputColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', NULL, '', NULL, '', '')`

// The two conditional updates of a resolution: the input out of pending,
// its call out of requires_input.
const (
	resolveInputQuery = `UPDATE inputs SET status = ?, action = ?, content = ?, answered_by = ?, answered_at = ?, via = ?, reason = ?
		WHERE id = ? AND status = 'pending'`
	resolveInputCallQuery = `UPDATE tool_calls SET status = ?, result = ?, error = ?, updated_at = COALESCE(?, updated_at)
		WHERE id = ? AND status = 'requires_input'`
)

// checkInput validates in before it is inserted as the input of call.
func checkInput(in *agentd.Input, call *agentd.ToolCall) error {
	switch {
	case in == nil || in.ID == "":
		return agentd.Errorf(agentd.EINVALID, "input id is required")
	case call == nil:
		return agentd.Errorf(agentd.EINVALID, "input %q: its call %q is not of the step", in.ID, in.ToolCallID)
	case call.Status != agentd.StatusRequiresInput:
		return agentd.Errorf(agentd.EINVALID, "input %q: its call %q is %s, not %s", in.ID, call.ID, call.Status, agentd.StatusRequiresInput)
	case in.Status != agentd.InputPending:
		return agentd.Errorf(agentd.EINVALID, "input %q: an input is created pending, not %q", in.ID, in.Status)
	case in.ExpiresAt.IsZero() || in.CreatedAt.IsZero():
		return agentd.Errorf(agentd.EINVALID, "input %q: created_at and expires_at are required", in.ID)
	}
	return nil
}

// insertInputs writes the inputs of a step's calls inside tx; each input
// takes its call's tenant, project, conversation and run.
func insertInputs(ctx context.Context, tx Tx, b Backend, ins []*agentd.Input, calls []*agentd.ToolCall, run *agentd.Run) error {
	byID := make(map[string]*agentd.ToolCall, len(calls))
	for _, c := range calls {
		byID[c.ID] = c
	}
	for _, in := range ins {
		if err := checkInput(in, byID[in.ToolCallID]); err != nil {
			return err
		}
		schema, err := EncJSON("input schema", in.Schema)
		if err != nil {
			return err
		}
		answerers, _ := json.Marshal(in.Answerers)
		expires, err := EncTime("input expires_at", in.ExpiresAt)
		if err != nil {
			return err
		}
		created, err := EncTime("input created_at", in.CreatedAt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insertInputQuery, in.ID, run.TenantID, run.ProjectID, run.ConversationID, run.ID,
			in.ToolCallID, in.ToolName, in.ServerID, in.Status, in.Source, in.Key, in.Round, in.Mode, in.Message,
			schema, string(answerers), expires, created); err != nil {
			return InsertErr(b.Err, err, "input", in.ID)
		}
	}
	return nil
}

// Input implements agentd.InputStore.Input.
func (s *InputStore) Input(ctx context.Context, id string) (*agentd.Input, error) {
	var in *agentd.Input
	err := s.b.ReadOne(ctx, func(q Q) (err error) {
		in, err = getInput(ctx, q, id)
		return err
	})
	return in, err
}

func getInput(ctx context.Context, q Q, id string) (*agentd.Input, error) {
	in, err := scanInput(q.QueryRow(ctx, `SELECT `+inputColumns+` FROM inputs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "input %q not found", id)
	}
	return in, err
}

// Inputs implements agentd.InputStore.Inputs: one range of inputs_by_tenant
// (inputs_pending with status pending). A limit outside 1..1000 means 1000.
func (s *InputStore) Inputs(ctx context.Context, f agentd.InputFilter) ([]agentd.Input, error) {
	if f.TenantID == "" || f.ProjectID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "inputs are listed per tenant and project")
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	q, args := inputsQuery(f)
	var out []agentd.Input
	err := s.b.Read(ctx, func(tx Q) (err error) {
		out, err = queryInputs(ctx, tx, q, append(args, limit)...)
		return err
	})
	return out, err
}

// inputsQuery is Inputs' statement for f and its arguments but for the
// last, the limit. Pending is written as a literal, so that the planner
// reads the partial index inputs_pending.
func inputsQuery(f agentd.InputFilter) (string, []any) {
	q := `SELECT ` + inputColumns + ` FROM inputs WHERE tenant_id = ? AND project_id = ? AND id > ?`
	args := []any{f.TenantID, f.ProjectID, f.After}
	switch f.Status {
	case "":
	case agentd.InputPending:
		q += ` AND status = 'pending'`
	default:
		q += ` AND status = ?`
		args = append(args, f.Status)
	}
	if f.ConversationID != "" {
		q += ` AND conversation_id = ?`
		args = append(args, f.ConversationID)
	}
	if f.ToolName != "" {
		q += ` AND tool_name = ?`
		args = append(args, f.ToolName)
	}
	if f.ToolCallID != "" {
		q += ` AND tool_call_id = ?`
		args = append(args, f.ToolCallID)
	}
	if f.CreatedBy != "" {
		q += ` AND conversation_id IN (SELECT id FROM conversations WHERE tenant_id = ? AND project_id = ? AND created_by = ?)`
		args = append(args, f.TenantID, f.ProjectID, f.CreatedBy)
	}
	return q + ` ORDER BY id LIMIT ?`, args
}

// ResolveInput implements agentd.InputStore.ResolveInput.
func (s *InputStore) ResolveInput(ctx context.Context, r agentd.InputResolution, events []agentd.EventDraft) (*agentd.Input, []agentd.Event, error) {
	if err := checkResolution(r, events); err != nil {
		return nil, nil, err
	}
	content, _ := EncJSON("input content", r.Content)
	result, _ := EncJSON("call result", r.Result)
	at, _ := EncTime("now", r.At)
	var in *agentd.Input
	out, err := writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		in = nil
		res, err := tx.Exec(ctx, resolveInputQuery, r.Status, r.Action, content, r.AnsweredBy, at, r.Via, r.Reason, r.InputID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if in, err = getInput(ctx, tx, r.InputID); err != nil {
			return err
		} else if n == 0 {
			return agentd.Errorf(agentd.ECONFLICT, "input %q is %s", r.InputID, in.Status)
		}
		errText := ""
		if r.CallStatus != agentd.StatusCompleted {
			errText = r.Reason
		}
		if res, err = tx.Exec(ctx, resolveInputCallQuery, r.CallStatus, result, errText, at, in.ToolCallID); err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return agentd.Errorf(agentd.ECONFLICT, "input %q: its call %q no longer waits on it", r.InputID, in.ToolCallID)
		}
		return countParked(ctx, tx, in.RunID)
	})
	if err != nil {
		if agentd.ErrorCode(err) == agentd.ECONFLICT && in != nil {
			return in, nil, err
		}
		return nil, nil, err
	}
	return in, out, nil
}

// checkResolution validates what ResolveInput can check before its
// transaction.
func checkResolution(r agentd.InputResolution, events []agentd.EventDraft) error {
	switch {
	case r.InputID == "":
		return agentd.Errorf(agentd.EINVALID, "input id is required")
	case r.Status == agentd.InputPending || r.Status == "":
		return agentd.Errorf(agentd.EINVALID, "an input is resolved out of pending, not into %q", r.Status)
	case !r.CallStatus.Terminal():
		return agentd.Errorf(agentd.EINVALID, "an input's call ends resolved, not %q", r.CallStatus)
	}
	if _, err := EncJSON("input content", r.Content); err != nil {
		return err
	}
	if _, err := EncJSON("call result", r.Result); err != nil {
		return err
	}
	if _, err := EncTime("now", r.At); err != nil {
		return err
	}
	return checkEvents(events)
}

// cancelInputs cancels the pending inputs of call c inside tx (its run was
// cancelled) and returns them as they were.
func cancelInputs(ctx context.Context, tx Tx, c agentd.ToolCall, reason string, at any) ([]agentd.Input, error) {
	ins, err := queryInputs(ctx, tx, `SELECT `+inputColumns+` FROM inputs WHERE tool_call_id = ? AND status = 'pending' ORDER BY id`, c.ID)
	if err != nil || len(ins) == 0 {
		return nil, err
	}
	_, err = tx.Exec(ctx, `UPDATE inputs SET status = 'cancelled', reason = ?, via = ?, answered_at = ?
		WHERE tool_call_id = ? AND status = 'pending'`, reason, agentd.ViaCancel, at, c.ID)
	return ins, err
}

func queryInputs(ctx context.Context, q Q, query string, args ...any) ([]agentd.Input, error) {
	return queryAll(ctx, q, scanInput, query, args...)
}

func scanInput(s scanner) (*agentd.Input, error) {
	var in agentd.Input
	var schema, content sql.NullString
	var answerers string
	var expires, created, answered sql.NullInt64
	if err := s.Scan(&in.ID, &in.TenantID, &in.ProjectID, &in.ConversationID, &in.RunID, &in.ToolCallID, &in.ToolName,
		&in.ServerID, &in.Status, &in.Source, &in.Key, &in.Round, &in.Mode, &in.Message, &schema, &answerers,
		&expires, &created, &in.Action, &content, &in.AnsweredBy, &answered, &in.Via, &in.Reason); err != nil {
		return nil, err
	}
	in.Schema, in.Content = decJSON(schema), decJSON(content)
	if err := json.Unmarshal([]byte(answerers), &in.Answerers); err != nil {
		return nil, err
	}
	in.ExpiresAt, in.CreatedAt = decTime(expires), decTime(created)
	if answered.Valid {
		t := decTime(answered)
		in.AnsweredAt = &t
	}
	return &in, nil
}

// DueInputs implements agentd.InputStore.DueInputs: a range of inputs_due.
func (s *InputStore) DueInputs(ctx context.Context, now time.Time, limit int) ([]agentd.Input, error) {
	n, err := EncTime("now", now)
	if err != nil || n == nil {
		return nil, err
	}
	var out []agentd.Input
	err = s.b.Read(ctx, func(q Q) (err error) {
		out, err = queryInputs(ctx, q, dueInputsQuery, n, agentd.DuePage(limit))
		return err
	})
	return out, err
}

// The deadline timer's reads of inputs_due: the page of due inputs, and
// the earliest pending deadline (after a bound, so that it is a search).
const (
	dueInputsQuery = `SELECT ` + inputColumns + ` FROM inputs WHERE status = 'pending' AND expires_at <= ?
		ORDER BY expires_at, id LIMIT ?`
	nextInputDeadlineQuery = `SELECT expires_at FROM inputs WHERE status = 'pending' AND expires_at > ? ORDER BY expires_at LIMIT 1`
)

// NextInputDeadline implements agentd.InputStore.NextInputDeadline: the
// first entry of inputs_due.
func (s *InputStore) NextInputDeadline(ctx context.Context) (time.Time, error) {
	var at sql.NullInt64
	err := s.b.ReadOne(ctx, func(q Q) error {
		return q.QueryRow(ctx, nextInputDeadlineQuery, int64(math.MinInt64)).Scan(&at)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	} else if err != nil {
		return time.Time{}, err
	}
	return decTime(at), nil
}
