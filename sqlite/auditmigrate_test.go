package sqlite

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// A database written before 0024 keeps its decision entries in audit: after
// the migration they are listed once each, in their order, and the entries
// written after it (decisions read from their rows, the others from audit)
// follow them in commit order.
func TestAuditMigratedFromDecisionRows(t *testing.T) {
	db := openTest(t)
	path := db.Path()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
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
	call := func(i int, status agentd.CallStatus) *agentd.ToolCall {
		return &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p", ConversationID: conv.ID, RunID: run.ID,
			CorrelationID: "c", Step: 1, Index: i, Name: "tool", ServerID: "server", Arguments: json.RawMessage(`{}`), ArgumentsSHA256: "digest",
			Tier: agentd.TierConfirm, Status: status, Method: "TOOL", Endpoint: "tool", CreatedAt: t0, UpdatedAt: t0}
	}
	refused, old1, old2, fresh := call(0, agentd.StatusRefused), call(1, agentd.StatusApproved), call(2, agentd.StatusDenied),
		call(3, agentd.StatusRequiresConfirmation)
	if _, err := db.CreateToolCalls(ctx, []*agentd.ToolCall{refused, old1, old2, fresh}, nil); err != nil {
		t.Fatal(err)
	}
	// The schema before 0024, and two decisions written as it wrote them:
	// the decision row and its entry in audit, each table with its own ids.
	for _, q := range []string{`DROP TABLE audit_decisions_from`, `DROP INDEX decisions_tenant`, `ALTER TABLE decisions DROP COLUMN tier`,
		`ALTER TABLE decisions DROP COLUMN escalated`, `ALTER TABLE decisions DROP COLUMN tenant_id`,
		`ALTER TABLE decisions DROP COLUMN project_id`, `DELETE FROM schema_migrations WHERE version = 24`} {
		if _, err := db.writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []*agentd.ToolCall{old1, old2} {
		decision := []string{agentd.DecisionApproved, agentd.DecisionDenied}[i]
		at := t0.Add(time.Duration(i+1) * time.Minute).UnixNano()
		if _, err := db.writer.ExecContext(ctx, `INSERT INTO decisions (id, tool_call_id, decision, reason, decided_by, arguments_sha256,
			created_at, role, via) VALUES (?, ?, ?, 'old', 'key-old', 'digest', ?, 'operator', 'single')`,
			agentd.NewID(agentd.PrefixDecision), c.ID, decision, at); err != nil {
			t.Fatal(err)
		}
		if _, err := db.writer.ExecContext(ctx, `INSERT INTO audit (kind, tenant_id, project_id, conversation_id, run_id, tool_call_id,
			tool_name, key_id, role, via, decision, reason, tier, escalated, arguments_sha256, edited_arguments_sha256, connection, method,
			endpoint, outcome, created_at) VALUES ('decision', 't', 'p', ?, ?, ?, 'tool', 'key-old', 'operator', 'single', ?, 'old',
			'confirm', 0, 'digest', '', '', '', '', '', ?)`, conv.ID, run.ID, c.ID, decision, at); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.decisionsFrom != 2 {
		t.Errorf("decisions before the migration: %d, want 2", db.decisionsFrom)
	}
	now := t0.Add(time.Hour)
	if _, _, err := db.UpdateToolCall(ctx, agentd.CallUpdate{ID: fresh.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusApproved, Now: now, Decision: &agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: fresh.ID,
			Decision: agentd.DecisionApproved, DecidedBy: "key-new", Via: agentd.ViaSingle, ArgumentsSHA256: "digest", CreatedAt: now}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendAudit(ctx, agentd.AuditEntry{Kind: agentd.AuditToolEval, TenantID: "t", ProjectID: "p", KeyID: "k", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	es, err := db.Audit(ctx, agentd.AuditFilter{TenantID: "t", ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range es {
		got = append(got, e.Kind+" "+e.ToolCallID+" "+e.KeyID)
		if i > 0 && e.ID <= es[i-1].ID {
			t.Errorf("ids not increasing: %d then %d", es[i-1].ID, e.ID)
		}
	}
	want := []string{"refusal " + refused.ID + " system", "decision " + old1.ID + " key-old", "decision " + old2.ID + " key-old",
		"decision " + fresh.ID + " key-new", "tool_eval  k"}
	if !slices.Equal(got, want) {
		t.Errorf("entries after the migration:\n%q\nwant\n%q", got, want)
	}
	if len(es) == len(want) && es[2].Decision != agentd.DecisionDenied {
		t.Errorf("old denial = %+v", es[2])
	}
}
