package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"github.com/google/uuid"
	"time"

	"github.com/agentd-dev/agentd"
)

const runColumns = `id, conversation_id, tenant_id, project_id, correlation_id, status, step, reason,
	input_tokens, output_tokens, created_at, updated_at, stop_reason, requested_by, trace_parent, trace_caller`

// RunStore is the store's runs (agentd.RunStore).
type RunStore struct {
	b     Backend
	d     *Dialect
	calls *ToolCallStore
	// updateFrom is UpdateRun's statement with a condition on the status
	// (CallUpdate.From); runsToDriveWhere RunsToDrive's condition.
	updateFrom, runsToDriveWhere string
}

func newRunStore(b Backend, d *Dialect, calls *ToolCallStore) *RunStore {
	return &RunStore{b: b, d: d, calls: calls, updateFrom: updateRunSQL + ` AND ` + d.In("status") + returningRun,
		runsToDriveWhere: `(status = 'running' OR (status = 'waiting' AND parked = 0)) ORDER BY created_at, ` + d.runOrder}
}

// The run statements of every step (Store.Prepared).
const (
	activeRunQuery  = `SELECT id FROM runs WHERE conversation_id = ? AND status IN ('running', 'waiting') LIMIT 1`
	insertRunQuery  = `INSERT INTO runs (` + runColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	runByIDQuery    = `SELECT ` + runColumns + ` FROM runs WHERE id = ?`
	updateRunQuery  = updateRunSQL + returningRun
	recordStepQuery = `
			UPDATE runs SET step = ?, status = ?, reason = COALESCE(?, reason),
				parked = (SELECT COUNT(*) FROM tool_calls c
					WHERE c.run_id = runs.id AND c.step = ? AND c.status IN ` + heldStatuses + `) + ?,
				input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, stop_reason = ?,
				updated_at = COALESCE(?, updated_at)
			WHERE id = ? AND status IN ('running', 'waiting') AND step = ?
			RETURNING conversation_id, tenant_id, project_id`
)

// returningRun ends an update of one run that returns the run as updated.
const returningRun = ` RETURNING ` + runColumns

const updateRunSQL = `UPDATE runs SET status = ?, reason = ?, step = COALESCE(?, step),
			input_tokens = COALESCE(?, input_tokens), output_tokens = COALESCE(?, output_tokens),
			updated_at = COALESCE(?, updated_at)
			WHERE id = ?`

// StartRun inserts the run and its user message and appends events, in one
// transaction. The message is linked to the run. ENOTFOUND if the
// conversation does not exist; ERUNACTIVE if it already has a running or
// waiting run; EINVALID if the run's status is not running, an id is
// missing, or the message names another conversation or run; ECONFLICT if
// the run or message id exists. On any error nothing is written.
func (s *RunStore) StartRun(ctx context.Context, run *agentd.Run, msg *agentd.Message, events []agentd.EventDraft) ([]agentd.Event, error) {
	switch {
	case run == nil || run.ID == "":
		return nil, agentd.Errorf(agentd.EINVALID, "run id is required")
	case run.ConversationID == "":
		return nil, agentd.Errorf(agentd.EINVALID, "run conversation id is required")
	case run.Status != agentd.RunRunning:
		return nil, agentd.Errorf(agentd.EINVALID, "a run must start as %s, not %q", agentd.RunRunning, run.Status)
	case msg == nil || msg.ID == "":
		return nil, agentd.Errorf(agentd.EINVALID, "message id is required")
	case msg.ConversationID != "" && msg.ConversationID != run.ConversationID:
		return nil, agentd.Errorf(agentd.EINVALID, "message conversation %q differs from run conversation %q", msg.ConversationID, run.ConversationID)
	case msg.RunID != "" && msg.RunID != run.ID:
		return nil, agentd.Errorf(agentd.EINVALID, "message run %q differs from run %q", msg.RunID, run.ID)
	}
	runCreated, err := EncTime("run created_at", run.CreatedAt)
	if err != nil {
		return nil, err
	}
	runUpdated, err := EncTime("run updated_at", run.UpdatedAt)
	if err != nil {
		return nil, err
	}
	msgCreated, err := EncTime("message created_at", msg.CreatedAt)
	if err != nil {
		return nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, err
	}

	return writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		var active string
		err := tx.QueryRow(ctx, activeRunQuery, run.ConversationID).Scan(&active)
		if err == nil {
			return agentd.Errorf(agentd.ERUNACTIVE, "conversation %q already has active run %q", run.ConversationID, active)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, insertRunQuery,
			run.ID, run.ConversationID, run.TenantID, run.ProjectID, run.CorrelationID, run.Status, run.Step, run.Reason,
			run.Usage.InputTokens, run.Usage.OutputTokens, runCreated, runUpdated, run.StopReason, run.RequestedBy, run.TraceParent, run.TraceCaller); err != nil {
			if agentd.ErrorCode(s.b.Err(err)) == agentd.ENOTFOUND {
				// The run's one reference, its conversation, checked
				// by the insert itself.
				return agentd.Errorf(agentd.ENOTFOUND, "conversation %q not found", run.ConversationID)
			}
			return InsertErr(s.b.Err, err, "run", run.ID)
		}
		if _, err := tx.Exec(ctx, insertMessageQuery, msg.ID, run.ConversationID, run.ID, msg.Role, msg.Content, msgCreated); err != nil {
			return InsertErr(s.b.Err, err, "message", msg.ID)
		}
		return nil
	})
}

