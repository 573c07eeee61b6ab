package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// TestQueryPlans pins the indexes of the queries whose cost must not grow
// with the number of parked calls, finished runs or audit entries (a page
// is not sorted: it is read from its index in id order): NextDeadline reads one
// entry of tool_calls_status; RunsToDrive walks runs_to_drive (the
// running runs and the waiting runs with nothing parked: no run that waits
// for a decision, no call); the event log's reads each search one b-tree, in the
// order they return rows (no sort); a model step's history reads only
// what is new.
func TestQueryPlans(t *testing.T) {
	db := openTest(t)
	// Parameters are inlined as literals: EXPLAIN needs a value for each.
	inline := func(q string, args []any) string {
		for _, a := range append(args, 50) {
			v := fmt.Sprint(a)
			if s, ok := a.(string); ok {
				v = "'" + s + "'"
			}
			q = strings.Replace(q, "?", v, 1)
		}
		return q
	}
	pending := func(f agentd.PendingFilter) string {
		return inline(sqlstore.PendingQuery(sqlstore.SQLite, f))
	}
	audit := func(f agentd.AuditFilter) string {
		return inline(sqlstore.AuditQuery(f))
	}
	inputs := func(f agentd.InputFilter) string {
		return inline(sqlstore.InputsQuery(f))
	}
	plans := sqlstore.PlanQueries(sqlstore.SQLite)
	decided := func(f agentd.AuditFilter) string {
		q, args, _ := decisionEntries(f, 0)
		return inline(q, args)
	}
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		// GET /v1/approvals: each filter reads its own index of parked
		// calls, in id order, so a first page costs a page however many
		// calls are parked.
		{"ParkedCount", plans["ParkedCount"], []string{"SEARCH tool_calls USING COVERING INDEX tool_calls_status"}},
		{"Pending", pending(agentd.PendingFilter{}), []string{"SEARCH tool_calls USING INDEX tool_calls_tenant_status"}},
		{"Pending/server_id", pending(agentd.PendingFilter{ServerID: "x"}), []string{"SEARCH tool_calls USING INDEX tool_calls_parked_tool"}},
		{"Pending/server_id+tool_name", pending(agentd.PendingFilter{ServerID: "x", ToolName: "y"}), []string{"SEARCH tool_calls USING INDEX tool_calls_parked_tool (tenant_id=? AND project_id=? AND server_id=? AND id>?)"}},
		{"Conversation/conversation_id", pending(agentd.PendingFilter{ConversationID: "x"}), []string{"SEARCH tool_calls USING INDEX tool_calls_conversation"}},
		{"Pending/expires_before", pending(agentd.PendingFilter{ExpiresBefore: time.Now()}), []string{"SEARCH tool_calls USING INDEX tool_calls_parked_deadline"}},
		{"Pending/expires_before/page 2", pending(agentd.PendingFilter{ExpiresBefore: time.Now(), After: "call_x"}), []string{"SEARCH tool_calls USING INDEX tool_calls_parked_deadline"}},
		{"Audit", audit(agentd.AuditFilter{TenantID: "t", ProjectID: "p"}), []string{"SEARCH audit USING INDEX audit_tenant (tenant_id=? AND project_id=? AND rowid>?)"}},
		{"Audit/tool_call_id", audit(agentd.AuditFilter{TenantID: "t", ProjectID: "p", ToolCallID: "x"}),
			[]string{"SEARCH audit USING INDEX audit_conversation (tenant_id=? AND project_id=? AND conversation_id=? AND rowid>?)", "SEARCH tool_calls USING INDEX sqlite_autoindex_tool_calls_1 (id=?)"}},
		{"Audit/tool_call_id+conversation_id", audit(agentd.AuditFilter{TenantID: "t", ProjectID: "p", ToolCallID: "x", ConversationID: "y"}),
			[]string{"SEARCH audit USING INDEX audit_conversation (tenant_id=? AND project_id=? AND conversation_id=? AND rowid>?)"}},
		{"Audit/conversation_id", audit(agentd.AuditFilter{TenantID: "t", ProjectID: "p", ConversationID: "x"}), []string{"SEARCH audit USING INDEX audit_conversation (tenant_id=? AND project_id=? AND conversation_id=? AND rowid>?)"}},
		// The entries held by decisions rows (0024): from the tenant's
		// decisions in rid order, each joined to its call by id; a call's from its
		// decisions; a conversation's from its calls' decisions, sorted
		// (a conversation has few calls; not a page of the whole log).
		{"Audit/decisions", decided(agentd.AuditFilter{TenantID: "t", ProjectID: "p"}), []string{
			"SEARCH d USING INDEX decisions_tenant (tenant_id=? AND project_id=? AND rowid>?)", "SEARCH c USING INDEX sqlite_autoindex_tool_calls_1 (id=?)"}},
		{"Audit/decisions/tool_call_id", decided(agentd.AuditFilter{TenantID: "t", ProjectID: "p", ToolCallID: "x", Kind: agentd.AuditDecision}), []string{
			"SEARCH d USING INDEX decisions_tool_call (tool_call_id=? AND rid>?)", "SEARCH c USING INDEX sqlite_autoindex_tool_calls_1 (id=?)"}},
		{"Decisions/conversation_id", decided(agentd.AuditFilter{TenantID: "t", ProjectID: "p", ConversationID: "x"}), []string{
			"SEARCH c USING INDEX tool_calls_conversation (conversation_id=?)", "SEARCH d USING INDEX decisions_tool_call (tool_call_id=? AND rid>?)"}},
		// GET /v1/webhooks/endpoints: a tenant's project's backlog is
		// counted from entries of its pending deliveries (0014), not from
		// its whole delivery log.
		{"WebhookQueueDepth/tenant", plans["WebhookQueueDepth/tenant"], []string{"SEARCH webhook_deliveries USING COVERING INDEX webhook_deliveries_pending (tenant_id=? AND project_id=?)"}},
		// A classification's grant lookup (SPEC §11.2): two ranges of
		// grants_live, however many grants other conversations and tools
		// have.
		{"ActiveGrants", plans["ActiveGrants"], []string{
			"SEARCH grants USING INDEX grants_live (tenant_id=? AND project_id=? AND tool_name=? AND scope=?)\n",
			"SEARCH grants USING INDEX grants_live (tenant_id=? AND project_id=? AND tool_name=? AND scope=? AND conversation_id=? AND expires_at>?)"}},
		// A model step's history read (issue 19): the messages after the
		// last one held, from the conversation's index after its rid (no
		// OFFSET stepping through those held), and the calls of the
		// messages named, from tool_calls_message (0025), not all of the
		// conversation's calls; those few are sorted.
		{"MessagesAfter", plans["MessagesAfter"], []string{
			"SEARCH messages USING INDEX messages_conversation (conversation_id=? AND rid>?)",
			"SEARCH messages USING INDEX sqlite_autoindex_messages_1 (id=?)"}},
		{"MessageToolCalls", plans["MessageToolCalls"], []string{
			"SEARCH tool_calls USING INDEX tool_calls_message (message_id=?)"}},
		// A history read after a cursor (issue 29): the messages after the
		// cursor's rid from the conversation's index, their calls from
		// tool_calls_message; never all of the conversation's calls.
		{"ToolCallsAfter", plans["ToolCallsAfter"], []string{
			"SEARCH messages USING INDEX messages_conversation (conversation_id=? AND rid>?)",
			"SEARCH tool_calls USING INDEX tool_calls_message (message_id=?)"}},
		{"NextDeadline", plans["NextDeadline"], []string{"SEARCH tool_calls USING COVERING INDEX tool_calls_status (status=? AND requires_approval_at>?)"}},
		// The reminder sweep of every lease tick (loop/remind.go): a range
		// of deadlines, however many calls are parked.
		{"ToolCallsDueBetween", plans["ToolCallsDueBetween"],
			[]string{"SEARCH tool_calls USING INDEX tool_calls_status (status=? AND requires_approval_at>? AND requires_approval_at<?)"}},
		// GET /v1/inputs (SPEC §12.2): a tenant's inputs, or its pending
		// ones, in id order from their index; the deadline timer's reads
		// of the pending inputs' deadlines.
		{"Inputs", inputs(agentd.InputFilter{TenantID: "t", ProjectID: "p"}), []string{"SEARCH inputs USING INDEX inputs_by_tenant (tenant_id=? AND project_id=? AND id>?)"}},
		{"Inputs/pending", inputs(agentd.InputFilter{TenantID: "t", ProjectID: "p", Status: agentd.InputPending}),
			[]string{"SEARCH inputs USING INDEX inputs_pending (tenant_id=? AND project_id=? AND id>?)"}},
		{"Inputs/created_by", inputs(agentd.InputFilter{TenantID: "t", ProjectID: "p", Status: agentd.InputPending, CreatedBy: "k"}),
			[]string{"SEARCH inputs USING INDEX inputs_pending (tenant_id=? AND project_id=? AND id>?)"}},
		{"DueInputs", plans["DueInputs"], []string{"SEARCH inputs USING INDEX inputs_due (expires_at<?)"}},
		{"NextInputDeadline", plans["NextInputDeadline"], []string{"SEARCH inputs USING COVERING INDEX inputs_due (expires_at>?)"}},
		{"RunsToDrive", plans["RunsToDrive"],
			[]string{"SCAN runs USING INDEX runs_to_drive"}},
		// The event log is stored in position order (0011): the feed reads
		// it by row id, a tenant's feed by its index, a stream's replay by
		// the conversation's.
		{"EventsAfter", plans["EventsAfter"], []string{"SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"}},
		{"EventsAfter tenant", plans["EventsAfter tenant"], []string{"SEARCH events USING INDEX events_tenant (tenant_id=? AND rowid>?)"}},
		{"EventsAfter project", plans["EventsAfter project"], []string{"SEARCH events USING INDEX events_tenant (tenant_id=? AND rowid>?)"}},
		{"Events", plans["Events"],
			[]string{"SEARCH events USING INDEX events_conversation_seq (conversation_id=? AND seq>?)"}},
	} {
		args := make([]any, strings.Count(c.query, "?"))
		rows, err := db.reader.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+c.query, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, w, got)
			}
		}
		paged := strings.HasPrefix(c.name, "Pending") || strings.HasPrefix(c.name, "Audit") || strings.HasPrefix(c.name, "Inputs")
		// A json_each of a parameter is the list it names, not a table; a
		// scan of runs_to_drive reads the runs RunsToDrive returns, the
		// partial index holds no other.
		scans := strings.Contains(strings.NewReplacer("SCAN json_each VIRTUAL TABLE", "",
			"SCAN runs USING INDEX runs_to_drive", "").Replace(got), "SCAN ")
		if scans || (paged || strings.Contains(c.name, "Events")) && strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan scans a table:\n%s", c.name, got)
		}
	}
}
