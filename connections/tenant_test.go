package connections

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

// durableAs performs a request on the durable path as caller p.
func durableAs(d *Durable, p agentd.Principal, name, args, idempotencyKey string) (any, bool, error) {
	return d.Request(context.Background(), name, json.RawMessage(args), p, idempotencyKey)
}

func TestLoadTenantIDsErrors(t *testing.T) {
	base := `"base_url": "https://api.example.com"`
	for body, want := range map[string]string{
		`"tenant_ids": "t1"`:         `field "tenant_ids": must be an array of tenant ids`,
		`"tenant_ids": {"t1": true}`: `field "tenant_ids": must be an array of tenant ids`,
		`"tenant_ids": [1]`:          `field "tenant_ids": must be an array of tenant ids`,
		`"tenant_ids": []`:           `field "tenant_ids": lists no tenant`,
		`"tenant_ids": ["t1", ""]`:   `field "tenant_ids[1]": is empty`,
		`"tenant_ids": ["t1", "t1"]`: `field "tenant_ids[1]": "t1" is listed twice`,
	} {
		_, err := Load(writeProject(t, map[string]string{"connections/api/connection.json": `{` + base + `, ` + body + `}`}), nil)
		if err == nil || !strings.Contains(err.Error(), "connections/api/connection.json: "+want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// A tenant not in tenant_ids finds the connection on the durable path no
// more than one that does not exist; a listed tenant, or any tenant
// without tenant_ids, uses it.
func TestDurableTenantIDs(t *testing.T) {
	api := newRecorder(t, nil)
	only := loadConn(t, `{"base_url":"`+api.URL+`","tenant_ids":["t1","t3"]}`, nil, nil)
	args := `{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`
	t1 := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator}
	t2 := agentd.Principal{TenantID: "t2", ProjectID: "p1", Role: agentd.RoleOperator}

	_, _, err := durableAs(NewDurable([]*Connection{only}), t2, "api", args, "")
	_, _, unknown := durableAs(NewDurable(nil), t2, "api", args, "")
	if agentd.ErrorCode(err) != agentd.ENOTFOUND || err.Error() != unknown.Error() {
		t.Fatalf("tenant t2: %v; an unknown connection: %v", err, unknown)
	}
	write := `{"connection":"api","method":"POST","endpoint":"/x","intent":"confirmed_write"}`
	if _, _, err := durableAs(NewDurable([]*Connection{only}), t2, "api", write, "k"); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("tenant t2's write: %v", err)
	}
	if n := len(api.requests()); n != 0 {
		t.Fatalf("tenant t2 reached the server: %d requests", n)
	}
	if _, _, err := durableAs(NewDurable([]*Connection{only}), t1, "api", args, ""); err != nil {
		t.Fatalf("tenant t1: %v", err)
	}
	all := loadConn(t, `{"base_url":"`+api.URL+`"}`, nil, nil)
	if _, _, err := durableAs(NewDurable([]*Connection{all}), t2, "api", args, ""); err != nil {
		t.Fatalf("without tenant_ids, tenant t2: %v", err)
	}
	if n := len(api.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// The loop's tools refuse to run for a tenant not in tenant_ids, whatever
// was decided before (tenant_ids may have changed since the call parked).
func TestToolsRefuseOtherTenants(t *testing.T) {
	api := newRecorder(t, nil)
	c := loadConn(t, `{"base_url":"`+api.URL+`","tenant_ids":["t1"],"openapi":"openapi.json"}`, nil, map[string]string{"openapi.json": minimalDoc})
	rt := NewRequestTool([]*Connection{c})
	call := requestCall(rt, "call_1", `{"connection":"api","method":"GET","endpoint":"/things/1","intent":"read"}`)
	op := c.OperationTools()[0]
	opArgs := `{"path":{"id":"1"}}`
	if op.Operation().Method != "GET" {
		opArgs = `{}`
	}
	opCall := classified(op.Confirm(), "call_2", opArgs)
	if opCall.ConnectionName != "api" || call.ConnectionName != "api" {
		t.Fatalf("calls not classified: %+v %+v", call, opCall)
	}
	for _, tenant := range []string{"t2", ""} {
		call.TenantID, opCall.TenantID = tenant, tenant
		if _, err := rt.Execute(context.Background(), call); err == nil || !strings.Contains(err.Error(), "not available to this tenant") {
			t.Errorf("request tool for tenant %q: %v", tenant, err)
		}
		if _, err := op.Execute(context.Background(), opCall); err == nil || !strings.Contains(err.Error(), "not available to this tenant") {
			t.Errorf("operation tool for tenant %q: %v", tenant, err)
		}
	}
	if n := len(api.requests()); n != 0 {
		t.Fatalf("another tenant reached the server: %d requests", n)
	}
	call.TenantID = "t1"
	if _, err := rt.Execute(context.Background(), call); err != nil {
		t.Fatalf("tenant t1: %v", err)
	}
}

// A caller's own Idempotency-Key goes downstream namespaced by tenant and
// project: the same caller gets the same key, any other tenant or project
// another, however the ids are spelled; it is 64 hex digits.
func TestDurableIdempotencyKeyNamespaced(t *testing.T) {
	api := newRecorder(t, nil)
	d := NewDurable([]*Connection{loadConn(t, `{"base_url":"`+api.URL+`"}`, nil, nil)})
	write := `{"connection":"api","method":"POST","endpoint":"/refunds","data":{"amount":1},"intent":"confirmed_write"}`
	callers := []agentd.Principal{
		{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator},
		{TenantID: "t2", ProjectID: "p1", Role: agentd.RoleOperator},
		{TenantID: "t1", ProjectID: "p2", Role: agentd.RoleOperator},
		{TenantID: "a:b", ProjectID: "c", Role: agentd.RoleOperator},
		{TenantID: "a", ProjectID: "b:c", Role: agentd.RoleOperator},
		{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleDelegate, KeyID: "other-key"}, // the same tenant and project
	}
	for _, p := range callers {
		out, _, err := durableAs(d, p, "api", write, "refund-42")
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := out.(Result); !ok || r.IdempotencyKey != api.requests()[len(api.requests())-1].Header.Get("Idempotency-Key") {
			t.Errorf("the result's idempotency_key %+v is not the key sent downstream", out)
		}
	}
	reqs := api.requests()
	seen := map[string]int{}
	for i, r := range reqs {
		k := r.Header.Get("Idempotency-Key")
		if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
			t.Errorf("caller %d: downstream key %q is not 64 hex digits", i, k)
		}
		if j, dup := seen[k]; dup && !(j == 0 && i == 5) {
			t.Errorf("callers %d and %d share the downstream key %q", j, i, k)
		}
		seen[k] = i
	}
	if reqs[0].Header.Get("Idempotency-Key") != reqs[5].Header.Get("Idempotency-Key") {
		t.Error("the same tenant and project got two keys for one Idempotency-Key")
	}
	// Without a key of its own the caller gets a fresh one each time.
	for range 2 {
		if _, _, err := durableAs(d, callers[0], "api", write, ""); err != nil {
			t.Fatal(err)
		}
	}
	reqs = api.requests()
	if a, b := reqs[len(reqs)-2].Header.Get("Idempotency-Key"), reqs[len(reqs)-1].Header.Get("Idempotency-Key"); a == "" || a == b {
		t.Errorf("fresh keys %q, %q", a, b)
	}
}
