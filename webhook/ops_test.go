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

// TestOperatorViewIsTenantScoped: with deliveries of two tenants in the
// outbox, an operator sees, redelivers and enables only its own; another
// tenant's delivery or endpoint is ENOTFOUND with the message of a ghost;
// client and delegate keys are EFORBIDDEN; filters and paging hold.
func TestOperatorViewIsTenantScoped(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := webhooktest.NewReceiver(t)
	eps, err := webhook.ParseConfig(json.RawMessage(fmt.Sprintf(`[
		{"id":"all","url":%q,"secret_env":"S"},
		{"id":"only-t","url":%q,"secret_env":"S","tenant_id":"t","project_id":"p"}]`, rc.URL, rc.URL+"?token=secret")),
		env(map[string]string{"S": goodSecret}))
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
	seedStarted(t, store, 3) // tenant t/p
	f.Notify()
	rc.WaitFor(t, 30*time.Second, "six deliveries", func(r []webhooktest.Request) bool { return len(r) == 6 })

	op := agentd.Principal{TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "op"}
	other := agentd.Principal{TenantID: "u", ProjectID: "p", Role: agentd.RoleAdmin, KeyID: "other"}
	var ds []agentd.WebhookDelivery
	deadline := time.Now().Add(30 * time.Second)
	allDone := func() bool {
		for _, d := range ds {
			if d.Status != agentd.DeliverySucceeded {
				return false
			}
		}
		return len(ds) == 6
	}
	for !allDone() {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v", ds)
		}
		time.Sleep(20 * time.Millisecond)
		ds, _, err = svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		webhooktest.Validate(t, d.Body)
		if len(d.Attempts) != 1 || d.Attempts[0].StatusCode != 204 {
			t.Fatalf("attempts of %s: %+v", d.ID, d.Attempts)
		}
	}
	page, next, _ := svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{Limit: 4, EndpointID: "all"})
	rest, end, _ := svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{Limit: 4, EndpointID: "all", Cursor: next})
	if len(page) != 3 || next != "" || len(rest) != 3 || end != "" {
		t.Fatalf("endpoint filter: %d %q / %d %q", len(page), next, len(rest), end)
	}
	page, next, _ = svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{Limit: 4})
	rest, end, _ = svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{Limit: 4, Cursor: next})
	if len(page) != 4 || next == "" || len(rest) != 2 || end != "" || rest[0].ID == page[3].ID {
		t.Fatalf("paging: %d %q, then %d %q", len(page), next, len(rest), end)
	}
	for _, q := range []agentd.WebhookDeliveryQuery{{Cursor: "x"}, {Status: "lost"}, {EventName: "nope"}, {Limit: 101}} {
		if _, _, err := svc.Deliveries(ctx, op, q); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("query %+v: %v, want invalid", q, err)
		}
	}

	if got, _, _ := svc.Deliveries(ctx, other, agentd.WebhookDeliveryQuery{}); len(got) != 0 {
		t.Fatalf("another tenant sees %d deliveries", len(got))
	}
	_, errOther := svc.Redeliver(ctx, other, ds[0].ID)
	_, errGhost := svc.Redeliver(ctx, other, "msg_ghost")
	if agentd.ErrorCode(errOther) != agentd.ENOTFOUND || agentd.ErrorMessage(errOther) != agentd.ErrorMessage(errGhost) {
		t.Fatalf("another tenant's redelivery: %v; a ghost's: %v", errOther, errGhost)
	}
	if _, err := svc.EnableEndpoint(ctx, other, "only-t"); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("another tenant enables only-t: %v", err)
	}
	// "all" has no tenant filter: an operator of one tenant may not
	// re-enable it for every tenant; an admin may.
	if _, err := svc.EnableEndpoint(ctx, op, "all"); agentd.ErrorCode(err) != agentd.EFORBIDDEN {
		t.Fatalf("an operator enables the shared endpoint: %v", err)
	}
	if _, err := svc.EnableEndpoint(ctx, other, "all"); err != nil {
		t.Fatalf("an admin enables the shared endpoint: %v", err)
	}
	if eps, _ := svc.Endpoints(ctx, other); len(eps) != 1 || eps[0].ID != "all" {
		t.Fatalf("another tenant's endpoints: %+v", eps)
	}
	eps2, _ := svc.Endpoints(ctx, op)
	if len(eps2) != 2 || eps2[1].URL != rc.URL || !eps2[1].Enabled {
		t.Fatalf("endpoints: %+v (the URL without its query)", eps2)
	}
	for _, role := range []string{agentd.RoleClient, agentd.RoleDelegate} {
		p := op
		p.Role = role
		if _, _, err := svc.Deliveries(ctx, p, agentd.WebhookDeliveryQuery{}); agentd.ErrorCode(err) != agentd.EFORBIDDEN {
			t.Fatalf("%s lists: %v", role, err)
		}
	}

	// A redelivery sends the same webhook-id again.
	d, err := svc.Redeliver(ctx, op, ds[0].ID)
	if err != nil || d.Status != agentd.DeliveryPending {
		t.Fatalf("redeliver: %+v %v", d, err)
	}
	reqs := rc.WaitFor(t, 30*time.Second, "the redelivery", func(r []webhooktest.Request) bool { return len(r) == 7 })
	if reqs[6].ID() != ds[0].ID {
		t.Fatalf("redelivered id %s, want %s", reqs[6].ID(), ds[0].ID)
	}
}
