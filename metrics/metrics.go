// Package metrics holds the Prometheus collectors of agentd's engine: the
// loop reports to a loop.Observer (it imports no metrics library), and
// Loop is that observer. Package server builds one prometheus.Registry and
// passes it here, to the API and to every other package with metrics
// (docs/metrics.md lists them all). No label carries a tenant, a key, an
// id or anything else unbounded: tool names are the project's configured
// tools, statuses, tiers, decisions and sources are fixed sets.
package metrics

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/prometheus/client_golang/prometheus"
)

// Loop is the engine's loop.Observer backed by Prometheus collectors.
type Loop struct {
	runsStarted   prometheus.Counter
	runsFinished  *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	decisions     *prometheus.CounterVec
	decisionWait  *prometheus.HistogramVec
	toolDurations *prometheus.HistogramVec
	modelSteps    prometheus.Histogram
}

// ParkedCounter counts the calls parked now, in the store
// (agentd.ToolCallStore's ParkedCount).
type ParkedCounter func(ctx context.Context) (int64, error)

// parkedTimeout bounds the store read of one scrape.
const parkedTimeout = 5 * time.Second

// NewLoop returns the loop's collectors, registered on reg (none when reg
// is nil), with the gauge of parked calls read from parked on every scrape
// (nil: no such gauge). It panics if reg already has collectors of the
// same names, as prometheus.MustRegister does: that is a wiring bug.
func NewLoop(reg prometheus.Registerer, parked ParkedCounter) *Loop {
	m := &Loop{
		runsStarted: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_runs_started_total",
			Help: "Runs started by a user message."}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_runs_finished_total",
			Help: "Runs that ended, by status (completed, failed, cancelled)."}, []string{"status"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_tool_calls_total",
			Help: "Tool calls that reached a final status (completed, failed, denied, expired, refused, cancelled), by status and tier."},
			[]string{"status", "tier"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_approval_decisions_total",
			Help: "Parked calls decided, by decision (approved, denied, expired, cancelled) and source (single, bulk, protocol, deadline, cancel)."},
			[]string{"decision", "source"}),
		decisionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_approval_wait_seconds",
			Help:    "Time from parking a call to its decision, by decision.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 4 * 3600, 24 * 3600}}, []string{"decision"}),
		toolDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_tool_duration_seconds",
			Help:    "Time a tool ran, by tool and status (completed, failed).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"tool", "status"}),
		modelSteps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentd_model_step_seconds",
			Help:    "Time one model step took (the provider's answer, streamed text included).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120}}),
	}
	if reg != nil {
		reg.MustRegister(m.runsStarted, m.runsFinished, m.toolCalls, m.decisions, m.decisionWait, m.toolDurations, m.modelSteps)
		if parked != nil {
			reg.MustRegister(&parkedCollector{count: parked})
		}
	}
	return m
}

// RunStarted implements loop.Observer.
func (m *Loop) RunStarted() { m.runsStarted.Inc() }

// RunFinished implements loop.Observer.
func (m *Loop) RunFinished(status agentd.RunStatus) {
	m.runsFinished.WithLabelValues(string(status)).Inc()
}

// ToolCallFinished implements loop.Observer.
func (m *Loop) ToolCallFinished(status agentd.CallStatus, tier agentd.Tier) {
	m.toolCalls.WithLabelValues(string(status), string(tier)).Inc()
}

// Decided implements loop.Observer.
func (m *Loop) Decided(decision, via string, waited time.Duration) {
	m.decisions.WithLabelValues(decision, via).Inc()
	m.decisionWait.WithLabelValues(decision).Observe(max(waited, 0).Seconds())
}

// ToolExecuted implements loop.Observer.
func (m *Loop) ToolExecuted(tool string, status agentd.CallStatus, took time.Duration) {
	m.toolDurations.WithLabelValues(tool, string(status)).Observe(took.Seconds())
}

// ModelStep implements loop.Observer.
func (m *Loop) ModelStep(took time.Duration) { m.modelSteps.Observe(took.Seconds()) }

// parkedCollector is the gauge of parked calls: read from the store on
// each scrape, so it is right after a restart and across replicas sharing
// a database, and never drifts as a counter kept in memory would.
type parkedCollector struct {
	count ParkedCounter
}

var parkedDesc = prometheus.NewDesc("agentd_parked_tool_calls",
	"Tool calls parked now (requires_confirmation), every tenant together, read from the store.", nil, nil)

func (c *parkedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- parkedDesc }

func (c *parkedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), parkedTimeout)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(parkedDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(parkedDesc, prometheus.GaugeValue, float64(n))
}
