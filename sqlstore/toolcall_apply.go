package sqlstore

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/agentd-dev/agentd"
)

// apply performs the update inside tx, with its decision and audit
// entries, and returns the call as updated; ECONFLICT with the current
// call when its status does not match.
func (s *ToolCallStore) apply(ctx context.Context, tx Tx, p *preparedUpdate) (*agentd.ToolCall, error) {
	u := p.u
	res, err := tx.Exec(ctx, s.q.update, u.Status, p.result, u.Error, u.Error, p.now, u.ID, listOf(s.d, u.From), u.CardRevision, u.CardRevision)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		cur, err := s.get(ctx, tx, u.ID)
		if err != nil {
			return nil, err
		}
		return cur, agentd.Errorf(agentd.ECONFLICT, "tool call %q is %s", u.ID, cur.Status)
	}
	if e := u.Edit; e != nil {
		if _, err := tx.Exec(ctx, s.q.edit, p.editArgs, e.ArgumentsSHA256, e.Tier, e.Reason, e.Escalated, e.Method, e.Endpoint, e.PathTemplate, p.editParams, u.ID); err != nil {
			return nil, err
		}
	}
	if err := s.applyApprovals(ctx, tx, p); err != nil {
		return nil, err
	}
	if err := s.applyGovernance(ctx, tx, p); err != nil {
		return nil, err
	}
	if p.repark != nil {
		if _, err := tx.Exec(ctx, s.q.repark, append(p.repark, u.ID)...); err != nil {
			return nil, err
		}
	}
	call, err := s.get(ctx, tx, u.ID)
	if err != nil {
		return nil, err
	}
	if call.RunID != "" && parksOrUnparks(u) {
		if err := countParked(ctx, tx, call.RunID); err != nil {
			return nil, err
		}
	}
	if d := p.d; d != nil {
		// Recorded with the call's tier as it is now; the call is
		// returned with it.
		if err := tx.Decide(ctx, d, p.decided, p.decidedArgs, call); err != nil {
			return nil, err
		}
		call.Decisions = append(call.Decisions, storedDecision(d, p.decided, p.decidedArgs))
	}
	if g := u.Grant; g != nil {
		if err := s.grants.insert(ctx, tx, g, agentd.Actor{KeyID: p.d.DecidedBy, Role: p.d.Role}); err != nil {
			return nil, err
		}
	}
	if u.Status == agentd.StatusRefused || (u.Status == agentd.StatusRequiresConfirmation && u.Approvals == nil && u.Governance == nil) {
		if err := auditCall(ctx, tx, call); err != nil {
			return nil, err
		}
	}
	return call, nil
}

// parksOrUnparks reports whether u can move a call into or out of a held
// status (agentd.CallStatus.Held: requires_confirmation, requires_input),
// which changes its run's count of parked calls (runs.parked): not when
// it keeps a call in the one status it was in (an approval short of its
// quorum, a reminder) or involves no held status at all.
func parksOrUnparks(u agentd.CallUpdate) bool {
	if u.Status.Held() {
		return len(u.From) != 1 || u.From[0] != u.Status
	}
	return slices.ContainsFunc(u.From, agentd.CallStatus.Held)
}

// storedDecision is d as a read of its row returns it: at and edited are
// its encoded time and edited arguments; what a row does not hold (the
// answer of a quorum's approval) is left out.
func storedDecision(d *agentd.Decision, at, edited any) agentd.Decision {
	out := *d
	out.CreatedAt, out.EditedArguments = time.Time{}, nil
	out.Status, out.Approvals, out.Quorum = "", nil, 0
	if n, ok := at.(int64); ok {
		out.CreatedAt = decTime(sql.NullInt64{Int64: n, Valid: true})
	}
	if s, ok := edited.(string); ok {
		out.EditedArguments = decJSON(sql.NullString{String: s, Valid: true})
	}
	return out
}

// applyApprovals records an approval of a call whose quorum it does not
// reach yet (CallUpdate.Approvals); ECONFLICT when the call's approvals
// are no longer Before many (another approval won the race).
func (s *ToolCallStore) applyApprovals(ctx context.Context, tx Tx, p *preparedUpdate) error {
	a := p.u.Approvals
	if a == nil {
		return nil
	}
	after, err := encodeApprovals(a.After)
	if err != nil {
		return err
	}
	res, err := tx.Exec(ctx, s.q.approvals, after, p.u.ID, a.Before)
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
func (s *ToolCallStore) applyGovernance(ctx context.Context, tx Tx, p *preparedUpdate) error {
	g := p.u.Governance
	if g == nil {
		return nil
	}
	reminded, err := encodeReminders(g.Reminded)
	if err != nil {
		return err
	}
	deadline, err := EncTime("deadline", g.Deadline)
	if err != nil {
		return err
	}
	next, err := EncTime("new deadline", g.NewDeadline)
	if err != nil {
		return err
	}
	if deadline == nil {
		return agentd.Errorf(agentd.EINVALID, "a governance update needs the call's deadline")
	}
	res, err := tx.Exec(ctx, s.q.governance, reminded, g.Extended.Milliseconds(), next, p.u.ID, deadline, g.RemindedBefore)
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

// callEntry is an audit entry about call c, of kind, at c's UpdatedAt.
func callEntry(kind string, c *agentd.ToolCall) *agentd.AuditEntry {
	return &agentd.AuditEntry{Kind: kind, TenantID: c.TenantID, ProjectID: c.ProjectID, ConversationID: c.ConversationID,
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, Tier: c.Tier, Escalated: c.Escalated,
		ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: c.UpdatedAt}
}

// auditCall records that call c, as now stored, was refused or parked
// escalated; any other state records nothing.
func auditCall(ctx context.Context, tx Tx, c *agentd.ToolCall) error {
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
	e.KeyID = agentd.SystemKeyID
	return tx.Audit(ctx, e)
}
