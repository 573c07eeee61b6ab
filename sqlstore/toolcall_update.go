package sqlstore

import (
	"context"
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/google/uuid"
)

// CreateToolCalls inserts calls and appends events, in one transaction.
// EINVALID if a call has no id, an unknown status, JSON fields that are not
// valid JSON, or decisions (decisions are added only by UpdateToolCall);
// ENOTFOUND if a call's conversation or run does not exist; ECONFLICT if an
// id exists. An empty ConversationID or RunID is stored as none. On any
// error nothing is written.
func (s *ToolCallStore) CreateToolCalls(ctx context.Context, calls []*agentd.ToolCall, events []agentd.EventDraft) ([]agentd.Event, error) {
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
	return writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		if err := s.insert(ctx, tx, calls, rows); err != nil {
			return err
		}
		counted := map[string]bool{}
		for _, c := range calls {
			if c.Status.Held() && c.RunID != "" && !counted[c.RunID] {
				counted[c.RunID] = true
				if err := countParked(ctx, tx, c.RunID); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// insert inserts calls, whose column values are rows (toolCallArgs),
// inside tx, with the audit entries of the refused and the escalated.
func (s *ToolCallStore) insert(ctx context.Context, tx Tx, calls []*agentd.ToolCall, rows [][]any) error {
	for i, args := range rows {
		if _, err := tx.Exec(ctx, s.q.insert, args...); err != nil {
			return InsertErr(s.b.Err, err, "tool call", calls[i].ID)
		}
		if err := auditCall(ctx, tx, calls[i]); err != nil {
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
	arguments, err := EncJSON("tool call arguments", c.Arguments)
	if err != nil {
		return nil, err
	}
	result, err := EncJSON("tool call result", c.Result)
	if err != nil {
		return nil, err
	}
	params, err := EncJSON("tool call params", c.Params)
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
		if deadline, err = EncTime("requires_approval_at", *c.RequiresApprovalAt); err != nil {
			return nil, err
		}
	}
	created, err := EncTime("tool call created_at", c.CreatedAt)
	if err != nil {
		return nil, err
	}
	updated, err := EncTime("tool call updated_at", c.UpdatedAt)
	if err != nil {
		return nil, err
	}
	approval, err := encodeCallApproval(c)
	if err != nil {
		return nil, err
	}
	return []any{c.ID, c.TenantID, c.ProjectID, nullString(c.ConversationID), nullString(c.RunID),
		c.CorrelationID, c.MessageID, c.Step, c.Index, c.Name, c.ServerID, arguments, c.ArgumentsSHA256, c.Tier, c.Reason,
		c.Escalated, c.Status, c.Method, c.Endpoint, deadline, allowed, result, c.Error,
		created, updated, c.ConnectionName, c.PathTemplate, params, c.Diff, c.StateSHA256, approval}, nil
}

// UpdateToolCall applies u if the call's status is in u.From, inserts
// u.Decision if set, and appends events, in one transaction, and returns
// the updated call with its decisions. Status is always set, Result and
// Error when non-empty, UpdatedAt to u.Now unless it is zero. A decision
// without ToolCallID gets u.ID, without ID a new UUID, without CreatedAt
// u.Now. ECONFLICT, with the current call, when the status does not match;
// ENOTFOUND when there is no such call; EINVALID when From is empty, a
// status or decision value is unknown, the decision names another call, or
// Result is not valid JSON. On any error nothing is written.
func (s *ToolCallStore) UpdateToolCall(ctx context.Context, u agentd.CallUpdate, events []agentd.EventDraft) (*agentd.ToolCall, []agentd.Event, error) {
	p, err := prepareUpdate(u)
	if err != nil {
		return nil, nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, nil, err
	}
	var call *agentd.ToolCall
	out, err := writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) (err error) {
		call, err = s.apply(ctx, tx, p)
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

// UpdateToolCalls implements agentd.ToolCallStore.UpdateToolCalls: every update
// of us as UpdateToolCall applies it, and events, in one transaction.
func (s *ToolCallStore) UpdateToolCalls(ctx context.Context, us []agentd.CallUpdate, events []agentd.EventDraft) ([]agentd.ToolCall, []agentd.Event, error) {
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
	out, err := writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		for i, p := range ps {
			c, err := s.apply(ctx, tx, p)
			if err != nil {
				return err
			}
			calls[i] = *c
		}
		return nil
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
	if p.result, err = EncJSON("tool call result", u.Result); err != nil {
		return nil, err
	}
	if p.now, err = EncTime("now", u.Now); err != nil {
		return nil, err
	}
	if u.Edit != nil {
		if p.editArgs, err = EncJSON("edited arguments", u.Edit.Arguments); err != nil {
			return nil, err
		}
		if p.editParams, err = EncJSON("edited params", u.Edit.Params); err != nil {
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
	return p, p.prepareDecision()
}

// prepareDecision completes and encodes the update's decision.
func (p *preparedUpdate) prepareDecision() error {
	u := p.u
	cp := *u.Decision
	d := &cp
	if d.ToolCallID == "" {
		d.ToolCallID = u.ID
	} else if d.ToolCallID != u.ID {
		return agentd.Errorf(agentd.EINVALID, "decision for tool call %q given for %q", d.ToolCallID, u.ID)
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
		return agentd.Errorf(agentd.EINVALID, "unknown decision %q", d.Decision)
	}
	var err error
	if p.decided, err = EncTime("decision created_at", d.CreatedAt); err != nil {
		return err
	}
	if p.decidedArgs, err = EncJSON("decision edited arguments", d.EditedArguments); err != nil {
		return err
	}
	p.d = d
	return nil
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
	args, err := EncJSON("re-parked arguments", r.Arguments)
	if err != nil {
		return nil, err
	}
	deadline, err := EncTime("requires_approval_at", r.RequiresApprovalAt)
	if err != nil {
		return nil, err
	}
	allowed, err := json.Marshal(r.AllowedDecisions)
	if err != nil {
		return nil, err
	}
	params, err := EncJSON("re-parked params", r.Params)
	if err != nil {
		return nil, err
	}
	rule, err := encodeApprovalRule(r.Approval, nil)
	if err != nil {
		return nil, err
	}
	return []any{args, r.ArgumentsSHA256, r.Tier, r.Reason, r.Escalated, string(allowed), r.Diff, r.StateSHA256, deadline,
		r.Method, r.Endpoint, r.PathTemplate, params, rule}, nil
}