// Run returns a run, or ENOTFOUND.
func (s *RunStore) Run(ctx context.Context, id string) (*agentd.Run, error) {
	var run *agentd.Run
	err := s.b.ReadOne(ctx, func(q Q) (err error) {
		run, err = getRun(ctx, q, id)
		return err
	})
	return run, err
}

// UpdateRun applies u if the run's status is in u.From (any status when
// From is empty) and appends events, in one transaction. Status and Reason
// are always set, Step and Usage when non-nil, UpdatedAt to u.Now unless it
// is zero. It returns the updated run. ECONFLICT, with the current run, when
// the status does not match; ENOTFOUND when there is no such run;
// ERUNACTIVE when u would make the run active while its conversation has
// another active run; EINVALID for an unknown status. On any error nothing
// is written.
func (s *RunStore) UpdateRun(ctx context.Context, u agentd.RunUpdate, events []agentd.EventDraft) (*agentd.Run, []agentd.Event, error) {
	if u.ID == "" {
		return nil, nil, agentd.Errorf(agentd.EINVALID, "run id is required")
	} else if !validRunStatus(u.Status) {
		return nil, nil, agentd.Errorf(agentd.EINVALID, "unknown run status %q", u.Status)
	}
	for _, s := range u.From {
		if !validRunStatus(s) {
			return nil, nil, agentd.Errorf(agentd.EINVALID, "unknown run status %q", s)
		}
	}
	now, err := EncTime("now", u.Now)
	if err != nil {
		return nil, nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, nil, err
	}
	var step, input, output any
	if u.Step != nil {
		step = *u.Step
	}
	if u.Usage != nil {
		input, output = u.Usage.InputTokens, u.Usage.OutputTokens
	}

	var run *agentd.Run
	out, err := writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		query, args := updateRunQuery, []any{u.Status, u.Reason, step, input, output, now, u.ID}
		if len(u.From) > 0 {
			query, args = s.updateFrom, append(args, listOf(s.d, u.From))
		}
		// The updated run comes back from the update itself; only an
		// update that matched no row reads the run, to say why.
		cur, err := scanRun(tx.QueryRow(ctx, query, args...))
		switch {
		case err == nil && u.Step != nil:
			run = cur
			return countParked(ctx, tx, u.ID) // another step: its own parked calls
		case err == nil:
			run = cur
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			if agentd.ErrorCode(s.b.Err(err)) == agentd.ECONFLICT {
				// The only unique index an update can violate: runs_one_active.
				return &agentd.Error{Code: agentd.ERUNACTIVE, Message: "the conversation already has an active run", Detail: err}
			}
			return err
		}
		if run, err = getRun(ctx, tx, u.ID); err != nil {
			return err
		}
		return agentd.Errorf(agentd.ECONFLICT, "run %q is %s", u.ID, run.Status)
	})
	if err != nil {
		if agentd.ErrorCode(err) == agentd.ECONFLICT && run != nil {
			return run, nil, err
		}
		return nil, nil, err
	}
	return run, out, nil
}

