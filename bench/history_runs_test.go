package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/tools/gofunc"
	"github.com/agentd-dev/agentd/toolset"
)

// The two conversation sizes benchHistoryRuns compares, in messages of
// the model's view when the first timed run starts.
const (
	historyRunsSmall = 40
	historyRunsLarge = 800
)

// historyRunsAllocBudget is the most a run at historyRunsLarge messages
// may allocate, in allocations, relative to one at historyRunsSmall: the
// benchmark fails beyond it. A run that reads and rebuilds its history
// whole allocates several times more at 800 messages than at 40.
const historyRunsAllocBudget = 1.25

// benchHistoryRuns measures what users do: many runs of one model step in
// a conversation that is already long (issue 29), where the steps
// sub-benchmark makes one run of many steps. Two conversations are
// prebuilt in the store, one of historyRunsSmall messages and one of
// historyRunsLarge (as one earlier run of tick calls leaves them: the
// user's message, assistant messages each with one completed call, the
// final text). Then n runs are made in each, alternating between the two:
// engine.Send of a message until run_finished is published, a run of
// exactly one step (a text answer, stepRules). Each run adds two messages
// to its conversation, the same at both sizes.
//
// Metrics: ns/run at both sizes and their ratio (target ≤ 1.1), and the
// allocations per run at both sizes and their ratio, counted by the
// runtime around each run (every goroutine of the process: the engine's,
// the store's, the model's). The allocation ratio is deterministic enough
// to guard: above historyRunsAllocBudget the benchmark fails.
func benchHistoryRuns(b *testing.B) {
	inst := startAgentdWith(b, benchDir(b), stepRules, nil,
		setup{wiring: benchWiring(), sources: []toolset.Source{tickSource(b)}})
	n := iterations(b, "AGENTD_BENCH_RUNS", 400)
	sizes := []int{historyRunsSmall, historyRunsLarge}
	convs := make([]string, len(sizes))
	events := make([]<-chan stamped, len(sizes))
	for i, m := range sizes {
		convs[i] = historyConversation(b, inst, m)
		events[i] = inst.w.watch(convs[i])
		defer inst.w.unwatch(convs[i])
	}
	took := make([][]time.Duration, len(sizes))
	allocs := make([]uint64, len(sizes))
	var ms0, ms1 runtime.MemStats
	b.ResetTimer()
	start := time.Now()
	for r := range 2 * n {
		i := r % 2
		if r/2%2 == 1 { // alternate which size goes first in each pair
			i = 1 - i
		}
		runtime.ReadMemStats(&ms0)
		d := historyRun(b, inst, convs[i], events[i])
		runtime.ReadMemStats(&ms1)
		took[i] = append(took[i], d)
		allocs[i] += ms1.Mallocs - ms0.Mallocs
	}
	elapsed := time.Since(start)
	b.StopTimer()

	small, large := summarize(took[0]), summarize(took[1])
	as, al := float64(allocs[0])/float64(n), float64(allocs[1])/float64(n)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(small.mean.Nanoseconds()), "small-ns/run")
	b.ReportMetric(float64(large.mean.Nanoseconds()), "large-ns/run")
	b.ReportMetric(float64(large.mean)/float64(small.mean), "large/small")
	b.ReportMetric(al/as, "allocs-large/small")

	var t strings.Builder
	fmt.Fprintf(&t, "%d single-step runs (script model, text answer) in each of two prebuilt conversations, alternated\n", n)
	fmt.Fprintf(&t, "  %-40s %9s %9s %9s %9s %11s\n", "", "mean ms", "p50 ms", "p90 ms", "p99 ms", "allocs/run")
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f %9.3f %11.0f\n", fmt.Sprintf("run at %d messages", historyRunsSmall),
		ms(small.mean), ms(small.p50), ms(small.p90), ms(small.p99), as)
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f %9.3f %11.0f\n", fmt.Sprintf("run at %d messages", historyRunsLarge),
		ms(large.mean), ms(large.p50), ms(large.p90), ms(large.p99), al)
	fmt.Fprintf(&t, "  %-40s %9.2f %9.2f   (target ≤ 1.10)\n", fmt.Sprintf("ratio %d / %d", historyRunsLarge, historyRunsSmall),
		float64(large.mean)/float64(small.mean), float64(large.p50)/float64(small.p50))
	fmt.Fprintf(&t, "  %-40s %9.2f             (budget ≤ %.2f)\n", "allocations per run, ratio", al/as, historyRunsAllocBudget)
	report(b, t.String())
	if al/as > historyRunsAllocBudget {
		b.Errorf("a run at %d messages makes %.0f allocations, %.2f× one at %d (%.0f): over the budget of %.2f×; does a run read its history whole?",
			historyRunsLarge, al, al/as, historyRunsSmall, as, historyRunsAllocBudget)
	}
}

// historyRun sends a message to conv and returns the time until the run's
// run_finished was published.
func historyRun(b *testing.B, inst *instance, conv string, events <-chan stamped) time.Duration {
	t0 := time.Now()
	if _, err := inst.engine.Send(context.Background(), devPrincipal, conv, "hello"); err != nil {
		b.Fatal(err)
	}
	fin := waitEvent(b, events, agentd.EventRunFinished)
	if s := field(b, fin, "status"); s != string(agentd.RunCompleted) {
		b.Fatalf("run finished %s: %s", s, fin.Data)
	}
	return fin.at.Sub(t0)
}

// historyConversation makes, straight in the store, a conversation whose
// model view has m messages (m even, at least 4): one finished run of the
// user's message, m/2-1 steps each with one completed tick call, and a
// final text.
func historyConversation(b *testing.B, inst *instance, m int) string {
	ctx := context.Background()
	c, run, user, now, draft := prebuiltRun(b, inst, "go")
	if _, err := inst.store.StartRun(ctx, run, user, draft(&agentd.RunStartedPayload{RunID: run.ID, CorrelationID: run.CorrelationID})); err != nil {
		b.Fatal(err)
	}
	args, result := json.RawMessage(`{}`), json.RawMessage(`{"ok":true}`)
	steps := m / 2
	for k := 1; k <= steps; k++ {
		msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c, RunID: run.ID,
			Role: agentd.RoleAssistant, CreatedAt: now}
		step := agentd.StepRecord{RunID: run.ID, Step: k, Usage: agentd.Usage{InputTokens: 1, OutputTokens: 1}, Message: msg, Now: now}
		if k < steps {
			step.Calls = []*agentd.ToolCall{{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: run.TenantID, ProjectID: run.ProjectID,
				ConversationID: c, RunID: run.ID, CorrelationID: run.CorrelationID, MessageID: msg.ID, Step: k,
				Name: "tick", ServerID: gofunc.ServerID, Arguments: args, ArgumentsSHA256: "bench", Tier: agentd.TierAuto,
				Status: agentd.StatusCompleted, Result: result, CreatedAt: now, UpdatedAt: now}}
			step.StopReason = "tool_use"
		} else {
			msg.Content, step.StopReason = "done", "end_turn"
		}
		if _, err := inst.store.RecordStep(ctx, step, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, _, err := inst.store.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning},
		Status: agentd.RunCompleted, Reason: "model_stop", Now: now}, nil); err != nil {
		b.Fatal(err)
	}
	return c
}
