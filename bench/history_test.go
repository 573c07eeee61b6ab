package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/tools/gofunc"
	"github.com/agentd-dev/agentd/toolset"
)

// historyCalls is how many tool calls a run of BenchmarkHistoryGrowth
// makes: each adds two messages to the model's history (the assistant
// message with the call, the call's result), so the last step's model
// call sees 1 + 2×400 = 801 messages.
const historyCalls = 400

// The two windows of history sizes compared, in messages the model sees
// at the step's model call.
const (
	historyEarlyMax = 41  // steps at 3–41 messages ("≈ 2–40")
	historyLateMin  = 761 // steps at 761–799 messages ("≈ 760–800")
	historyLateMax  = 2*historyCalls - 1
)

// historyRules: the user's message calls tick; each tick result calls it
// again while the history holds fewer than historyCalls results; then the
// answer is text and the run ends.
var historyRules = fmt.Sprintf(`[
	{"when":{"user":"."},"reply":{"tool_calls":[{"name":"tick"}]}},
	{"when":{"tool_result":"tick","results_below":%d},"reply":{"tool_calls":[{"name":"tick"}]}},
	{"when":{"tool_result":"tick"},"reply":{"text":"done"}}]`, historyCalls)

type tickArgs struct{}

type tickResult struct {
	OK bool `json:"ok"`
}

// tickSource is the auto-tier tool the runs call: a Go function (no
// fork, so that a step is the loop's and the store's work only).
func tickSource(tb testing.TB) toolset.Source {
	tick, err := gofunc.New("tick", "does nothing, cheaply",
		func(context.Context, tickArgs) (tickResult, error) { return tickResult{OK: true}, nil },
		gofunc.WithExposure(gofunc.Open))
	if err != nil {
		tb.Fatal(err)
	}
	src, err := gofunc.NewSource(tick)
	if err != nil {
		tb.Fatal(err)
	}
	return src
}

// BenchmarkHistoryGrowth measures whether a model step costs the same at
// the start of a long run and near its end (issue 19: the history read
// incrementally, and the per-step overhead as the history grows). One
// sample round is one run of historyCalls+1 model steps in one
// conversation: the script model answers every tick result with another
// tick call (an auto-tier Go function tool) until the history has about
// 800 messages, then with text. A step's time is the interval between the
// tool_call_started events of consecutive calls, as the hub had them: the
// tool's run, its result's commit, the driver's wake-up and reads (run,
// the run's calls, the history's new messages and their calls), the model
// call over the whole history, the step's commit and the next call's
// claim. Step k's interval is the step whose model call sees 2k+1
// messages.
//
// The baseline does, on the same SQLite file, the three commits such a
// step makes, with prebuilt payloads, on a conversation of its own that
// grows the same way: RecordStep (the assistant message and its approved
// call), UpdateToolCall approved → executing (tool_call_started),
// UpdateToolCall executing → completed (tool_call_result). A third row
// times alone, after each baseline step, the four reads the driver makes
// per step (Run; ToolCall, stepCalls' read of the step's unfinished call;
// MessagesAfter and MessageToolCalls, the history's). The driver makes the
// first two twice: before the tool's result and after. Rounds alternate which of the two goes first.
//
// Metrics: the loop's ns/step at ≈ 2–40 and ≈ 760–800 messages and their
// ratio (target ≤ 1.1), and the overhead (loop − store) at both sizes
// (target ≤ 0.5 ms). ns/op is the wall time of one round.
//
// The runs sub-benchmark (benchHistoryRuns) makes many runs of one step
// in conversations that are already long instead.
//
//	go test -run '^$' -bench HistoryGrowth -benchtime 1x ./bench/
func BenchmarkHistoryGrowth(b *testing.B) {
	b.Run("steps", benchHistorySteps)
	b.Run("runs", benchHistoryRuns)
}

