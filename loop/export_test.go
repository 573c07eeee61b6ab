package loop

import (
	"context"
	"time"
)

// SetRetireHook makes every driver of e call f when its run waits only for
// people: with stage "before" just before it takes the engine's lock to
// decide whether to exit, and with stage "after" once it has left the
// engine's runs and is about to return. Call it before e.Start.
func SetRetireHook(e *Engine, f func(runID, stage string)) { e.retireHook = f }

// SweepAndRemind does what each lease tick does: the next reminder pass
// reads the last span again (lookBack), and the pass runs, sending the
// reminders due on e's clock; it returns how many calls were reminded.
func SweepAndRemind(ctx context.Context, e *Engine, span time.Duration) (int, error) {
	e.lookBack(span)
	return e.remindPass(ctx)
}

// ReminderWindows is reminderWindows.
var ReminderWindows = reminderWindows

// ExpirePage is expirePage.
const ExpirePage = expirePage
