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
func SetRetireHook(e *Engine, f func(runID, stage string)) { e.drv.retireHook = f }

// SweepAndRemind does what each lease tick does: the next reminder pass
// reads the last span again (lookBack), and the pass runs, sending the
// reminders due on e's clock; it returns how many calls were reminded.
func SweepAndRemind(ctx context.Context, e *Engine, span time.Duration) (int, error) {
	e.timers.lookBack(span)
	return e.timers.remindPass(ctx)
}

// ReminderWindows is reminderWindows.
var ReminderWindows = reminderWindows

// ExpirePage is expirePage.
const ExpirePage = expirePage

// ColdHistory is the model's view of a conversation as a driver without a
// cached history builds it: the whole conversation read at once.
func ColdHistory(ctx context.Context, e *Engine, tenant, conv string) ([]agentd.ModelMessage, error) {
	h := newHistoryCache(tenant, conv)
	if err := h.refresh(ctx, e.runner.store, nil); err != nil {
		return nil, err
	}
	return e.runner.modelMessages(h), nil
}
