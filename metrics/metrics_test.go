package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var _ loop.Observer = (*metrics.Loop)(nil)

func TestLoopMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	parked := int64(3)
	m := metrics.NewLoop(reg, func(context.Context) (int64, error) { return parked, nil })
	m.RunStarted()
	m.RunFinished(agentd.RunCompleted)
	m.ToolCallFinished(agentd.StatusCompleted, agentd.TierConfirm)
	m.Decided(agentd.DecisionApproved, agentd.ViaBulk, 90*time.Second)
	m.ToolExecuted("pay", agentd.StatusCompleted, 20*time.Millisecond)
	m.ModelStep(time.Second)
	want := `
# HELP agentd_approval_decisions_total Parked calls decided, by decision (approved, denied, expired, cancelled) and source (single, bulk, protocol, deadline, cancel).
# TYPE agentd_approval_decisions_total counter
agentd_approval_decisions_total{decision="approved",source="bulk"} 1
# HELP agentd_parked_tool_calls Tool calls parked now (requires_confirmation), every tenant together, read from the store.
# TYPE agentd_parked_tool_calls gauge
agentd_parked_tool_calls 3
# HELP agentd_runs_finished_total Runs that ended, by status (completed, failed, cancelled).
# TYPE agentd_runs_finished_total counter
agentd_runs_finished_total{status="completed"} 1
# HELP agentd_tool_calls_total Tool calls that reached a final status (completed, failed, denied, expired, refused, cancelled), by status and tier.
# TYPE agentd_tool_calls_total counter
agentd_tool_calls_total{status="completed",tier="confirm"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentd_approval_decisions_total", "agentd_parked_tool_calls",
		"agentd_runs_finished_total", "agentd_tool_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "agentd_approval_wait_seconds", "agentd_tool_duration_seconds", "agentd_model_step_seconds"); n != 3 {
		t.Errorf("%d histogram series, want 3", n)
	}
	// The gauge is read on every scrape.
	parked = 1
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP agentd_parked_tool_calls Tool calls parked now (requires_confirmation), every tenant together, read from the store.
# TYPE agentd_parked_tool_calls gauge
agentd_parked_tool_calls 1
`), "agentd_parked_tool_calls"); err != nil {
		t.Error(err)
	}
}

// A store that cannot count fails the gauge's scrape, not the process.
func TestParkedGaugeStoreError(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.NewLoop(reg, func(context.Context) (int64, error) { return 0, errors.New("store down") })
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("Gather with a failing store: %v", err)
	}
}

// Without a registerer nothing is registered and the observer still works.
func TestNilRegisterer(t *testing.T) {
	m := metrics.NewLoop(nil, nil)
	m.RunStarted()
	m.Decided(agentd.DecisionDenied, agentd.ViaSingle, -time.Second)
}