// RunsToDrive implements agentd.RunStore.RunsToDrive, oldest first. The query
// reads one partial index, runs_to_drive (SQLite's migration 0026,
// PostgreSQL's 0011): the running runs and the waiting runs whose count of
// parked calls at their step (runs.parked) is zero. It reads no run that
// waits for a decision, no finished run and no call row: its cost follows
// the runs it returns, not the number of parked calls.
func (s *RunStore) RunsToDrive(ctx context.Context) ([]agentd.Run, error) {
	return s.listRuns(ctx, s.runsToDriveWhere)
}

// listRuns reads the runs matching where (which may end in ORDER BY).
func (s *RunStore) listRuns(ctx context.Context, where string) ([]agentd.Run, error) {
	var runs []agentd.Run
	err := s.b.Read(ctx, func(tx Q) (err error) {
		runs, err = queryAll(ctx, tx, scanRun, `SELECT `+runColumns+` FROM runs WHERE `+where)
		return err
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// countParkedQuery sets a run's count of parked calls at its current step
// (runs.parked, which RunsToDrive reads) from its calls.
const countParkedQuery = `UPDATE runs SET parked = (SELECT COUNT(*) FROM tool_calls c
	WHERE c.run_id = runs.id AND c.step = runs.step AND c.status IN ` + heldStatuses + `) WHERE id = ?`

// heldStatuses are the statuses runs.parked counts (agentd.CallStatus.Held):
// a call waiting for a decision or for a person's input. A run waiting on
// an input is held like one waiting on a decision: RunsToDrive leaves it.
const heldStatuses = `('requires_confirmation', 'requires_input')`

// countParked sets runID's count of parked calls inside tx: every write
// that parks a call, takes one out of requires_confirmation or moves a run
// to another step keeps runs.parked true in its own transaction (RecordStep
// and CancelRun set it in their update of the run).
func countParked(ctx context.Context, tx Tx, runID string) error {
	_, err := tx.Exec(ctx, countParkedQuery, runID)
	return err
}

// parkedAmong is the number of calls held among calls.
func parkedAmong(calls []*agentd.ToolCall) int {
	n := 0
	for _, c := range calls {
		if c != nil && c.Status.Held() {
			n++
		}
	}
	return n
}

// getRun reads one run inside tx, or ENOTFOUND.
func getRun(ctx context.Context, tx Q, id string) (*agentd.Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, runByIDQuery, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "run %q not found", id)
	}
	return r, err
}

func scanRun(s scanner) (*agentd.Run, error) {
	var r agentd.Run
	var created, updated sql.NullInt64
	if err := s.Scan(&r.ID, &r.ConversationID, &r.TenantID, &r.ProjectID, &r.CorrelationID, &r.Status, &r.Step, &r.Reason,
		&r.Usage.InputTokens, &r.Usage.OutputTokens, &created, &updated, &r.StopReason, &r.RequestedBy, &r.TraceParent, &r.TraceCaller); err != nil {
		return nil, err
	}
	r.CreatedAt, r.UpdatedAt = decTime(created), decTime(updated)
	return &r, nil
}

func validRunStatus(s agentd.RunStatus) bool {
	switch s {
	case agentd.RunRunning, agentd.RunWaiting, agentd.RunCompleted, agentd.RunFailed, agentd.RunCancelled:
		return true
	}
	return false
}

// RecordStep records one model step of a run in one transaction: if the run
// is running or waiting at step r.Step-1 it inserts r.Message (when
// non-nil) and r.Calls, sets the run's Step to r.Step and its status to
// running (to r.End with reason r.EndReason when set: the step ends the
// run), adds r.Usage to its usage, sets UpdatedAt to r.Now unless it is
// zero, and appends events. The message and calls belong to the run's
// conversation and to the run: empty ConversationID and RunID fields are
// stored as the run's. ENOTFOUND when there is no such run; ECONFLICT when
// the run is finished or at another step; EINVALID for a message or call
// that names another run or conversation, or that CreateToolCalls or
// AddMessage would refuse, and for an End that is not completed or failed
// or that comes with calls. On any error nothing is written.
func (s *RunStore) RecordStep(ctx context.Context, r agentd.StepRecord, events []agentd.EventDraft) ([]agentd.Event, error) {
	now, msgCreated, err := checkStep(r, events)
	if err != nil {
		return nil, err
	}
	return writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		// The update returns the run's conversation and tenant (the
		// step's inputs are stored with them); only one that matched no
		// row reads the run, to say why.
		run := &agentd.Run{ID: r.RunID}
		status, reason := agentd.RunRunning, any(nil) // a step that goes on keeps the run's reason
		if r.End != "" {
			status, reason = r.End, r.EndReason
		}
		err := tx.QueryRow(ctx, recordStepQuery, r.Step, status, reason, r.Step, parkedAmong(r.Calls), r.Usage.InputTokens, r.Usage.OutputTokens, r.StopReason, now, r.RunID, r.Step-1).
			Scan(&run.ConversationID, &run.TenantID, &run.ProjectID)
		if errors.Is(err, sql.ErrNoRows) {
			if run, err = getRun(ctx, tx, r.RunID); err != nil {
				return err
			}
			return agentd.Errorf(agentd.ECONFLICT, "run %q is %s at step %d, cannot record step %d", r.RunID, run.Status, run.Step, r.Step)
		} else if err != nil {
			return err
		}

		if m := r.Message; m != nil {
			if m.ConversationID != "" && m.ConversationID != run.ConversationID {
				return agentd.Errorf(agentd.EINVALID, "message conversation %q differs from run conversation %q", m.ConversationID, run.ConversationID)
			}
			if _, err := tx.Exec(ctx, insertMessageQuery, m.ID, run.ConversationID, run.ID, m.Role, m.Content, msgCreated); err != nil {
				return InsertErr(s.b.Err, err, "message", m.ID)
			}
		}
		for _, c := range r.Calls {
			cp := *c
			if cp.ConversationID == "" {
				cp.ConversationID = run.ConversationID
			} else if cp.ConversationID != run.ConversationID {
				return agentd.Errorf(agentd.EINVALID, "tool call %q: conversation %q differs from run conversation %q", c.ID, c.ConversationID, run.ConversationID)
			}
			cp.RunID = run.ID
			args, err := toolCallArgs(&cp)
			if err != nil {
				return err
			}
			if err := s.calls.insert(ctx, tx, []*agentd.ToolCall{&cp}, [][]any{args}); err != nil {
				return err
			}
		}
		return insertInputs(ctx, tx, s.b, r.Inputs, r.Calls, run)
	})
}

