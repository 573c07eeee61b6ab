package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// subagentEvent is the subagent_event of the task call taskID that wraps
// the inner event p.
func subagentEvent(t *testing.T, conv, taskID string, p agentd.EventPayload) agentd.EventDraft {
	t.Helper()
	now := time.Now().UTC()
	inner, err := agentd.NewEventDraft(conv, now, p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := agentd.NewEventDraft(conv, now, &agentd.SubagentEventPayload{ToolCallID: taskID, Subagent: "researcher", Event: inner.Data})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A subagent's calls reach the parent's webhooks: its tool_call_started,
// tool_call_result and tool_call_refused (inside subagent_events) are
// delivered as llm.tool_call_started, _completed and _refused of the
// subagent's call, routed by the task call's tenant and project, marked
// with the subagent's name and the task call, and valid under the
// schemas; its text events are not delivered.
func TestSubagentCallsDelivered(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := webhooktest.NewReceiver(t)
	eps, err := webhook.ParseConfig(json.RawMessage(fmt.Sprintf(`[{"id":"ops","url":%q,"secret_env":"S","tenant_id":"t"},`+
		`{"id":"other","url":%q,"secret_env":"S","tenant_id":"u"}]`, rc.URL, rc.URL)), env(map[string]string{"S": goodSecret}))
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(store, feed.Options{})
	defer f.Close()
	svc, err := webhook.New(store, f, eps, webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	task := seedStarted(t, store, 1)[0]
	tc, err := store.ToolCall(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	conv, run := tc.ConversationID, tc.RunID
	drafts := []agentd.EventDraft{
		subagentEvent(t, conv, task, &agentd.TextDeltaPayload{RunID: run, MessageID: "msg_1", Delta: "looking"}),
		subagentEvent(t, conv, task, &agentd.ToolCallStartedPayload{RunID: run, ToolCallID: "call_inner1", ToolName: "lookup_order",
			ServerID: "tools", Arguments: json.RawMessage(`{"order_id":"A-1"}`)}),
		subagentEvent(t, conv, task, &agentd.ToolCallResultPayload{RunID: run, ToolCallID: "call_inner1", ToolName: "lookup_order",
			Status: agentd.StatusCompleted, Result: json.RawMessage(`{"status":"shipped"}`)}),
		subagentEvent(t, conv, task, &agentd.ToolCallRefusedPayload{RunID: run, ToolCallID: "call_inner2", ToolName: "refund_payment",
			ServerID: "tools", Tier: agentd.TierConfirm, Reason: `"refund_payment" needs a person's approval, and a subagent cannot ask for it`}),
	}
	if _, err := store.AppendEvents(ctx, drafts); err != nil {
		t.Fatal(err)
	}
	f.Notify()
	rc.WaitFor(t, 30*time.Second, "the task call's started and its subagent's three calls", func(r []webhooktest.Request) bool { return len(r) >= 4 })
	time.Sleep(200 * time.Millisecond) // nothing more comes (no text event, no other tenant's endpoint)
	reqs := rc.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d deliveries, want 4", len(reqs))
	}
	type body struct {
		EventContext webhook.EventContext `json:"event_context"`
		ToolCall     webhook.ToolCall     `json:"tool_call"`
	}
	got := map[string]body{}
	for _, r := range reqs {
		webhooktest.Validate(t, r.Body)
		if err := webhooktest.Verify(goodSecret, r); err != nil {
			t.Errorf("signature: %v", err)
		}
		var b body
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatal(err)
		}
		if b.ToolCall.ID != task {
			got[b.EventContext.EventName+" "+b.ToolCall.ID] = b
		}
	}
	for key, want := range map[string]struct{ name, server, status, args string }{
		webhook.EventStarted + " call_inner1":   {"lookup_order", "tools", "TOOL_EXECUTION_STATUS_EXECUTING", `{"order_id":"A-1"}`},
		webhook.EventCompleted + " call_inner1": {"lookup_order", "", "TOOL_EXECUTION_STATUS_COMPLETED", `{}`},
		webhook.EventRefused + " call_inner2":   {"refund_payment", "tools", "TOOL_EXECUTION_STATUS_REFUSED", `{}`},
	} {
		b, ok := got[key]
		if !ok {
			t.Errorf("no delivery %s among %v", key, got)
			continue
		}
		c, ec := b.ToolCall, b.EventContext
		if c.Name != want.name || c.ServerID != want.server || c.Status != want.status || string(c.ArgumentsJSON) != want.args ||
			c.Subagent != "researcher" || c.TaskToolCallID != task {
			t.Errorf("%s: tool_call %+v", key, c)
		}
		if ec.TenantID != "t" || ec.ProjectID != "p" || ec.CorrelationID != "corr" || ec.CallerKey != "t:"+conv {
			t.Errorf("%s: event_context %+v", key, ec)
		}
	}
	if c := got[webhook.EventCompleted+" call_inner1"].ToolCall; string(c.ResultJSON) != `{"status":"shipped"}` {
		t.Errorf("completed result %s", c.ResultJSON)
	}
	if c := got[webhook.EventRefused+" call_inner2"].ToolCall; c.Reason == "" {
		t.Errorf("refused without its reason")
	}
}
