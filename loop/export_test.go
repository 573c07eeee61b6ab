package loop

// SetRetireHook makes every driver of e call f when its run waits only for
// people: with stage "before" just before it takes the engine's lock to
// decide whether to exit, and with stage "after" once it has left the
// engine's runs and is about to return. Call it before e.Start.
func SetRetireHook(e *Engine, f func(runID, stage string)) { e.retireHook = f }