// benchHistorySteps is BenchmarkHistoryGrowth's one run of many steps.
func benchHistorySteps(b *testing.B) {
	inst := startAgentdWith(b, benchDir(b), historyRules, nil,
		setup{wiring: benchWiring(), sources: []toolset.Source{tickSource(b)}, maxTurns: historyCalls + 10})
	var loopEarly, loopLate, storeEarly, storeLate, readEarly, readLate []time.Duration
	round := func(storeFirst, record bool) {
		var se, sl, re, rl []time.Duration
		if storeFirst {
			se, sl, re, rl = historyStoreRun(b, inst)
		}
		le, ll := historyLoopRun(b, inst)
		if !storeFirst {
			se, sl, re, rl = historyStoreRun(b, inst)
		}
		if record {
			loopEarly, loopLate = append(loopEarly, le...), append(loopLate, ll...)
			storeEarly, storeLate = append(storeEarly, se...), append(storeLate, sl...)
			readEarly, readLate = append(readEarly, re...), append(readLate, rl...)
		}
	}
	round(false, false) // warm up
	n := iterations(b, "AGENTD_BENCH_ROUNDS", 5)
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		round(i%2 == 1, true)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	le, ll := summarize(loopEarly), summarize(loopLate)
	se, sl := summarize(storeEarly), summarize(storeLate)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(le.mean.Nanoseconds()), "early-ns/step")
	b.ReportMetric(float64(ll.mean.Nanoseconds()), "late-ns/step")
	b.ReportMetric(float64(ll.mean)/float64(le.mean), "late/early")
	b.ReportMetric(float64((le.mean - se.mean).Nanoseconds()), "early-overhead-ns/step")
	b.ReportMetric(float64((ll.mean - sl.mean).Nanoseconds()), "late-overhead-ns/step")

	var t strings.Builder
	fmt.Fprintf(&t, "one run of %d tool steps (script model, auto Go tool), %d rounds, loop and store alternated;\n", historyCalls+1, n)
	fmt.Fprintf(&t, "steps at 3–%d and %d–%d messages of history (%d and %d samples)\n",
		historyEarlyMax, historyLateMin, historyLateMax, len(loopEarly), len(loopLate))
	fmt.Fprintf(&t, "  %-44s %9s %9s %9s %9s\n", "", "mean ms", "p50 ms", "p90 ms", "p99 ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-44s %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.mean), ms(s.p50), ms(s.p90), ms(s.p99))
	}
	row("loop: step at ≈ 2–40 messages", le)
	row("loop: step at ≈ 760–800 messages", ll)
	row("store: the step's 3 commits at ≈ 2–40", se)
	row("store: the step's 3 commits at ≈ 760–800", sl)
	row("for reference: the step's 4 reads at ≈ 2–40", summarize(readEarly))
	row("for reference: the step's 4 reads at ≈ 760–800", summarize(readLate))
	fmt.Fprintf(&t, "  %-44s %9.3f %9.3f   (target ≤ 0.5 ms)\n", "loop overhead (loop − store) at ≈ 2–40", ms(le.mean-se.mean), ms(le.p50-se.p50))
	fmt.Fprintf(&t, "  %-44s %9.3f %9.3f   (target ≤ 0.5 ms)\n", "loop overhead (loop − store) at ≈ 760–800", ms(ll.mean-sl.mean), ms(ll.p50-sl.p50))
	fmt.Fprintf(&t, "  %-44s %9.2f %9.2f   (target ≤ 1.10)\n", "ratio loop late / early", float64(ll.mean)/float64(le.mean), float64(ll.p50)/float64(le.p50))
	fmt.Fprintf(&t, "  %-44s %9.2f %9.2f\n", "ratio store late / early", float64(sl.mean)/float64(se.mean), float64(sl.p50)/float64(se.p50))
	report(b, t.String())
}

// historyWindow sorts step k's sample d into early or late by the size of
// the history its model call sees (2k+1 messages).
func historyWindow(k int, d time.Duration, early, late *[]time.Duration) {
	switch h := 2*k + 1; {
	case h <= historyEarlyMax:
		*early = append(*early, d)
	case h >= historyLateMin && h <= historyLateMax:
		*late = append(*late, d)
	}
}

