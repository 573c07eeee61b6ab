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

// TestEndpointPendingIsTenantScoped (issue 17, finding 6): an endpoint
// without a tenant or project filter carries every tenant's deliveries; the
// backlog an operator or admin sees on it is that of its own tenant and
// project only — another tenant's, or another project's, is 0.
func TestEndpointPendingIsTenantScoped(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := webhooktest.NewReceiver(t)
	eps, err := webhook.ParseConfig(json.RawMessage(fmt.Sprintf(`[
		{"id":"all","url":%q,"secret_env":"S","retry_schedule":["1h"]},
		{"id":"tenant-t","url":%q,"secret_env":"S","retry_schedule":["1h"],"tenant_id":"t"}]`, rc.URL, rc.URL)),
		env(map[string]string{"S": goodSecret}))
	if err != nil {
		t.Fatal(err)
	}
	rc.Close() // dead: every delivery stays pending, its retry an hour away
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
	seedStarted(t, store, 5) // tenant t, project p
	f.Notify()
	deadline := time.Now().Add(30 * time.Second)
	for {
		depth, err := store.WebhookQueueDepth(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if depth["all"] == 5 && depth["tenant-t"] == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %v, want 5 on each endpoint", depth)
		}
		time.Sleep(20 * time.Millisecond)
	}

	pending := func(p agentd.Principal) map[string]int64 {
		t.Helper()
		eps, err := svc.Endpoints(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, ep := range eps {
			out[ep.ID] = ep.Pending
		}
		return out
	}
	for _, c := range []struct {
		p    agentd.Principal
		want map[string]int64
	}{
		{agentd.Principal{TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "op"}, map[string]int64{"all": 5, "tenant-t": 5}},
		{agentd.Principal{TenantID: "u", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "other"}, map[string]int64{"all": 0}},
		{agentd.Principal{TenantID: "u", ProjectID: "p", Role: agentd.RoleAdmin, KeyID: "other-admin"}, map[string]int64{"all": 0}},
		{agentd.Principal{TenantID: "t", ProjectID: "q", Role: agentd.RoleOperator, KeyID: "op-q"}, map[string]int64{"all": 0, "tenant-t": 0}},
	} {
		if got := pending(c.p); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s of %s/%s sees pending %v, want %v", c.p.Role, c.p.TenantID, c.p.ProjectID, got, c.want)
		}
	}
	// Enabling the shared endpoint answers with the caller's backlog too.
	ep, err := svc.EnableEndpoint(ctx, agentd.Principal{TenantID: "u", ProjectID: "p", Role: agentd.RoleAdmin, KeyID: "other-admin"}, "all")
	if err != nil || ep.Pending != 0 {
		t.Errorf("another tenant's admin enables all: %+v %v, want pending 0", ep, err)
	}
}
