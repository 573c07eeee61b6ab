package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// BenchmarkApprovalCommit is the decision commit alone (docs/performance.md
// §13, §23): one UpdateToolCall approval with its decision, its audit entry
// and one event, through the real store on a SQLite file that holds 2,000
// parked calls in 200 conversations. It reports the median of the
// approvals beside ns/op (the mean); compare runs of two builds alternated:
//
//	go test -run '^$' -bench ApprovalCommit -benchtime 400x ./sqlite/
func BenchmarkApprovalCommit(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := t0.Add(time.Hour)
	var parked []*agentd.ToolCall
	park := func(convs, per int) {
		for range convs {
			c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant", ProjectID: "project",
				Agent: "agent", CreatedAt: t0}
			if err := db.CreateConversation(ctx, c); err != nil {
				b.Fatal(err)
			}
			run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: c.ID, TenantID: c.TenantID, ProjectID: c.ProjectID,
				CorrelationID: "corr", Status: agentd.RunRunning, CreatedAt: t0, UpdatedAt: t0}
			msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c.ID, RunID: run.ID,
				Role: agentd.RoleUser, Content: "hello", CreatedAt: t0}
			if _, err := db.StartRun(ctx, run, msg, nil); err != nil {
				b.Fatal(err)
			}
			var calls []*agentd.ToolCall
			for i := range per {
				calls = append(calls, &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: run.TenantID,
					ProjectID: run.ProjectID, ConversationID: c.ID, RunID: run.ID, CorrelationID: "corr", Step: 1, Index: i,
					Name: "tool", ServerID: "server", Arguments: json.RawMessage(`{"x":1}`), ArgumentsSHA256: "digest",
					Tier: agentd.TierConfirm, Status: agentd.StatusRequiresConfirmation, Method: "TOOL", Endpoint: "tool",
					CreatedAt: t0, UpdatedAt: t0, RequiresApprovalAt: &deadline})
			}
			if _, err := db.CreateToolCalls(ctx, calls, nil); err != nil {
				b.Fatal(err)
			}
			parked = append(parked, calls...)
		}
	}
	park(200, 10)
	approve := func(i int) time.Duration {
		if len(parked) == 0 {
			park(20, 10)
		}
		c := parked[0]
		parked = parked[1:]
		now := t0.Add(time.Duration(i+1) * time.Millisecond)
		u := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusApproved,
			Now: now, Decision: &agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: c.ID,
				Decision: agentd.DecisionApproved, Reason: "ok", DecidedBy: "key", Role: agentd.RoleOperator, Via: agentd.ViaSingle,
				ArgumentsSHA256: c.ArgumentsSHA256, CreatedAt: now}}
		ev := agentd.EventDraft{ConversationID: c.ConversationID, Type: "tool_call_approved",
			Data: json.RawMessage(fmt.Sprintf(`{"tool_call_id":%q}`, c.ID))}
		start := time.Now()
		if _, _, err := db.UpdateToolCall(ctx, u, []agentd.EventDraft{ev}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// Pages written per commit: the WAL's frames after a few approvals
	// from an empty WAL (fewer than the autocheckpoint's 1,000 frames).
	checkpoint := func(mode string) (frames int) {
		var busy, done int
		if err := db.writer.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &done); err != nil {
			b.Fatal(err)
		}
		return frames
	}
	const counted = 40
	checkpoint("TRUNCATE")
	for i := range counted {
		approve(-1 - i)
	}
	pages := float64(checkpoint("PASSIVE")) / counted
	took := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		took = append(took, approve(i))
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(took)), "cpu-µs/op")
	b.ReportMetric(pages, "pages/commit")
}

// cpuTime is the process's user and system CPU time so far (every
// goroutine's, the group commit's included).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