// historyLoopRun sends one message to a new conversation and returns the
// step intervals of the run, early and late (historyWindow).
func historyLoopRun(b *testing.B, inst *instance) (early, late []time.Duration) {
	ctx := context.Background()
	conv, err := inst.engine.CreateConversation(ctx, devPrincipal, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	events := inst.w.watch(conv.ID)
	defer inst.w.unwatch(conv.ID)
	if _, err := inst.engine.Send(ctx, devPrincipal, conv.ID, "go"); err != nil {
		b.Fatal(err)
	}
	var started []time.Time
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for done := false; !done; {
		select {
		case e := <-events:
			switch e.Type {
			case agentd.EventToolCallStarted:
				started = append(started, e.at)
			case agentd.EventRunFinished:
				if s := field(b, e, "status"); s != string(agentd.RunCompleted) || field(b, e, "reason") != "model_stop" {
					b.Fatalf("run finished %s: %s", s, e.Data)
				}
				done = true
			}
		case <-deadline.C:
			b.Fatalf("no run_finished within %s (%d calls started)", waitLimit, len(started))
		}
	}
	if len(started) != historyCalls {
		b.Fatalf("%d tool calls started, want %d", len(started), historyCalls)
	}
	for k := 1; k < len(started); k++ {
		historyWindow(k, started[k].Sub(started[k-1]), &early, &late)
	}
	return early, late
}

// historyStoreRun makes on a new conversation the commits of a run of
// historyCalls tool steps with prebuilt payloads, and returns the time of
// each step's three commits and, separately, of the four reads the driver
// makes before the next step, early and late (historyWindow).
func historyStoreRun(b *testing.B, inst *instance) (commitEarly, commitLate, readEarly, readLate []time.Duration) {
	ctx := context.Background()
	c, run, user, now, draft := prebuiltRun(b, inst, "go")
	if _, err := inst.store.StartRun(ctx, run, user, draft(&agentd.RunStartedPayload{RunID: run.ID, CorrelationID: run.CorrelationID})); err != nil {
		b.Fatal(err)
	}
	args, result := json.RawMessage(`{}`), json.RawMessage(`{"ok":true}`)
	held := user.ID // the last message the driver holds: MessagesAfter's cursor
	for k := 1; k <= historyCalls; k++ {
		msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c, RunID: run.ID,
			Role: agentd.RoleAssistant, CreatedAt: now}
		call := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: run.TenantID, ProjectID: run.ProjectID,
			ConversationID: c, RunID: run.ID, CorrelationID: run.CorrelationID, MessageID: msg.ID, Step: k,
			Name: "tick", ServerID: gofunc.ServerID, Arguments: args, ArgumentsSHA256: "bench", Tier: agentd.TierAuto,
			Status: agentd.StatusApproved, CreatedAt: now, UpdatedAt: now}
		step := agentd.StepRecord{RunID: run.ID, Step: k, Usage: agentd.Usage{InputTokens: int64(k), OutputTokens: 1},
			StopReason: "tool_use", Message: msg, Calls: []*agentd.ToolCall{call}, Now: now}
		claim := agentd.CallUpdate{ID: call.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusExecuting, Now: now}
		startedEv := draft(&agentd.ToolCallStartedPayload{RunID: run.ID, ToolCallID: call.ID, ToolName: call.Name,
			ServerID: call.ServerID, Arguments: args})
		done := agentd.CallUpdate{ID: call.ID, From: []agentd.CallStatus{agentd.StatusExecuting}, Status: agentd.StatusCompleted,
			Result: result, Now: now}
		resultEv := draft(&agentd.ToolCallResultPayload{RunID: run.ID, ToolCallID: call.ID, ToolName: call.Name,
			Status: agentd.StatusCompleted, Result: result})

		t0 := time.Now()
		if _, err := inst.store.RecordStep(ctx, step, nil); err != nil {
			b.Fatal(err)
		}
		if _, _, err := inst.store.UpdateToolCall(ctx, claim, startedEv); err != nil {
			b.Fatal(err)
		}
		if _, _, err := inst.store.UpdateToolCall(ctx, done, resultEv); err != nil {
			b.Fatal(err)
		}
		commits := time.Since(t0)

		// The driver's reads before the next step: the run, the step's
		// calls (stepCalls), the history's new message and its calls.
		t0 = time.Now()
		if _, err := inst.store.Run(ctx, run.ID); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.store.ToolCall(ctx, call.ID); err != nil {
			b.Fatal(err)
		}
		if msgs, err := inst.store.MessagesAfter(ctx, c, held); err != nil || len(msgs) != 1 {
			b.Fatalf("MessagesAfter %s (step %d): %d messages, %v", held, k, len(msgs), err)
		}
		held = msg.ID
		if calls, err := inst.store.MessageToolCalls(ctx, c, []string{msg.ID}); err != nil || len(calls) != 1 {
			b.Fatalf("MessageToolCalls: %d calls, %v", len(calls), err)
		}
		reads := time.Since(t0)
		historyWindow(k, commits, &commitEarly, &commitLate)
		historyWindow(k, reads, &readEarly, &readLate)
	}
	return commitEarly, commitLate, readEarly, readLate
}
