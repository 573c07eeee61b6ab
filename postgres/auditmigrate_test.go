package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/pgtest"
)

// A database written before 0009 keeps its decision entries in audit: after
// the migration they are listed once each, in their order, and a decision
// recorded after it (read from its row) follows them.
func TestAuditMigratedFromDecisionRows(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	db := open(t, u)
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
	refused, old, fresh := call(0, agentd.StatusRefused), call(1, agentd.StatusApproved), call(2, agentd.StatusRequiresConfirmation)
	if _, err := db.CreateToolCalls(ctx, []*agentd.ToolCall{refused, old, fresh}, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// The schema before 0009, and a decision written as it wrote them: the
	// decision row and its entry in audit.
	conn := pgtest.Conn(t, u)
	for _, q := range []string{`DROP INDEX decisions_tenant`,
		`ALTER TABLE decisions DROP COLUMN audit_id, DROP COLUMN tier, DROP COLUMN escalated, DROP COLUMN tenant_id, DROP COLUMN project_id`,
		`DELETE FROM schema_migrations WHERE version = 9`,
		`INSERT INTO decisions (id, tool_call_id, decision, reason, decided_by, arguments_sha256, created_at, role, via)
			VALUES ('dec_old', '` + old.ID + `', 'approved', 'old', 'key-old', 'digest', 1, 'operator', 'single')`,
		`INSERT INTO audit (kind, tenant_id, project_id, conversation_id, run_id, tool_call_id, tool_name, key_id, role, via, decision,
			reason, tier, escalated, arguments_sha256, edited_arguments_sha256, connection, method, endpoint, outcome, created_at)
			VALUES ('decision', 't', 'p', '` + conv.ID + `', '` + run.ID + `', '` + old.ID + `', 'tool', 'key-old', 'operator', 'single',
			'approved', 'old', 'confirm', false, 'digest', '', '', '', '', '', 1)`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	db = open(t, u)
	now := t0.Add(time.Hour)
	if _, _, err := db.UpdateToolCall(ctx, agentd.CallUpdate{ID: fresh.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusApproved, Now: now, Decision: &agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: fresh.ID,
			Decision: agentd.DecisionApproved, DecidedBy: "key-new", Via: agentd.ViaSingle, ArgumentsSHA256: "digest", CreatedAt: now}}, nil); err != nil {
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
	want := []string{"refusal " + refused.ID + " system", "decision " + old.ID + " key-old", "decision " + fresh.ID + " key-new"}
	if !slices.Equal(got, want) {
		t.Errorf("entries after the migration:\n%q\nwant\n%q", got, want)
	}
}
