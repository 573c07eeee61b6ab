package loop

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// This file sends the reminders of parked calls and extends their
// deadlines (SPEC §11.3, docs/governance.md). A reminder is due at its
// call's deadline minus its offset; it is sent once per deadline, and the
// store records which were sent (ToolCall.Reminded, one conditional
// update), so a restart sends only what is still unsent. The deadline
// timer (deadline.go) is armed to the earliest due reminder too.

// reminderSet is the next due reminder of each parked call that has one.
type reminderSet struct {
	mu   sync.Mutex
	next map[string]time.Time
	// seen are the reminder offsets of the calls noted here: a call keeps
	// the rule it was parked with, which may no longer be configured.
	seen map[time.Duration]bool
	// swept is the instant from which the reminders of every parked call,
	// whoever parked it, are still to be read (sweepReminders): the start,
	// then each sweep's.
	swept time.Time
}

// dueReminders are the offsets of c's reminders that are unsent for its
// current deadline and due at now, and the instant the next unsent one is
// due (zero: none). A reminder due before the call was made had passed
// when its deadline was armed (SPEC §11.3: skipped); an extension records
// the ones it skips as sent (Extend).
func dueReminders(c *agentd.ToolCall, now time.Time) (due []string, next time.Time) {
	if c.Status != agentd.StatusRequiresConfirmation || c.RequiresApprovalAt == nil || c.Approval == nil {
		return nil, time.Time{}
	}
	deadline := *c.RequiresApprovalAt
	if !now.Before(deadline) {
		return nil, time.Time{}
	}
	for i, off := range c.Approval.ReminderOffsets() {
		name := c.Approval.Reminders[i]
		if slices.ContainsFunc(c.Reminded, func(r agentd.Reminder) bool { return r.Offset == name && r.Deadline.Equal(deadline) }) {
			continue
		}
		at := deadline.Add(-off)
		if at.Before(c.CreatedAt) {
			continue
		}
		if !at.After(now) {
			due = append(due, name)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return due, next
}

// noteReminders arms the timer to c's next unsent reminder (now, when
// one is due).
func (e *Engine) noteReminders(c *agentd.ToolCall) {
	now := e.clock.Now()
	due, next := dueReminders(c, now)
	if len(due) > 0 {
		next = now
	}
	r := &e.reminders
	r.mu.Lock()
	if c.Approval != nil {
		for _, off := range c.Approval.ReminderOffsets() {
			if r.seen == nil {
				r.seen = map[time.Duration]bool{}
			}
			r.seen[off] = true
		}
	}
	if next.IsZero() {
		delete(r.next, c.ID)
	} else {
		if r.next == nil {
			r.next = map[string]time.Time{}
		}
		r.next[c.ID] = next
	}
	r.mu.Unlock()
	e.noteDeadline(next)
}

// loadReminders notes the reminders of every parked call at start: one
// that came due while no process ran is sent by the first pass.
func (e *Engine) loadReminders(ctx context.Context) error {
	start := e.clock.Now()
	calls, err := e.store.ToolCallsByStatus(ctx, agentd.StatusRequiresConfirmation)
	if err != nil {
		return err
	}
	e.reminders.mu.Lock()
	e.reminders.swept = start
	e.reminders.mu.Unlock()
	for i := range calls {
		if c := &calls[i]; c.Approval != nil && len(c.Approval.Reminders) > 0 {
			e.noteReminders(c)
		}
	}
	return nil
}

// sweepReminders notes the reminders of the parked calls, whoever parked
// them, that come due from the previous sweep (or the start) until ahead
// from now: for the reminder offsets o of every approval rule the engine
// can apply (reminderOffsets), the calls whose deadline lies in
// (swept+o, now+ahead+o] — ranges of the deadline index, never a read of
// every parked call. With replicas the lease loop runs it every Lease/3
// with ahead = Lease/3 (startLeases): a call whose replica is gone is
// reminded by the others on time, or, when it was parked after their last
// sweep, at most one tick late; the reminder itself is one conditional
// update, sent once however many replicas note it.
func (e *Engine) sweepReminders(ctx context.Context, ahead time.Duration) error {
	now := e.clock.Now()
	r := &e.reminders
	r.mu.Lock()
	from := r.swept
	r.mu.Unlock()
	if from.IsZero() || from.After(now) {
		from = now
	}
	for _, w := range reminderWindows(e.reminderOffsets(), from, now.Add(ahead)) {
		calls, err := e.store.ToolCallsDueBetween(ctx, w[0], w[1])
		if err != nil {
			return err
		}
		for i := range calls {
			if c := &calls[i]; c.Approval != nil && len(c.Approval.Reminders) > 0 {
				e.noteReminders(c)
			}
		}
	}
	r.mu.Lock()
	r.swept = now
	r.mu.Unlock()
	return nil
}

// reminderWindows are the deadline ranges (after, until] of the calls
// whose reminder at one of offsets falls in (from, to], overlapping ranges
// merged, earliest first.
func reminderWindows(offsets []time.Duration, from, to time.Time) [][2]time.Time {
	slices.Sort(offsets)
	var ws [][2]time.Time
	for _, off := range offsets {
		w := [2]time.Time{from.Add(off), to.Add(off)}
		if n := len(ws); n > 0 && !w[0].After(ws[n-1][1]) {
			ws[n-1][1] = w[1]
			continue
		}
		ws = append(ws, w)
	}
	return ws
}

// reminderOffsets is every reminder offset an approval rule can have here:
// those of the agent's rule, of every tool's and of every endpoint of the
// connections the tools reach, and of the calls noted so far.
func (e *Engine) reminderOffsets() []time.Duration {
	set := map[time.Duration]bool{}
	add := func(rule *agentd.ApprovalRule) {
		if rule != nil {
			for _, off := range rule.ReminderOffsets() {
				set[off] = true
			}
		}
	}
	addConn := func(cp *confirm.ConnectionPolicy) {
		if cp != nil && cp.Policy != nil {
			for _, ep := range cp.Policy.Endpoints {
				add(ep.Approval)
			}
		}
	}
	add(e.agent.Approval)
	for _, d := range e.tools.now().list {
		if t := d.Confirm; t != nil {
			add(t.Approval)
			addConn(t.Connection)
			for _, cp := range t.Connections {
				addConn(cp)
			}
		}
	}
	r := &e.reminders
	r.mu.Lock()
	for off := range r.seen {
		set[off] = true
	}
	r.mu.Unlock()
	out := make([]time.Duration, 0, len(set))
	for off := range set {
		out = append(out, off)
	}
	return out
}

// RemindDue reads every parked call and sends the reminders due on the
// engine's clock (what the background expiry does from its timer); it
// returns how many calls were reminded.
func (e *Engine) RemindDue(ctx context.Context) (int, error) {
	if err := e.loadReminders(ctx); err != nil {
		return 0, err
	}
	return e.remindPass(ctx), nil
}

// remindPass sends every reminder due now and arms the timer to the next;
// it returns how many calls were reminded.
func (e *Engine) remindPass(ctx context.Context) int {
	now := e.clock.Now()
	r := &e.reminders
	r.mu.Lock()
	var ids []string
	for id, at := range r.next {
		if !at.After(now) {
			ids = append(ids, id)
			delete(r.next, id)
		}
	}
	r.mu.Unlock()
	n := 0
	for _, id := range ids {
		c, err := e.store.ToolCall(ctx, id)
		if err == nil {
			var sent bool
			sent, err = e.remind(ctx, c)
			if sent {
				n++
			}
		}
		if err != nil && agentd.ErrorCode(err) != agentd.ENOTFOUND && ctx.Err() == nil {
			e.log.Error().Err(err).Str("tool_call_id", id).Msg("send reminder")
		}
	}
	r.mu.Lock()
	var next time.Time
	for _, at := range r.next {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	r.mu.Unlock()
	e.noteDeadline(next)
	return n
}

// remind sends c's due reminders in one conditional update (a concurrent
// reminder, extension or decision wins: c is read again) and notes the
// next.
func (e *Engine) remind(ctx context.Context, c *agentd.ToolCall) (sent bool, err error) {
	for range decideRetries {
		now := e.clock.Now()
		due, _ := dueReminders(c, now)
		if len(due) == 0 {
			e.noteReminders(c)
			return false, nil
		}
		deadline := *c.RequiresApprovalAt
		reminded := slices.Clone(c.Reminded)
		drafts := make([]agentd.EventDraft, 0, len(due))
		for _, off := range due {
			reminded = append(reminded, agentd.Reminder{Deadline: deadline, Offset: off})
			drafts = append(drafts, e.event(c.ConversationID, &agentd.ConfirmationReminderPayload{RunID: c.RunID,
				ToolCallID: c.ID, ToolName: c.Name, RequiresApprovalAt: deadline, RemainingMS: deadline.Sub(now).Milliseconds(), Offset: off}))
		}
		var updated *agentd.ToolCall
		err = e.commit(c.ConversationID, func() ([]agentd.Event, error) {
			cur, evs, err := e.store.UpdateToolCall(ctx, agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
				Status: agentd.StatusRequiresConfirmation, Card: c.CardRevision(),
				Governance: &agentd.GovernanceUpdate{Deadline: deadline, RemindedBefore: len(c.Reminded), Reminded: reminded, Extended: c.Extended}}, drafts)
			updated = cur
			return evs, err
		})
		switch {
		case err == nil:
			e.log.Info().Str("tool_call_id", c.ID).Strs("offsets", due).Msg("approval reminder")
			e.noteReminders(updated)
			return true, nil
		case agentd.ErrorCode(err) != agentd.ECONFLICT:
			return false, err
		}
		if c, err = e.store.ToolCall(ctx, c.ID); err != nil {
			return false, err
		}
	}
	return false, agentd.Errorf(agentd.ECONFLICT, "the call changed concurrently; its reminder waits for the next pass")
}

// Extend moves the deadline of a parked call later by by (SPEC §11.3): p
// must be a key that may decide the call (mayDecide: 403 with the rule's
// code otherwise), and the total of the call's extensions may not exceed
// its rule's max_extension (EEXTENSIONEXCEEDSMAX; 0, the default, turns
// extensions off). It emits confirmation_extended in the same commit,
// one conditional update on the deadline it read, and returns the call as
// updated. Reminders whose time the new deadline already passed are
// recorded as sent (skipped); the others are armed again.
//
// Errors: EFORBIDDEN (a delegate key), EINVALID (by not a positive Go
// duration, a reason over agentd.MaxReasonBytes), ENOTFOUND, ECONFLICT (not pending,
// or no deadline), EEXPIRED (the deadline passed).
func (e *Engine) Extend(ctx context.Context, p agentd.Principal, id string, req agentd.ExtendRequest) (*agentd.ToolCall, error) {
	by, err := time.ParseDuration(req.By)
	switch {
	case !p.MayDecide():
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	case err != nil || by <= 0:
		return nil, agentd.Errorf(agentd.EINVALID, `"by" must be a positive Go duration such as "30m", got %q`, req.By)
	case len(req.Reason) > agentd.MaxReasonBytes:
		return nil, agentd.Errorf(agentd.EINVALID, "reason is longer than %d bytes", agentd.MaxReasonBytes)
	}
	for range decideRetries {
		c, err := e.ToolCall(ctx, p, id)
		if err != nil {
			return nil, err
		}
		u, drafts, err := e.planExtend(ctx, p, c, by, req)
		if err != nil {
			return nil, err
		}
		var updated *agentd.ToolCall
		err = e.commit(c.ConversationID, func() ([]agentd.Event, error) {
			cur, evs, err := e.store.UpdateToolCall(ctx, u, drafts)
			updated = cur
			return evs, err
		})
		if agentd.ErrorCode(err) == agentd.ECONFLICT {
			continue
		} else if err != nil {
			return nil, err
		}
		e.log.Info().Str("tool_call_id", c.ID).Str("key_id", p.KeyID).Str("by", req.By).
			Time("requires_approval_at", u.Governance.NewDeadline).Msg("approval extended")
		e.noteReminders(updated)
		return updated, nil
	}
	return nil, agentd.Errorf(agentd.ECONFLICT, "the call is being decided concurrently; retry")
}

// planExtend checks an extension of c by p against the call as read now
// and returns its update and event.
func (e *Engine) planExtend(ctx context.Context, p agentd.Principal, c *agentd.ToolCall, by time.Duration, req agentd.ExtendRequest) (agentd.CallUpdate, []agentd.EventDraft, error) {
	if err := e.mayDecide(ctx, p, c); err != nil {
		return agentd.CallUpdate{}, nil, err
	}
	if c.Status == agentd.StatusExpired {
		return agentd.CallUpdate{}, nil, agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed; nothing was done")
	}
	if c.Status != agentd.StatusRequiresConfirmation || c.RequiresApprovalAt == nil {
		return agentd.CallUpdate{}, nil, agentd.Errorf(agentd.ECONFLICT, "the call is not awaiting confirmation (status %s)", c.Status)
	}
	now, prev := e.clock.Now(), *c.RequiresApprovalAt
	if !now.Before(prev) {
		if err := e.expire(ctx, *c); err != nil && agentd.ErrorCode(err) != agentd.ECONFLICT {
			return agentd.CallUpdate{}, nil, err
		}
		return agentd.CallUpdate{}, nil, agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed at %s; nothing was done", prev.UTC().Format(time.RFC3339))
	}
	rule := c.ApprovalOf()
	total, err := confirm.CheckExtension(rule, c.Extended, by)
	if err != nil {
		return agentd.CallUpdate{}, nil, err
	}
	next := prev.Add(by).UTC()
	var skipped []agentd.Reminder
	for i, off := range rule.ReminderOffsets() {
		if !next.Add(-off).After(now) {
			skipped = append(skipped, agentd.Reminder{Deadline: next, Offset: rule.Reminders[i]})
		}
	}
	u := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusRequiresConfirmation,
		Card: c.CardRevision(), Governance: &agentd.GovernanceUpdate{Deadline: prev, RemindedBefore: len(c.Reminded), Reminded: skipped,
			NewDeadline: next, Extended: total}}
	draft := e.event(c.ConversationID, &agentd.ConfirmationExtendedPayload{RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name,
		RequiresApprovalAt: next, PreviousRequiresApprovalAt: prev, ExtendedBy: cmp.Or(p.KeyID, agentd.AnonymousKeyID), By: req.By, Reason: req.Reason})
	draft.Audit = &agentd.AuditEntry{Kind: agentd.AuditExtension, RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name,
		KeyID: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Role: p.Role, Reason: req.Reason, Outcome: req.By, Tier: c.Tier,
		ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now.UTC()}
	return u, []agentd.EventDraft{draft}, nil
}
