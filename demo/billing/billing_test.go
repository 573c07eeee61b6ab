package billing

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func do(t *testing.T, srv *httptest.Server, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: body %q is not a JSON object", method, path, b)
		}
	}
	return resp.StatusCode, out
}

func TestRoutes(t *testing.T) {
	api := New()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	if st, o := do(t, srv, "GET", "/api/orders/A-1001", "", ""); st != 200 || o["id"] != "A-1001" || o["amount"] != 4200.0 || o["status"] != "delivered" {
		t.Errorf("order: %d %v", st, o)
	}
	if st, o := do(t, srv, "GET", "/api/orders/A-9999", "", ""); st != 404 || o["error"] == nil {
		t.Errorf("missing order: %d %v", st, o)
	}
	if st, o := do(t, srv, "GET", "/api/invoices", "", ""); st != 200 || len(o["invoices"].([]any)) != 3 {
		t.Errorf("invoices: %d %v", st, o)
	}
	if st, o := do(t, srv, "GET", "/api/invoices?status=open", "", ""); st != 200 || len(o["invoices"].([]any)) != 2 {
		t.Errorf("open invoices: %d %v", st, o)
	}
	if st, o := do(t, srv, "GET", "/api/invoices/INV-2002", "", ""); st != 200 || o["order_id"] != "A-1002" {
		t.Errorf("invoice: %d %v", st, o)
	}
	if st, o := do(t, srv, "PATCH", "/api/invoices/INV-2002", "", `{"memo":"Discounted","amount":14000}`); st != 200 || o["memo"] != "Discounted" || o["amount"] != 14000.0 {
		t.Errorf("patch: %d %v", st, o)
	}
	if st, _ := do(t, srv, "PATCH", "/api/invoices/INV-2002", "", `{"colour":"red"}`); st != 400 {
		t.Errorf("patch with an unknown field: %d", st)
	}
	if st, o := do(t, srv, "POST", "/api/reports/run", "", `{}`); st != 200 || o["kind"] != "summary" || o["invoices"] != 3.0 {
		t.Errorf("report: %d %v", st, o)
	}
	if st, _ := do(t, srv, "DELETE", "/api/invoices/INV-2003", "", ""); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, _ := do(t, srv, "GET", "/api/invoices/INV-2003", "", ""); st != 404 {
		t.Errorf("deleted invoice: %d", st)
	}
	if st, o := do(t, srv, "GET", "/admin", "", ""); st != 404 || o["error"] == nil {
		t.Errorf("outside /api: %d %v", st, o)
	}
	if st, o := do(t, srv, "POST", "/api/orders/A-1001", "", "{}"); st != 405 || o["error"] == nil {
		t.Errorf("wrong method: %d %v", st, o)
	}

	reqs := api.Requests()
	if len(reqs) != 12 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	if r := reqs[5]; r.Method != "PATCH" || r.Path != "/api/invoices/INV-2002" || string(r.Body) != `{"memo":"Discounted","amount":14000}` ||
		r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("recorded %+v", r)
	}
	if r := reqs[3]; r.Query.Get("status") != "open" {
		t.Errorf("recorded query %v", r.Query)
	}
}

func TestRefundsIdempotentByKey(t *testing.T) {
	api := New()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()

	st, first := do(t, srv, "POST", "/api/refunds", "call_1", `{"order_id":"A-1001","amount":100,"reason":"damaged"}`)
	if st != 201 || first["order_id"] != "A-1001" || first["amount"] != 100.0 || first["reason"] != "damaged" || first["id"] == "" {
		t.Fatalf("refund: %d %v", st, first)
	}
	st, again := do(t, srv, "POST", "/api/refunds", "call_1", `{"order_id":"A-1001","amount":100,"reason":"damaged"}`)
	if st != 201 || again["id"] != first["id"] {
		t.Errorf("repeated key: %d %v, want the first refund %v", st, again, first["id"])
	}
	if n := len(api.Refunds()); n != 1 {
		t.Errorf("%d refunds after a repeated key, want 1", n)
	}
	// Concurrent retries with one key still make one refund.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(t, srv, "POST", "/api/refunds", "call_2", `{"order_id":"A-1002","amount":10}`)
		}()
	}
	wg.Wait()
	if n := len(api.Refunds()); n != 2 {
		t.Errorf("%d refunds after concurrent retries, want 2", n)
	}
	// Another key, or none, is another refund.
	if st, r := do(t, srv, "POST", "/api/refunds", "call_3", `{"order_id":"A-1001","amount":100}`); st != 201 || r["id"] == first["id"] {
		t.Errorf("new key: %d %v", st, r)
	}
	if st, _ := do(t, srv, "POST", "/api/refunds", "", `{"order_id":"A-1001","amount":1}`); st != 201 {
		t.Errorf("no key: %d", st)
	}
	if n := len(api.Refunds()); n != 4 {
		t.Errorf("%d refunds, want 4", n)
	}
	if st, o := do(t, srv, "GET", "/api/orders/A-1001", "", ""); st != 200 || o["refunded"] != 201.0 {
		t.Errorf("order after refunds: %d %v", st, o)
	}
	for body, want := range map[string]int{
		`{"order_id":"A-1001","amount":999999}`: 422,
		`{"order_id":"A-1001","amount":-5}`:     422,
		`{"order_id":"A-1001"}`:                 422,
		`{"order_id":"A-0000","amount":1}`:      404,
		`{"amount":1}`:                          422,
		`not json`:                              400,
	} {
		if st, o := do(t, srv, "POST", "/api/refunds", "", body); st != want || o["error"] == nil {
			t.Errorf("%s: %d %v, want %d", body, st, o, want)
		}
	}
}
