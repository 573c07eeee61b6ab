package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// stepRules: any message gets a one-word text answer and no tool call, so a
// run is exactly one model step (one text_delta).
const stepRules = `[{"when":{"user":"."},"reply":{"text":"ok"}}]`

// BenchmarkLoopStep measures the loop's cost per model step with the script
// model, no tool involved: engine.Send of a message to a fresh conversation
// until run_finished is published, a run of exactly one step. Interleaved
// with it, the baseline does on the same SQLite file the durable commits
// such a run makes, with prebuilt payloads: StartRun (user message,
// run_started), AppendEvents (text_delta), RecordStep (assistant message,
// message event), UpdateRun (completed, run_finished) — four fsynced
// transactions. The difference is the loop's own overhead: its reads
// (conversation, run, history, calls), the model call, JSON drafts, the
// driver goroutine and publishing.
//
// Metrics: ns/step of both, the overhead (target ≤ 1 ms per step) and the
// ratio. Conversation creation is outside both timings. ns/op is the wall
// time of one iteration (loop run + baseline + their setup).
//
//	go test -run '^$' -bench LoopStep -benchtime 1x ./bench/
func BenchmarkLoopStep(b *testing.B) {
	inst := startAgentd(b, benchDir(b), stepRules, nil)
	ctx := context.Background()

	loopStep := func() time.Duration {
		conv, err := inst.engine.CreateConversation(ctx, devPrincipal, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		events := inst.w.watch(conv.ID)
		defer inst.w.unwatch(conv.ID)
		t0 := time.Now()
		if _, err := inst.engine.Send(ctx, devPrincipal, conv.ID, "hello"); err != nil {
			b.Fatal(err)
		}
		fin := waitEvent(b, events, agentd.EventRunFinished)
		d := fin.at.Sub(t0)
		if s := field(b, fin, "status"); s != string(agentd.RunCompleted) {
			b.Fatalf("run finished %s: %s", s, fin.Data)
		}
		return d
	}
	// storeStep returns the time of the four commits and, separately, of
	// the five read transactions the loop makes around them (Conversation
	// in Send; Run, Messages, ToolCalls in the driver; Run once more).
	storeStep := func() (commits, reads time.Duration) {
		c, run, user, now, draft := prebuiltRun(b, inst, "hello")
		reply := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c, RunID: run.ID,
			Role: agentd.RoleAssistant, Content: "ok", CreatedAt: now}
		started := draft(&agentd.RunStartedPayload{RunID: run.ID, CorrelationID: run.CorrelationID})
		delta := draft(&agentd.TextDeltaPayload{RunID: run.ID, MessageID: reply.ID, Delta: "ok"})
		message := draft(&agentd.MessagePayload{RunID: run.ID, MessageID: reply.ID, Role: agentd.RoleAssistant, Content: "ok"})
		finished := draft(&agentd.RunFinishedPayload{RunID: run.ID, CorrelationID: run.CorrelationID,
			Status: agentd.RunCompleted, Reason: "model_stop", Usage: agentd.Usage{InputTokens: 6, OutputTokens: 1}})
		step := agentd.StepRecord{RunID: run.ID, Step: 1, Usage: agentd.Usage{InputTokens: 6, OutputTokens: 1}, Message: reply, Now: now}
		update := agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning, agentd.RunWaiting},
			Status: agentd.RunCompleted, Reason: "model_stop", Now: now}

		t0 := time.Now()
		if _, err := inst.store.StartRun(ctx, run, user, started); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.AppendEvents(ctx, delta); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.RecordStep(ctx, step, message); err != nil {
			b.Fatal(err)
		}
		if _, _, err := inst.store.UpdateRun(ctx, update, finished); err != nil {
			b.Fatal(err)
		}
		commits = time.Since(t0)

		t0 = time.Now()
		if _, err := inst.store.Conversation(ctx, c); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.Run(ctx, run.ID); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.Messages(ctx, c); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.ToolCalls(ctx, c); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.Run(ctx, run.ID); err != nil {
			b.Fatal(err)
		}
		return commits, time.Since(t0)
	}

	for range 5 { // warm up
		loopStep()
		storeStep()
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	loopD := make([]time.Duration, 0, n)
	storeD := make([]time.Duration, 0, n)
	readD := make([]time.Duration, 0, n)
	storeStep2 := func() {
		c, r := storeStep()
		storeD, readD = append(storeD, c), append(readD, r)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		if i%2 == 0 {
			loopD = append(loopD, loopStep())
			storeStep2()
		} else {
			storeStep2()
			loopD = append(loopD, loopStep())
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	l, s := summarize(loopD), summarize(storeD)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(l.mean.Nanoseconds()), "ns/step")
	b.ReportMetric(float64(s.mean.Nanoseconds()), "store-ns/step")
	b.ReportMetric(float64((l.mean - s.mean).Nanoseconds()), "overhead-ns/step")
	b.ReportMetric(float64(l.mean)/float64(s.mean), "ratio")

	var t strings.Builder
	fmt.Fprintf(&t, "one model step (script model, text only, no tool), %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-42s %9s %9s %9s %9s\n", "", "mean ms", "p50 ms", "p90 ms", "p99 ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-42s %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.mean), ms(s.p50), ms(s.p90), ms(s.p99))
	}
	row("loop: Send → run_finished published", l)
	row("store: the run's 4 commits, prebuilt", s)
	row("for reference: the run's 5 reads, alone", summarize(readD))
	fmt.Fprintf(&t, "  %-42s %9.3f %9.3f   (target ≤ 1 ms)\n", "loop overhead (loop − store)", ms(l.mean-s.mean), ms(l.p50-s.p50))
	fmt.Fprintf(&t, "  %-42s %9.2f %9.2f\n", "ratio loop / store", float64(l.mean)/float64(s.mean), float64(l.p50)/float64(s.p50))
	report(b, t.String())
}

// prebuiltRun creates a conversation through inst's engine and returns it
// with a running run (not stored yet) and its user message saying content,
// the instant they carry, and draft: one event draft of a payload at it.
func prebuiltRun(b *testing.B, inst *instance, content string) (conv string, run *agentd.Run, user *agentd.Message, now time.Time,
	draft func(agentd.EventPayload) []agentd.EventDraft) {
	cv, err := inst.engine.CreateConversation(context.Background(), devPrincipal, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	conv, now = cv.ID, time.Now().UTC()
	run = &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv, TenantID: cv.TenantID, ProjectID: cv.ProjectID,
		CorrelationID: "corr_bench", Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	user = &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv, RunID: run.ID,
		Role: agentd.RoleUser, Content: content, CreatedAt: now}
	draft = func(p agentd.EventPayload) []agentd.EventDraft {
		d, err := agentd.NewEventDraft(conv, now, p)
		if err != nil {
			b.Fatal(err)
		}
		return []agentd.EventDraft{d}
	}
	return conv, run, user, now, draft
}
