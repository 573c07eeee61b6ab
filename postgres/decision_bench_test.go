package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/postgres"
)

// BenchmarkApprovalCommit is sqlite's BenchmarkApprovalCommit on
// PostgreSQL (docs/performance.md §23): one UpdateToolCall approval with its
// decision, its audit entry and one event, 2,000 calls parked in 200
// conversations, the median beside ns/op.
//
//	bash -c 'source scripts/postgres.sh && go test -run "^$" -bench ApprovalCommit -benchtime 400x ./postgres/'
func BenchmarkApprovalCommit(b *testing.B) {
	db, err := postgres.Open(context.Background(), pgtest.NewDatabase(b, ""))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := t0.Add(time.Hour)
	var parked []*agentd.ToolCall
	for range 200 {
		c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant", ProjectID: "project", Agent: "agent", CreatedAt: t0}
		if err := db.CreateConversation(ctx, c); err != nil {
			b.Fatal(err)
		}
		run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: c.ID, TenantID: c.TenantID, ProjectID: c.ProjectID,
			CorrelationID: "corr", Status: agentd.RunRunning, CreatedAt: t0, UpdatedAt: t0}
		if _, err := db.StartRun(ctx, run, &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c.ID, RunID: run.ID,
			Role: agentd.RoleUser, Content: "hello", CreatedAt: t0}, nil); err != nil {
			b.Fatal(err)
		}
		var calls []*agentd.ToolCall
		for i := range 10 {
			calls = append(calls, &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: run.TenantID, ProjectID: run.ProjectID,
				ConversationID: c.ID, RunID: run.ID, CorrelationID: "corr", Step: 1, Index: i, Name: "tool", ServerID: "server",
				Arguments: json.RawMessage(`{"x":1}`), ArgumentsSHA256: "digest", Tier: agentd.TierConfirm,
				Status: agentd.StatusRequiresConfirmation, Method: "TOOL", Endpoint: "tool", CreatedAt: t0, UpdatedAt: t0,
				RequiresApprovalAt: &deadline})
		}
		if _, err := db.CreateToolCalls(ctx, calls, nil); err != nil {
			b.Fatal(err)
		}
		parked = append(parked, calls...)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i >= len(parked) {
			b.Fatalf("more than %d approvals: use -benchtime %dx or less", len(parked), len(parked))
		}
		c := parked[i]
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
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
}
