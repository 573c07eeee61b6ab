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
// update), so a restart sends only what is still unsent.
//
// Nothing is kept per parked call: a pass (remindPass, run by the deadline
// timer) reads, for each reminder offset o, the calls whose deadline lies
// in (swept+o, now+o] — ranges of the deadline index, the calls whose
// reminder came due since the previous pass — and arms the timer to the
// next reminder, read from the same index (NextDeadline after now+o).
// Start reads nothing: the first pass reads the calls whose reminder is
// due and whose deadline has not passed, and none at all when no approval
// rule has reminders.

// reminderSet is where the reminder passes stand.
type reminderSet struct {
	mu sync.Mutex
	// seen are the reminder offsets of the calls noted here: a call keeps
	// the rule it was parked with, which may no longer be configured.
	seen map[time.Duration]bool
	// swept is the instant up to which a pass has read the reminders due
	// (zero before the first: every reminder whose deadline is ahead).
	swept time.Time
	// low, when not zero, is the earliest reminder noted at or before
	// swept since the last pass began (a call committed after that pass
	// read the store, or a tick's look back): the next pass reads from it.
	low time.Time
}

// dueReminders are the offsets of c's reminders that are unsent for its
// current deadline and due at now, and the instant the next unsent one is
// due (zero: none). A reminder due before the call was made had passed
// when its deadline was armed (SPEC §11.3: skipped); an extension records
// the ones it skips as sent (extend).
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
		if slices.ContainsFunc(c.Reminded, func(r agentd.Reminder) bool { return r.Before == name && r.Deadline.Equal(deadline) }) {
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

// noteReminders arms the timer to c's next unsent reminder (now, when one
// is due), after c was committed: parked, extended or reminded. A
// reminder at or before the instant a pass has read to is read again by
// the next pass (low).
func (e *timers) noteReminders(c *agentd.ToolCall) {
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
	r.lowerLocked(next)
	r.mu.Unlock()
	e.noteDeadline(next)
}

// lowerLocked makes the next pass read from at when a pass has read past
// it already. r.mu must be held.
func (r *reminderSet) lowerLocked(at time.Time) {
	if !at.IsZero() && !r.swept.IsZero() && !at.After(r.swept) && (r.low.IsZero() || at.Before(r.low)) {
		r.low = at
	}
}

// lookBack makes the next pass read again the reminders due in the last
// span: with replicas, each lease tick does (startLeases), so a call
// another replica parked after this engine's pass read past its reminder,
// the other replica gone, is reminded here at most one tick late.
func (e *timers) lookBack(span time.Duration) {
	r := &e.reminders
	r.mu.Lock()
	r.lowerLocked(e.clock.Now().Add(-span))
	r.mu.Unlock()
}

// remindPass sends every reminder that came due since the previous pass
// (the first: every one due whose deadline is ahead) and arms the timer to
// the next; it returns how many calls were reminded. It reads nothing when
// no approval rule has reminders. On a store error the range is read
// again by the next pass.
func (e *timers) remindPass(ctx context.Context) (int, error) {
	offsets := e.reminderOffsets()
	if len(offsets) == 0 {
		return 0, nil
	}
	now := e.clock.Now()
	r := &e.reminders
	r.mu.Lock()
	from := r.swept
	if !r.low.IsZero() && !from.IsZero() {
		from = r.low.Add(-time.Nanosecond)
	}
	r.low = time.Time{}
	if now.After(r.swept) {
		r.swept = now // a call noted from here on at or before now is read again
	}
	r.mu.Unlock()
	n, err := e.remindBetween(ctx, offsets, from, now)
	var next time.Time
	if err == nil {
		next, err = e.nextReminder(ctx, offsets, now)
	}
	if err != nil {
		r.mu.Lock()
		if from.IsZero() {
			r.swept, r.low = time.Time{}, time.Time{}
		} else {
			r.lowerLocked(from.Add(time.Nanosecond))
		}
		r.mu.Unlock()
		next = now.Add(e.opts.ExpireEvery)
	}
	e.noteDeadline(next)
	return n, err
}

// remindBetween sends the reminders due in (from, now] (from zero: every
// one due) of the calls whose deadline is ahead, and returns how many
// calls it reminded.
func (e *timers) remindBetween(ctx context.Context, offsets []time.Duration, from, now time.Time) (int, error) {
	n := 0
	for _, w := range reminderWindows(offsets, from, now) {
		calls, err := e.store.ToolCallsDueBetween(ctx, w[0], w[1])
		if err != nil {
			return n, err
		}
		for i := range calls {
			c := &calls[i]
			if c.Approval == nil || len(c.Approval.Reminders) == 0 {
				continue
			}
			sent, err := e.remind(ctx, c)
			if sent {
				n++
			}
			if err != nil && agentd.ErrorCode(err) != agentd.ENOTFOUND && ctx.Err() == nil {
				e.log.Error().Err(err).Str("tool_call_id", c.ID).Msg("send reminder")
			}
		}
	}
	return n, nil
}

// nextReminder is the earliest instant after now at which a reminder at
// one of offsets is due: per offset o, the earliest deadline after now+o,
// minus o (one index entry each); zero when there is none.
func (e *timers) nextReminder(ctx context.Context, offsets []time.Duration, now time.Time) (time.Time, error) {
	var next time.Time
	for _, off := range offsets {
		d, err := e.store.NextDeadline(ctx, now.Add(off))
		if err != nil {
			return time.Time{}, err
		}
		if at := d.Add(-off); !d.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next, nil
}

// reminderWindows are the deadline ranges (after, until] of the calls
// whose reminder at one of offsets falls in (from, now] (from zero: at or
// before now) and whose deadline is after now (a call whose deadline
// passed gets no reminder), overlapping ranges merged, earliest first.
func reminderWindows(offsets []time.Duration, from, now time.Time) [][2]time.Time {
	slices.Sort(offsets)
	var ws [][2]time.Time
	for _, off := range offsets {
		w := [2]time.Time{from.Add(off), now.Add(off)}
		if from.IsZero() || w[0].Before(now) {
			w[0] = now
		}
		if !w[0].Before(w[1]) {
			continue
		}
		if n := len(ws); n > 0 && !w[0].After(ws[n-1][1]) {
			ws[n-1][1] = w[1] // offsets ascend: so do the ends
			continue
		}
		ws = append(ws, w)
	}
	return ws
}

// reminderOffsets is every reminder offset an approval rule can have here:
// those of the agent's rule, of every tool's and of every endpoint of the
// connections the tools reach, and of the calls noted so far.
func (e *timers) reminderOffsets() []time.Duration {
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

// remind sends c's due reminders in one conditional update (a concurrent
// reminder, extension or decision wins: c is read again) and notes the
// next.
func (e *timers) remind(ctx context.Context, c *agentd.ToolCall) (sent bool, err error) {
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
			reminded = append(reminded, agentd.Reminder{Deadline: deadline, Before: off})
			drafts = append(drafts, e.event(c.ConversationID, &agentd.ConfirmationReminderPayload{RunID: c.RunID,
				ToolCallID: c.ID, ToolName: c.Name, RequiresApprovalAt: deadline, RemainingMS: deadline.Sub(now).Milliseconds(), Before: off}))
		}
		var updated *agentd.ToolCall
		err = e.commit(c.ConversationID, func() ([]agentd.Event, error) {
			cur, evs, err := e.store.UpdateToolCall(ctx, agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
				Status: agentd.StatusRequiresConfirmation, CardRevision: c.CardRevision(),
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

// extend moves the deadline of a parked call later by by (SPEC §11.3): p
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
func (e *timers) extend(ctx context.Context, p agentd.Principal, id string, req agentd.ExtendRequest) (*agentd.ToolCall, error) {
	by, err := time.ParseDuration(req.Extension)
	switch {
	case !p.MayDecide():
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	case err != nil || by <= 0:
		return nil, agentd.Errorf(agentd.EINVALID, `"by" must be a positive Go duration such as "30m", got %q`, req.Extension)
	case len(req.Reason) > agentd.MaxReasonBytes:
		return nil, agentd.Errorf(agentd.EINVALID, "reason is longer than %d bytes", agentd.MaxReasonBytes)
	}
	for range decideRetries {
		c, err := e.toolCall(ctx, p, id)
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
		e.log.Info().Str("tool_call_id", c.ID).Str("key_id", p.KeyID).Str("by", req.Extension).
			Time("requires_approval_at", u.Governance.NewDeadline).Msg("approval extended")
		e.noteReminders(updated)
		return updated, nil
	}
	return nil, agentd.Errorf(agentd.ECONFLICT, "the call is being decided concurrently; retry")
}

// planExtend checks an extension of c by p against the call as read now
// and returns its update and event.
func (e *timers) planExtend(ctx context.Context, p agentd.Principal, c *agentd.ToolCall, by time.Duration, req agentd.ExtendRequest) (agentd.CallUpdate, []agentd.EventDraft, error) {
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
	skipped := skippedReminders(rule, next, now)
	u := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusRequiresConfirmation,
		CardRevision: c.CardRevision(), Governance: &agentd.GovernanceUpdate{Deadline: prev, RemindedBefore: len(c.Reminded), Reminded: skipped,
			NewDeadline: next, Extended: total}}
	draft := e.event(c.ConversationID, &agentd.ConfirmationExtendedPayload{RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name,
		RequiresApprovalAt: next, PreviousRequiresApprovalAt: prev, ExtendedBy: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Extension: req.Extension, Reason: req.Reason})
	draft.Audit = &agentd.AuditEntry{Kind: agentd.AuditExtension, RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name,
		KeyID: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Role: p.Role, Reason: req.Reason, Outcome: req.Extension, Tier: c.Tier,
		ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now.UTC()}
	return u, []agentd.EventDraft{draft}, nil
}

// skippedReminders are the reminders of rule that an extension to the
// deadline next skips: those whose time (next minus the offset) is at or
// before now, recorded as sent for next so that none is sent late.
func skippedReminders(rule agentd.ApprovalRule, next, now time.Time) []agentd.Reminder {
	var skipped []agentd.Reminder
	for i, off := range rule.ReminderOffsets() {
		if !next.Add(-off).After(now) {
			skipped = append(skipped, agentd.Reminder{Deadline: next, Before: rule.Reminders[i]})
		}
	}
	return skipped
}
