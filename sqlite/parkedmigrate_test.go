package sqlite

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// A database written before 0026 has no count of parked calls per run: the
// migration counts each active run's parked calls at its step, so that
// RunsToDrive returns the waiting run with nothing parked and holds the
// one with a parked call until it is decided.
func TestRunsParkedMigrated(t *testing.T) {
	db := openTest(t)
	path := db.Path()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// waitingRun starts a run, records its step 1 with one call per
	// status and leaves it waiting.
	waitingRun := func(statuses ...agentd.CallStatus) (*agentd.Run, []*agentd.ToolCall) {
		conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a", CreatedAt: t0}
		if err := db.CreateConversation(ctx, conv); err != nil {
			t.Fatal(err)
		}
		run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t", ProjectID: "p", CorrelationID: "c",
			Status: agentd.RunRunning, CreatedAt: t0, UpdatedAt: t0}
		if _, err := db.StartRun(ctx, run, &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID,
			Role: agentd.RoleUser, Content: "hi", CreatedAt: t0}, nil); err != nil {
			t.Fatal(err)
		}
		var calls []*agentd.ToolCall
		for i, st := range statuses {
			calls = append(calls, &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p",
				Step: 1, Index: i, Name: "tool", ServerID: "server", Arguments: json.RawMessage(`{}`), ArgumentsSHA256: "digest",
				Tier: agentd.TierConfirm, Status: st, Method: "TOOL", Endpoint: "tool", CreatedAt: t0, UpdatedAt: t0})
		}
		if _, err := db.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Calls: calls, Now: t0}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, Status: agentd.RunWaiting, Now: t0}, nil); err != nil {
			t.Fatal(err)
		}
		return run, calls
	}
	parked, parkedCalls := waitingRun(agentd.StatusCompleted, agentd.StatusRequiresConfirmation)
	resolved, _ := waitingRun(agentd.StatusCompleted, agentd.StatusDenied)
	// The schema before 0026.
	for _, q := range []string{`DROP INDEX runs_to_drive`, `ALTER TABLE runs DROP COLUMN parked`,
		`DELETE FROM schema_migrations WHERE version = 26`} {
		if _, err := db.writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	toDrive := func() []string {
		t.Helper()
		runs, err := db.RunsToDrive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := toDrive(); !slices.Equal(got, []string{resolved.ID}) {
		t.Errorf("RunsToDrive after the migration = %q, want the resolved run %q only", got, resolved.ID)
	}
	if _, _, err := db.UpdateToolCall(ctx, agentd.CallUpdate{ID: parkedCalls[1].ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusApproved, Now: t0}, nil); err != nil {
		t.Fatal(err)
	}
	if got := toDrive(); !slices.Equal(got, []string{parked.ID, resolved.ID}) {
		t.Errorf("RunsToDrive after the decision = %q, want %q", got, []string{parked.ID, resolved.ID})
	}
}
