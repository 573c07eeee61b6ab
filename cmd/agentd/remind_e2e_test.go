package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// Issue 22 acceptance 4 (SPEC §11.3) on the real binary: a reminder
// arrives on the stream and as a signed webhook before the deadline; an
// extension moves the deadline on the stream, the pending list and the
// call; one past max_extension is 422; a key the rule does not cover is
// 403 with the rule's code.
func TestRemindAndExtend(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := govProject(t, `{"approvers":["operator"],"reminders":["2s"],"max_extension":"1m"}`)
	setAgentField(t, dir, "approval_timeout", "3s")
	rc := webhooktest.NewReceiver(t)
	secret := newSecret(t)
	addWebhook(t, dir, map[string]any{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET"})
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog, "OPS_WEBHOOK_SECRET="+secret)

	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	cr := st.waitFor("confirmation_required", nil)
	callID, deadline := str(cr.Data, "tool_call_id"), str(cr.Data, "requires_approval_at")

	rem := st.waitFor("confirmation_reminder", nil)
	if str(rem.Data, "tool_call_id") != callID || str(rem.Data, "requires_approval_at") != deadline || str(rem.Data, "offset") != "2s" {
		t.Fatalf("confirmation_reminder %s", rem.Raw)
	}
	if ms := rem.Data["remaining_ms"].(float64); ms <= 0 || ms > 2000 {
		t.Fatalf("remaining_ms %v", ms)
	}
	reqs := rc.WaitFor(t, waitLimit, "the reminder webhook", func(r []webhooktest.Request) bool {
		return len(webhooktest.WithEvent(r, webhook.EventApprovalReminder)) == 1
	})
	wr := webhooktest.WithEvent(reqs, webhook.EventApprovalReminder)[0]
	webhooktest.Validate(t, wr.Body)
	if err := webhooktest.Verify(secret, wr); err != nil {
		t.Fatalf("the reminder's signature: %v", err)
	}
	if p := bodyOf(t, wr); p.ToolCall.ID != callID || p.ToolCall.ReminderOffset != "2s" || p.ToolCall.RequiresApprovalAt.Format(time.RFC3339Nano) != deadline {
		t.Fatalf("reminder webhook %s", wr.Body)
	}

	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/extend", "k-owner", `{"by":"30s"}`)
	if status != http.StatusForbidden || errCode(m) != "approver_not_allowed" {
		t.Fatalf("the owner extends: %d %v", status, m)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/extend", "k-op1", `{"by":"2m"}`)
	if status != http.StatusUnprocessableEntity || errCode(m) != "extension_exceeds_max" {
		t.Fatalf("past max_extension: %d %v", status, m)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/extend", "k-op1", `{"by":"40s","reason":"waiting for the invoice"}`)
	if status != 200 || m["requires_approval_at"] == deadline || m["status"] != "requires_confirmation" {
		t.Fatalf("extend: %d %v", status, m)
	}
	newDeadline := m["requires_approval_at"].(string)
	old, _ := time.Parse(time.RFC3339Nano, deadline)
	if got, _ := time.Parse(time.RFC3339Nano, newDeadline); !got.Equal(old.Add(40 * time.Second)) {
		t.Fatalf("new deadline %s, want %s + 40s", newDeadline, deadline)
	}
	ext := st.waitFor("confirmation_extended", nil)
	if str(ext.Data, "requires_approval_at") != newDeadline || str(ext.Data, "previous_requires_approval_at") != deadline ||
		str(ext.Data, "extended_by") != "op1" || str(ext.Data, "by") != "40s" {
		t.Fatalf("confirmation_extended %s", ext.Raw)
	}
	if c := getCall(t, base, "k-op1", callID); c["requires_approval_at"] != newDeadline {
		t.Fatalf("the call's deadline %v, want %s", c["requires_approval_at"], newDeadline)
	}
	status, list := call(t, http.MethodGet, base+"/v1/approvals", "k-op1", "")
	if status != 200 || len(list["approvals"].([]any)) != 1 || list["approvals"].([]any)[0].(map[string]any)["requires_approval_at"] != newDeadline {
		t.Fatalf("pending list: %d %v", status, list)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/extend", "k-op2", `{"by":"21s"}`)
	if status != http.StatusUnprocessableEntity || errCode(m) != "extension_exceeds_max" {
		t.Fatalf("a second extension past the total: %d %v", status, m)
	}
	// A "by" so large that adding it to the 40s would overflow: 422, not a
	// 400 from the store's date range.
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/extend", "k-op2", `{"by":"2562047h47m16s"}`)
	if status != http.StatusUnprocessableEntity || errCode(m) != "extension_exceeds_max" {
		t.Fatalf("an extension that would overflow: %d %v", status, m)
	}
	reqs = rc.WaitFor(t, waitLimit, "the extension webhook", func(r []webhooktest.Request) bool {
		return len(webhooktest.WithEvent(r, webhook.EventApprovalExtended)) == 1
	})
	we := webhooktest.WithEvent(reqs, webhook.EventApprovalExtended)[0]
	webhooktest.Validate(t, we.Body)
	if p := bodyOf(t, we); p.ToolCall.ExtendedBy != "op1" || p.ToolCall.RequiresApprovalAt.Format(time.RFC3339Nano) != newDeadline {
		t.Fatalf("extension webhook %s", we.Body)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-op1", `{"decision":"deny"}`)
	if status != 200 {
		t.Fatalf("deny: %d %v", status, m)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/extend", "k-op1", `{"by":"1s"}`)
	if status != http.StatusConflict {
		t.Fatalf("extending a decided call: %d %v", status, m)
	}
}

// setAgentField sets one field of the project's agent.json.
func setAgentField(t *testing.T, dir, name string, value any) {
	t.Helper()
	setJSONField(t, filepath.Join(dir, "agent.json"), name, value)
}

// addWebhook adds webhook endpoints to the project's agentd.json, keeping
// its other fields.
func addWebhook(t *testing.T, dir string, endpoints ...map[string]any) {
	t.Helper()
	setServerField(t, dir, "webhooks", endpoints)
}