// checkStep validates what RecordStep can check before its transaction:
// the run id, the times, the message's id and run, the calls' runs and
// arguments, and the events. It returns r.Now and the message's
// created_at encoded for the database (nil when zero, or without a
// message).
func checkStep(r agentd.StepRecord, events []agentd.EventDraft) (now, msgCreated any, err error) {
	if r.RunID == "" {
		return nil, nil, agentd.Errorf(agentd.EINVALID, "run id is required")
	}
	switch {
	case r.End != "" && r.End != agentd.RunCompleted && r.End != agentd.RunFailed:
		return nil, nil, agentd.Errorf(agentd.EINVALID, "a step ends its run completed or failed, not %q", r.End)
	case r.End != "" && len(r.Calls) > 0:
		return nil, nil, agentd.Errorf(agentd.EINVALID, "a step that ends its run makes no calls")
	}
	if now, err = EncTime("now", r.Now); err != nil {
		return nil, nil, err
	}
	if m := r.Message; m != nil {
		if m.ID == "" {
			return nil, nil, agentd.Errorf(agentd.EINVALID, "message id is required")
		} else if m.RunID != "" && m.RunID != r.RunID {
			return nil, nil, agentd.Errorf(agentd.EINVALID, "message run %q differs from step run %q", m.RunID, r.RunID)
		}
		if msgCreated, err = EncTime("message created_at", m.CreatedAt); err != nil {
			return nil, nil, err
		}
	}
	for _, c := range r.Calls {
		if c != nil && c.RunID != "" && c.RunID != r.RunID {
			return nil, nil, agentd.Errorf(agentd.EINVALID, "tool call %q: run %q differs from step run %q", c.ID, c.RunID, r.RunID)
		}
		if _, err := toolCallArgs(c); err != nil {
			return nil, nil, err
		}
	}
	if err := checkEvents(events); err != nil {
		return nil, nil, err
	}
	return now, msgCreated, nil
}

