package loop

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// SetRetireHook makes every driver of e call f when its run waits only for
// people: with stage "before" just before it takes the engine's lock to
// decide whether to exit, and with stage "after" once it has left the
// engine's runs and is about to return. Call it before e.Start.
func SetRetireHook(e *Engine, f func(runID, stage string)) { e.retireHook = f }

// SweepAndRemind runs one reminder sweep of e looking ahead by ahead (what
// each lease tick does, sweepReminders), then sends the reminders due on
// e's clock (what the deadline timer does); it returns how many calls were
// reminded.
func SweepAndRemind(ctx context.Context, e *Engine, ahead time.Duration) (int, error) {
	if err := e.sweepReminders(ctx, ahead); err != nil {
		return 0, err
	}
	return e.remindPass(ctx), nil
}

// ReminderWindows is reminderWindows.
var ReminderWindows = reminderWindows

// ColdHistory is the model's view of a conversation as a driver without a
// cached history builds it: the whole conversation read at once.
func ColdHistory(ctx context.Context, e *Engine, tenant, conv string) ([]agentd.ModelMessage, error) {
	h := newHistoryCache(tenant, conv)
	if err := h.refresh(ctx, e.store, nil); err != nil {
		return nil, err
	}
	return e.modelMessages(h), nil
}
