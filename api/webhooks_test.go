package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// fakeWebhooks is an in-memory api.Webhooks: one delivery of tenant t1/p1,
// role and tenant rules as the real one (webhook.Service) has them, and a
// record of the queries it got.
type fakeWebhooks struct {
	mu       sync.Mutex
	queries  []agentd.WebhookDeliveryQuery
	disabled []string
}

const fakeDelivery = "msg_fake"

func (f *fakeWebhooks) check(p agentd.Principal) error {
	if !p.SeesAll() {
		return agentd.Errorf(agentd.EFORBIDDEN, "operator only")
	}
	return nil
}

func (f *fakeWebhooks) Deliveries(ctx context.Context, p agentd.Principal, q agentd.WebhookDeliveryQuery) ([]agentd.WebhookDelivery, string, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	if err := f.check(p); err != nil {
		return nil, "", err
	}
	if p.TenantID != "t1" {
		return []agentd.WebhookDelivery{}, "", nil
	}
	return []agentd.WebhookDelivery{{ID: fakeDelivery, EndpointID: "ops", Status: agentd.DeliveryPending, Body: json.RawMessage(`{}`), Attempts: []agentd.WebhookAttempt{}}}, "7", nil
}

func (f *fakeWebhooks) Redeliver(ctx context.Context, p agentd.Principal, id string) (*agentd.WebhookDelivery, error) {
	if err := f.check(p); err != nil {
		return nil, err
	}
	if id != fakeDelivery || p.TenantID != "t1" {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "webhook delivery not found")
	}
	return &agentd.WebhookDelivery{ID: id, Status: agentd.DeliveryPending}, nil
}

func (f *fakeWebhooks) Endpoints(ctx context.Context, p agentd.Principal) ([]agentd.WebhookEndpoint, error) {
	if err := f.check(p); err != nil {
		return nil, err
	}
	return []agentd.WebhookEndpoint{{ID: "ops", Enabled: true, Events: []string{}}}, nil
}

func (f *fakeWebhooks) EnableEndpoint(ctx context.Context, p agentd.Principal, id string) (*agentd.WebhookEndpoint, error) {
	if err := f.check(p); err != nil {
		return nil, err
	}
	if id != "ops" {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "webhook endpoint not found")
	}
	return &agentd.WebhookEndpoint{ID: id, Enabled: true}, nil
}

func (f *fakeWebhooks) DisabledEndpoints(agentd.Principal) []string { return f.disabled }

var _ api.Webhooks = (*fakeWebhooks)(nil)

// TestWebhookRoutes: the routes decode their query, reach the outbox with
// the caller, answer its errors with the one status table, and are 404
// when no webhooks are configured; /readyz names disabled endpoints.
func TestWebhookRoutes(t *testing.T) {
	hooks := &fakeWebhooks{disabled: []string{"gone"}}
	s, _ := newFakeServer(t, roleKeys, api.Config{Webhooks: hooks})

	r := s.do("GET", "/v1/webhooks/deliveries?endpoint_id=ops&status=failed&event_name=llm.tool_call_started&cursor=12&limit=5", "k-op", "", nil)
	want(t, "list", r, http.StatusOK, "")
	var page struct {
		Deliveries []agentd.WebhookDelivery `json:"deliveries"`
		Next       string                   `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(r.body), &page); err != nil || len(page.Deliveries) != 1 || page.Next != "7" {
		t.Fatalf("list body %s (%v)", r.body, err)
	}
	if q := hooks.queries[len(hooks.queries)-1]; q != (agentd.WebhookDeliveryQuery{EndpointID: "ops", Status: "failed", EventName: "llm.tool_call_started", Cursor: "12", Limit: 5}) {
		t.Fatalf("query = %+v", q)
	}
	for _, l := range []string{"0", "101", "x"} {
		n := len(hooks.queries)
		want(t, "limit "+l, s.do("GET", "/v1/webhooks/deliveries?limit="+l, "k-op", "", nil), http.StatusBadRequest, agentd.EINVALID)
		if len(hooks.queries) != n {
			t.Fatalf("limit %s reached the outbox", l)
		}
	}
	for _, key := range []string{"k-alice", "k-robot"} {
		want(t, key+" lists", s.do("GET", "/v1/webhooks/deliveries", key, "", nil), http.StatusForbidden, agentd.EFORBIDDEN)
		want(t, key+" redelivers", s.do("POST", "/v1/webhooks/deliveries/"+fakeDelivery+"/redeliver", key, "", nil), http.StatusForbidden, agentd.EFORBIDDEN)
		want(t, key+" enables", s.do("POST", "/v1/webhooks/endpoints/ops/enable", key, "", nil), http.StatusForbidden, agentd.EFORBIDDEN)
	}
	want(t, "no key", s.do("GET", "/v1/webhooks/deliveries", "", "", nil), http.StatusUnauthorized, agentd.EUNAUTHORIZED)
	want(t, "redeliver", s.do("POST", "/v1/webhooks/deliveries/"+fakeDelivery+"/redeliver", "k-admin", "", nil), http.StatusAccepted, "")
	other := s.do("POST", "/v1/webhooks/deliveries/"+fakeDelivery+"/redeliver", "k-other", "", nil)
	ghost := s.do("POST", "/v1/webhooks/deliveries/msg_ghost/redeliver", "k-op", "", nil)
	want(t, "another tenant's delivery", other, http.StatusNotFound, agentd.ENOTFOUND)
	want(t, "a ghost delivery", ghost, http.StatusNotFound, agentd.ENOTFOUND)
	if string(other.body) != string(ghost.body) {
		t.Fatalf("another tenant's delivery reads %s, a ghost %s", other.body, ghost.body)
	}
	want(t, "endpoints", s.do("GET", "/v1/webhooks/endpoints", "k-op", "", nil), http.StatusOK, "")
	want(t, "enable", s.do("POST", "/v1/webhooks/endpoints/ops/enable", "k-op", "", nil), http.StatusOK, "")
	want(t, "enable a ghost", s.do("POST", "/v1/webhooks/endpoints/nope/enable", "k-op", "", nil), http.StatusNotFound, agentd.ENOTFOUND)

	// The details go to operators and admins only: anyone else learns
	// the server is ready.
	for _, key := range []string{"", "k-alice", "k-robot", "k-nonsense"} {
		r := s.do("GET", "/readyz", key, "", nil)
		want(t, "readyz as "+key, r, http.StatusOK, "")
		if r.body != `{"status":"ready"}`+"\n" {
			t.Errorf("/readyz to %q = %s, want the status alone", key, r.body)
		}
	}
	ready := s.do("GET", "/readyz", "k-op", "", nil)
	want(t, "readyz", ready, http.StatusOK, "")
	var rz struct {
		Status   string `json:"status"`
		Webhooks struct {
			Disabled []string `json:"disabled_endpoints"`
		} `json:"webhooks"`
	}
	if err := json.Unmarshal([]byte(ready.body), &rz); err != nil || rz.Status != "ready" || len(rz.Webhooks.Disabled) != 1 || rz.Webhooks.Disabled[0] != "gone" {
		t.Fatalf("readyz %s", ready.body)
	}

	bare, _ := newFakeServer(t, roleKeys, api.Config{})
	want(t, "no webhooks configured", bare.do("GET", "/v1/webhooks/deliveries", "k-op", "", nil), http.StatusNotFound, agentd.ENOTFOUND)
}
