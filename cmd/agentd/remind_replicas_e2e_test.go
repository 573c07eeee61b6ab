package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// Issue 22 (SPEC §11.3) across replicas: replica A parks a call whose rule
// has a reminder 3 s before its 6 s deadline and is killed with SIGKILL
// before the reminder is due. B and C, started before A parked (so their
// start-up read of the parked calls did not see it), read the reminders
// due soon every lease tick (--run-lease 2s: every 667 ms): the reminder
// arrives once on the stream and once as a signed webhook, before the
// call expires, though both replicas noted it.
func TestReplicaKilledReminderSentByAnother(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog := govProject(t, `{"reminders":["3s"]}`)
	setAgentField(t, dir, "approval_timeout", "6s")
	rc := webhooktest.NewReceiver(t)
	secret := newSecret(t)
	addWebhook(t, dir, map[string]any{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET",
		"events": []string{webhook.EventApprovalReminder}})
	o := replicas.Options{Project: dir, DatabaseURL: u, Args: []string{"--run-lease", "2s"},
		Env: []string{"AGENTD_TEST_LOG=" + execLog, "OPS_WEBHOOK_SECRET=" + secret}}
	a := replicas.Add(t, "A", o)
	b, c := replicas.Add(t, "B", o), replicas.Add(t, "C", o)
	conv, _ := newConversation(t, a.Base, "k-owner")
	st := openStream(t, b.Base, "k-owner", conv, 0)
	send(t, a.Base, "k-owner", conv, "pay the bill")
	cr := st.waitFor("confirmation_required", nil)
	a.Kill()
	callID := str(cr.Data, "tool_call_id")
	deadline, err := time.Parse(time.RFC3339Nano, str(cr.Data, "requires_approval_at"))
	must(t, err)
	if !time.Now().Before(deadline.Add(-3 * time.Second)) {
		t.Fatalf("A was killed after its reminder was due (deadline %s): the test proves nothing", deadline)
	}

	rem := st.next()
	for rem.Type != "confirmation_reminder" {
		if rem.Type == "confirmation_resolved" {
			t.Fatalf("the call ended with no reminder: %s; saw %s", rem.Raw, st.summary())
		}
		rem = st.next()
	}
	if str(rem.Data, "tool_call_id") != callID || str(rem.Data, "offset") != "3s" {
		t.Fatalf("confirmation_reminder %s", rem.Raw)
	}
	if ms, _ := rem.Data["remaining_ms"].(float64); ms <= 0 || ms > 3000 {
		t.Fatalf("remaining_ms %v", rem.Data["remaining_ms"])
	}
	res := st.waitFor("confirmation_resolved", nil)
	if str(res.Data, "tool_call_id") != callID || res.Data["decision"] != "expired" {
		t.Fatalf("the call's end: %s", res.Raw)
	}
	n := 0
	for _, ev := range st.seen {
		if ev.Type == "confirmation_reminder" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d confirmation_reminder events, want 1: %s", n, st.summary())
	}

	reqs := rc.WaitFor(t, waitLimit, "the reminder webhook", func(r []webhooktest.Request) bool {
		return len(webhooktest.WithEvent(r, webhook.EventApprovalReminder)) >= 1
	})
	wr := webhooktest.WithEvent(reqs, webhook.EventApprovalReminder)[0]
	if err := webhooktest.Verify(secret, wr); err != nil {
		t.Fatalf("the reminder's signature: %v", err)
	}
	if p := bodyOf(t, wr); p.ToolCall.ID != callID || p.ToolCall.ReminderOffset != "3s" {
		t.Fatalf("reminder webhook %s", wr.Body)
	}
	// The outbox holds one delivery per event: one reminder event, one
	// delivery, succeeded (the receiver answers 2xx).
	waitFor(t, "one succeeded reminder delivery", func() bool {
		status, page := call(t, http.MethodGet, c.Base+"/v1/webhooks/deliveries?endpoint_id=ops", "k-op1", "")
		if status != 200 {
			t.Fatalf("deliveries: %d %v", status, page)
		}
		ds, _ := page["deliveries"].([]any)
		if len(ds) > 1 {
			t.Fatalf("%d reminder deliveries, want 1: %v", len(ds), page)
		}
		if len(ds) == 0 {
			return false
		}
		d, _ := ds[0].(map[string]any)
		return d["status"] == "succeeded"
	})
}
