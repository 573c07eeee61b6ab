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

// Issue 20, acceptance 5: a webhook event produced on replica A is in
// flight from A (the receiver holds A's request unanswered) when A is
// killed with SIGKILL. A's claim of the delivery is a lease in the store
// (the endpoint's timeout, 1 s here, plus a 5 s margin); once it lapsed
// another replica claims the delivery and sends it with the same
// webhook-id; the receiver's answer completes it, after which no replica
// sends it again: one delivery with one recorded attempt.
func TestReplicaKilledWebhookInFlight(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog := writeProject(t, projectOpts{})
	rc := webhooktest.NewReceiver(t)
	rc.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 { // A's attempt: never answered, A dies meanwhile
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	withWebhooks(t, dir, map[string]any{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET",
		"events": []string{webhook.EventApprovalRequired}, "timeout": "1s"})
	secret := newSecret(t)
	o := replicas.Options{Project: dir, DatabaseURL: u, Env: []string{"AGENTD_TEST_LOG=" + execLog, "OPS_WEBHOOK_SECRET=" + secret}}
	a := replicas.Add(t, "A", o)
	conv, _ := newConversation(t, a.Base, "")
	send(t, a.Base, "", conv, "pay the bill")
	first := rc.WaitFor(t, waitLimit, "A's attempt", func(r []webhooktest.Request) bool { return len(r) == 1 })[0]
	// A dies with its attempt in flight, before its 1 s timeout could
	// record the attempt as failed (starting B and C first took longer
	// than that on a busy machine); B and C start while A's claim holds.
	a.Kill()
	b, c := replicas.Add(t, "B", o), replicas.Add(t, "C", o)

	reqs := rc.WaitFor(t, waitLimit, "the redelivery", func(r []webhooktest.Request) bool { return len(r) >= 2 })
	if reqs[1].ID() != first.ID() || reqs[1].ID() == "" || string(reqs[1].Body) != string(first.Body) {
		t.Fatalf("redelivery webhook-id %q, body %s; A's attempt: %q, %s", reqs[1].ID(), reqs[1].Body, first.ID(), first.Body)
	}
	// Not before A's claim lapsed (claimed just before A's request, for 1 s
	// + 5 s): B and C, started meanwhile, left it alone.
	if gap := reqs[1].At.Sub(first.At); gap < 5*time.Second {
		t.Fatalf("redelivered %s after A's attempt, within A's claim (6 s)", gap)
	}
	if err := webhooktest.Verify(secret, reqs[1]); err != nil {
		t.Fatalf("the redelivery's signature: %v", err)
	}
	d := waitDelivery(t, c.Base, "succeeded")
	if d["id"] != first.ID() || d["attempt_count"] != float64(1) {
		t.Fatalf("the delivery after the failover: %v", d)
	}
	_, page := call(t, http.MethodGet, b.Base+"/v1/webhooks/deliveries?endpoint_id=ops", "", "")
	if ds, _ := page["deliveries"].([]any); len(ds) != 1 {
		t.Fatalf("deliveries on B: %v", page)
	}
	if n := len(rc.Requests()); n != 2 {
		t.Fatalf("the receiver got %d requests, want 2 (A's unanswered one and the redelivery)", n)
	}
}

// waitDelivery waits until the one delivery of endpoint ops has status
// and returns it.
func waitDelivery(t *testing.T, base, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		_, page := call(t, http.MethodGet, base+"/v1/webhooks/deliveries?endpoint_id=ops", "", "")
		ds, _ := page["deliveries"].([]any)
		if len(ds) == 1 {
			if d, _ := ds[0].(map[string]any); d["status"] == status {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single delivery %s within %s: %v", status, waitLimit, page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