// CancelRun implements agentd.RunStore.CancelRun.
func (s *RunStore) CancelRun(ctx context.Context, runID, reason string, by agentd.Actor, now time.Time,
	plan func(run *agentd.Run, cancelled []agentd.ToolCall) []agentd.EventDraft) (*agentd.Run, []agentd.Event, error) {
	if runID == "" {
		return nil, nil, agentd.Errorf(agentd.EINVALID, "run id is required")
	}
	at, err := EncTime("now", now)
	if err != nil {
		return nil, nil, err
	}
	var run *agentd.Run
	var out []agentd.Event
	err = s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		res, err := tx.Exec(ctx, `
			UPDATE runs SET status = 'cancelled', parked = 0, reason = ?, updated_at = COALESCE(?, updated_at)
			WHERE id = ? AND status IN ('running', 'waiting')`, reason, at, runID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if run, err = getRun(ctx, tx, runID); err != nil {
			return err
		}
		if n == 0 {
			return agentd.Errorf(agentd.ECONFLICT, "run %q is %s", runID, run.Status)
		}
		calls, err := s.calls.selectCalls(ctx, tx, `run_id = ? AND status IN ('requires_confirmation', 'requires_input', 'approved') ORDER BY step, idx`, runID)
		if err != nil {
			return err
		}
		for i, c := range calls {
			if _, err := tx.Exec(ctx, `UPDATE tool_calls SET status = 'cancelled', error = ?, updated_at = COALESCE(?, updated_at) WHERE id = ?`,
				reason, at, c.ID); err != nil {
				return err
			}
			if c.Status == agentd.StatusRequiresInput {
				if calls[i].Inputs, err = cancelInputs(ctx, tx, c, agentd.InputReasonRunCancelled, at); err != nil {
					return err
				}
				continue
			}
			if c.Status != agentd.StatusRequiresConfirmation {
				continue
			}
			d := &agentd.Decision{ID: uuid.NewString(), ToolCallID: c.ID, Decision: agentd.DecisionCancelled, Reason: reason,
				DecidedBy: by.KeyID, Role: by.Role, Via: agentd.ViaCancel, ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now}
			// Recorded as Decide records it: its row is its audit entry.
			if err := tx.Decide(ctx, d, at, nil, &c); err != nil {
				return err
			}
		}
		var drafts []agentd.EventDraft
		if plan != nil {
			drafts = plan(run, calls)
		}
		if err := checkEvents(drafts); err != nil {
			return err
		}
		out, err = AppendEventsIn(ctx, tx, drafts)
		return err
	})
	if err != nil {
		if agentd.ErrorCode(err) == agentd.ECONFLICT && run != nil {
			return run, nil, err
		}
		return nil, nil, err
	}
	return run, out, nil
}
