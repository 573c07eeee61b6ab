package loop

import (
	"time"

	"github.com/agentd-dev/agentd"
)

// Observer is told what the engine did, for metrics. Package metrics
// implements it with Prometheus collectors; the loop itself imports no
// metrics library (the Prometheus client imports net/http, which the loop
// must not: TestImportRules). Every method must be cheap and must not
// block; none is given a tenant, a key or an id.
type Observer interface {
	// RunStarted: a user message started a run.
	RunStarted()
	// RunFinished: a run ended (completed, failed or cancelled).
	RunFinished(status agentd.RunStatus)
	// ToolCallFinished: a call reached a final status (completed, failed,
	// denied, expired, refused, cancelled); tier is its tier.
	ToolCallFinished(status agentd.CallStatus, tier agentd.Tier)
	// Decided: a parked call was decided (approved, denied, expired,
	// cancelled) through via, waited after it was parked.
	Decided(decision, via string, waited time.Duration)
	// ToolExecuted: a tool of the agent ran for took and ended in status
	// (completed or failed).
	ToolExecuted(tool string, status agentd.CallStatus, took time.Duration)
	// ModelStep: one model step took took.
	ModelStep(took time.Duration)
}

// nopObserver is the Observer of an engine without one.
type nopObserver struct{}

func (nopObserver) RunStarted()                                           {}
func (nopObserver) RunFinished(agentd.RunStatus)                          {}
func (nopObserver) ToolCallFinished(agentd.CallStatus, agentd.Tier)       {}
func (nopObserver) Decided(string, string, time.Duration)                 {}
func (nopObserver) ToolExecuted(string, agentd.CallStatus, time.Duration) {}
func (nopObserver) ModelStep(time.Duration)                               {}
