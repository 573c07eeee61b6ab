package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

const someCall = "call_01a23125-0000-7000-8000-000000000001"

// TestHandlersRefuseBadBodies: every route with a body refuses each bad
// body with 400 before the service is called.
func TestHandlersRefuseBadBodies(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	conv := s.createConversation("")
	routes := []string{
		"/v1/conversations",
		"/v1/conversations/" + conv + "/messages",
		"/v1/runs/run_01a23125-0000-7000-8000-000000000001/cancel",
		"/v1/tool-calls/" + someCall + "/approval",
		"/v1/approvals",
	}
	bodies := map[string]string{
		"malformed":     `{"content":`,
		"trailing data": `{} {}`,
		"unknown field": `{"nope":1}`,
		"wrong type":    `{"content":5,"metadata":"x","decision":7}`,
		"duplicate key": `{"a":1,"A":2}`,
		"not an object": `[1]`,
		"invalid UTF-8": "{\"content\":\"\xff\"}",
	}
	before := fake.count()
	for _, path := range routes {
		for name, body := range bodies {
			r := s.do("POST", path, "", body, nil)
			if r.status != http.StatusBadRequest || r.errorCode() != agentd.EINVALID {
				t.Errorf("%s with %s: %d %s", path, name, r.status, r.body)
			}
		}
	}
	if n := fake.count() - before; n != 0 {
		t.Fatalf("the service was called %d times for bad bodies: %+v", n, fake.last())
	}
	// Bodies that need one: an empty body is 400 too.
	for _, path := range routes[1:2] {
		want(t, "empty body "+path, s.do("POST", path, "", "", nil), http.StatusBadRequest, agentd.EINVALID)
	}
	for _, path := range []string{routes[0], routes[2]} {
		r := s.do("POST", path, "", "", nil)
		if r.status >= 400 {
			t.Errorf("an optional body, empty, on %s: %d %s", path, r.status, r.body)
		}
	}
	// Over the limit: 413 and no call.
	before = fake.count()
	big := `{"content":"` + strings.Repeat("x", 2<<20) + `"}`
	want(t, "too large", s.do("POST", routes[1], "", big, nil), http.StatusRequestEntityTooLarge, agentd.ETOOLARGE)
	if fake.count() != before {
		t.Fatal("the service was called for a body over the limit")
	}
}

// TestApprovalBodyReachesService: the approval's fields arrive as the
// domain's DecisionRequest, unchanged.
func TestApprovalBodyReachesService(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	body := `{"decision":"edit","reason":"smaller","arguments":{"amount":3},"arguments_sha256":"` + strings.Repeat("a", 64) + `"}`
	want(t, "approval", s.do("POST", "/v1/tool-calls/"+someCall+"/approval", "", body, nil), http.StatusOK, "")
	got := fake.last()
	wantReq := agentd.DecisionRequest{Decision: "edit", Reason: "smaller", Arguments: json.RawMessage(`{"amount":3}`),
		ArgumentsSHA256: strings.Repeat("a", 64), Via: agentd.ViaSingle}
	if got.method != "Decide" || got.id != someCall || !reflect.DeepEqual(got.req, wantReq) {
		t.Fatalf("service got %+v, want Decide(%s, %+v)", got, someCall, wantReq)
	}
}

// TestErrorTable: each error code of the domain becomes its one status, with
// the safe message; any other error is a 500 that shows no detail.
func TestErrorTable(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	for code, status := range map[string]int{
		agentd.EINVALID: 400, agentd.EUNAUTHORIZED: 401, agentd.EFORBIDDEN: 403, agentd.ENOTFOUND: 404,
		agentd.ECONFLICT: 409, agentd.EEXPIRED: 409, agentd.ESTALE: 409, agentd.ERUNACTIVE: 409, agentd.ENOTAPPLIED: 409,
		agentd.ETOOLARGE: 413, agentd.EUNSUPPORTED: 415, agentd.EMISDIRECTED: 421, agentd.EINTERNAL: 500, agentd.EUNAVAILABLE: 503,
	} {
		fake.fail = &agentd.Error{Code: code, Message: "safe words for " + code, Detail: errors.New("secret detail")}
		r := s.do("GET", "/v1/tool-calls/"+someCall, "", "", nil)
		if r.status != status || r.errorCode() != code || !strings.Contains(r.body, "safe words for "+code) || strings.Contains(r.body, "secret detail") {
			t.Errorf("%s: %d %s, want %d", code, r.status, r.body, status)
		}
	}
	fake.fail = fmt.Errorf("disk on fire at /var/lib/agentd")
	r := s.do("GET", "/v1/tool-calls/"+someCall, "", "", nil)
	if r.status != 500 || r.errorCode() != agentd.EINTERNAL || strings.Contains(r.body, "disk") {
		t.Errorf("an untyped error: %d %s", r.status, r.body)
	}
	fake.fail = nil
	want(t, "unknown route", s.do("GET", "/v1/nope", "", "", nil), http.StatusNotFound, agentd.ENOTFOUND)
	want(t, "wrong method", s.do("POST", "/healthz", "", "", nil), http.StatusMethodNotAllowed, "method_not_allowed")
	// Also on the authenticated routes, which share their middleware.
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/conversations", "POST"},
		{"PUT", "/v1/tool-calls/" + someCall + "/approval", "POST"},
		{"POST", "/v1/approvals/", ""},
		{"DELETE", "/v1/conversations/" + someCall + "/events", "GET"},
	} {
		r := s.do(c.method, c.path, "", "", nil)
		if c.allow == "" {
			want(t, c.method+" "+c.path, r, http.StatusNotFound, agentd.ENOTFOUND)
			continue
		}
		want(t, c.method+" "+c.path, r, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := r.header.Get("Allow"); !strings.Contains(got, c.allow) {
			t.Errorf("%s %s: Allow %q, want it to name %s", c.method, c.path, got, c.allow)
		}
	}
}

// TestPrincipalFromKey: the service gets the key's tenant, project, role
// and id; in dev mode the single tenant default/default as admin "dev".
func TestPrincipalFromKey(t *testing.T) {
	s, fake := newFakeServer(t, roleKeys, api.Config{})
	for _, k := range roleKeys {
		want(t, k.id, s.do("GET", "/v1/runs/run_01a23125-0000-7000-8000-000000000001", k.key, "", nil), http.StatusOK, "")
		wantP := agentd.Principal{TenantID: k.tenant, ProjectID: k.project, Role: k.role, KeyID: k.id}
		if got := fake.last().p; !reflect.DeepEqual(got, wantP) {
			t.Errorf("key %s: principal %+v, want %+v", k.id, got, wantP)
		}
	}
	dev, devFake := newFakeServer(t, nil, api.Config{})
	want(t, "dev", dev.do("GET", "/v1/runs/run_01a23125-0000-7000-8000-000000000001", "", "", nil), http.StatusOK, "")
	if got := devFake.last().p; !reflect.DeepEqual(got, agentd.Principal{TenantID: "default", ProjectID: "default", Role: agentd.RoleAdmin, KeyID: "dev"}) {
		t.Errorf("dev principal %+v", got)
	}
}

// TestApprovalsQuery: the list's query is checked before the service.
func TestApprovalsQuery(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?status=approved", "?expires_before=tomorrow",
		"?expires_before=2026-12-01", "?expires_before=2026-12-01T12:00:00"} {
		before := fake.count()
		want(t, q, s.do("GET", "/v1/approvals"+q, "", "", nil), http.StatusBadRequest, agentd.EINVALID)
		if fake.count() != before {
			t.Errorf("%s reached the service", q)
		}
	}
	want(t, "good query", s.do("GET", "/v1/approvals?status=pending&limit=7&cursor="+someCall, "", "", nil), http.StatusOK, "")
	if got := fake.last(); got.method != "PendingApprovals" || got.req != (agentd.PendingQuery{Cursor: someCall, Limit: 7}) {
		t.Fatalf("service got %+v", got)
	}
	conv := "conv_01a23125-0000-7000-8000-000000000001"
	want(t, "filters", s.do("GET", "/v1/approvals?tool_name=pay&server_id=billing&conversation_id="+conv+
		"&expires_before=2026-12-01T12:30:00%2B01:00", "", "", nil), http.StatusOK, "")
	wantQ := agentd.PendingQuery{ToolName: "pay", ServerID: "billing", ConversationID: conv,
		ExpiresBefore: time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC)}
	if got, ok := fake.last().req.(agentd.PendingQuery); !ok || !got.ExpiresBefore.Equal(wantQ.ExpiresBefore) ||
		got.ToolName != wantQ.ToolName || got.ServerID != wantQ.ServerID || got.ConversationID != wantQ.ConversationID {
		t.Fatalf("service got %+v, want %+v", fake.last().req, wantQ)
	}
}

// TestBulkApprovals: the body's items reach the service as the domain's
// items, in order; the answer is 200 with one result per item; a body
// without the required fields is 400 before the service.
func TestBulkApprovals(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	body := `{"approvals":[{"tool_call_id":"` + someCall + `","approve":true,"reason":"ok","arguments":{"a":1},"arguments_sha256":"` +
		strings.Repeat("b", 64) + `"},{"tool_call_id":"ghost","approve":false}],"atomic":true}`
	r := s.do("POST", "/v1/approvals", "", body, nil)
	want(t, "bulk", r, http.StatusOK, "")
	got := fake.last()
	wantItems := []agentd.BatchDecisionItem{
		{ToolCallID: someCall, Approve: true, Reason: "ok", Arguments: []byte(`{"a":1}`), ArgumentsSHA256: strings.Repeat("b", 64)},
		{ToolCallID: "ghost"},
	}
	if got.method != "DecideBatch" || got.id != "true" || !reflect.DeepEqual(got.req, wantItems) {
		t.Fatalf("service got %+v, want DecideBatch(atomic, %+v)", got, wantItems)
	}
	var out struct {
		Atomic  bool `json:"atomic"`
		Results []struct {
			ToolCallID string           `json:"tool_call_id"`
			Status     string           `json:"status"`
			Decision   *agentd.Decision `json:"decision"`
			Error      *struct{ Code, Message string }
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatal(err)
	}
	if !out.Atomic || len(out.Results) != 2 || out.Results[0].Status != "applied" || out.Results[0].Decision == nil ||
		out.Results[1].Status != "failed" || out.Results[1].Error == nil || out.Results[1].Error.Code != agentd.ENOTFOUND {
		t.Fatalf("bulk answer %s", r.body)
	}
	before := fake.count()
	for name, body := range map[string]string{
		"no approvals":    `{"atomic":true}`,
		"no approve":      `{"approvals":[{"tool_call_id":"` + someCall + `"}]}`,
		"no tool_call_id": `{"approvals":[{"approve":true}]}`,
		"approve string":  `{"approvals":[{"tool_call_id":"x","approve":"yes"}]}`,
		"decision field":  `{"approvals":[{"tool_call_id":"x","decision":"approve"}]}`,
	} {
		want(t, name, s.do("POST", "/v1/approvals", "", body, nil), http.StatusBadRequest, agentd.EINVALID)
	}
	if fake.count() != before {
		t.Error("a bad bulk body reached the service")
	}
	fake.fail = agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	want(t, "refused batch", s.do("POST", "/v1/approvals", "", `{"approvals":[{"tool_call_id":"x","approve":true}]}`, nil),
		http.StatusForbidden, agentd.EFORBIDDEN)
}

// TestAuditQuery: the audit's filters reach the service parsed; bad ones
// are 400 before it; the cursor round-trips.
func TestAuditQuery(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	for _, q := range []string{"?limit=0", "?since=yesterday", "?until=2026-12-01", "?cursor=x", "?cursor=-1"} {
		before := fake.count()
		want(t, q, s.do("GET", "/v1/audit"+q, "", "", nil), http.StatusBadRequest, agentd.EINVALID)
		if fake.count() != before {
			t.Errorf("%s reached the service", q)
		}
	}
	r := s.do("GET", "/v1/audit?kind=decision&tool_call_id="+someCall+"&since=2026-12-01T00:00:00Z&until=2026-12-02T00:00:00Z&limit=5", "", "", nil)
	want(t, "audit", r, http.StatusOK, "")
	wantQ := agentd.AuditQuery{Kind: "decision", ToolCallID: someCall, Limit: 5,
		Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	if got := fake.last(); got.method != "Audit" || !reflect.DeepEqual(got.req, wantQ) {
		t.Fatalf("service got %+v, want %+v", got.req, wantQ)
	}
	var page struct {
		Entries []agentd.AuditEntry `json:"entries"`
		Next    string              `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(r.body), &page); err != nil || len(page.Entries) != 1 || page.Next != "7" {
		t.Fatalf("audit page %s (%v)", r.body, err)
	}
	want(t, "page 2", s.do("GET", "/v1/audit?cursor="+page.Next, "", "", nil), http.StatusOK, "")
	if got := fake.last().req.(agentd.AuditQuery); got.Cursor != 7 {
		t.Errorf("cursor reached the service as %d", got.Cursor)
	}
}

// TestGrantRoutes: an approval's remember reaches the service decoded
// (strictly: an unknown field is 400 before it); GET /v1/grants passes
// its cursor and limit; a bulk item's remember reaches DecideBatch; DELETE /v1/grants/{id} passes the id and answers
// the revoked grant.
func TestGrantRoutes(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	body := `{"decision":"approve","remember":{"scope":"project","ttl":"2h","match":{"body.amount":{"max":100}}}}`
	want(t, "approve with remember", s.do("POST", "/v1/tool-calls/"+someCall+"/approval", "", body, nil), http.StatusOK, "")
	got := fake.last()
	req, _ := got.req.(agentd.DecisionRequest)
	if got.method != "Decide" || req.Remember == nil || req.Remember.Scope != "project" || req.Remember.TTL != "2h" ||
		string(req.Remember.Match) != `{"body.amount":{"max":100}}` {
		t.Fatalf("service got %+v", got)
	}
	before := fake.count()
	for name, body := range map[string]string{
		"unknown remember field": `{"decision":"approve","remember":{"scope":"project","until":"2h"}}`,
		"remember not an object": `{"decision":"approve","remember":"yes"}`,
		"ttl not a string":       `{"decision":"approve","remember":{"scope":"project","ttl":3600}}`,
	} {
		want(t, name, s.do("POST", "/v1/tool-calls/"+someCall+"/approval", "", body, nil), http.StatusBadRequest, agentd.EINVALID)
	}
	if fake.count() != before {
		t.Error("a bad remember reached the service")
	}
	bulk := `{"approvals":[{"tool_call_id":"` + someCall + `","approve":true,"remember":{"scope":"conversation","ttl":"1h","match":"exact"}},` +
		`{"tool_call_id":"ghost","approve":true}]}`
	want(t, "bulk with remember", s.do("POST", "/v1/approvals", "", bulk, nil), http.StatusOK, "")
	items, _ := fake.last().req.([]agentd.BatchDecisionItem)
	if len(items) != 2 || items[0].Remember == nil || items[0].Remember.Scope != "conversation" || items[0].Remember.TTL != "1h" ||
		string(items[0].Remember.Match) != `"exact"` || items[1].Remember != nil {
		t.Fatalf("bulk items reached the service as %+v", items)
	}
	before = fake.count()
	want(t, "bulk unknown remember field", s.do("POST", "/v1/approvals", "",
		`{"approvals":[{"tool_call_id":"x","approve":true,"remember":{"scope":"project","until":"2h"}}]}`, nil), http.StatusBadRequest, agentd.EINVALID)
	if fake.count() != before {
		t.Error("a bad bulk remember reached the service")
	}
	want(t, "limit 0", s.do("GET", "/v1/grants?limit=0", "", "", nil), http.StatusBadRequest, agentd.EINVALID)
	r := s.do("GET", "/v1/grants?cursor=grant_x&limit=5", "", "", nil)
	want(t, "list", r, http.StatusOK, "")
	if got := fake.last(); got.method != "Grants" || got.req != "grant_x" {
		t.Fatalf("service got %+v", got)
	}
	var page struct {
		Grants []agentd.Grant `json:"grants"`
		Next   *string        `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(r.body), &page); err != nil || len(page.Grants) != 1 || page.Next == nil {
		t.Fatalf("grants page %s (%v)", r.body, err)
	}
	r = s.do("DELETE", "/v1/grants/grant_1", "", "", nil)
	want(t, "revoke", r, http.StatusOK, "")
	if got := fake.last(); got.method != "RevokeGrant" || got.id != "grant_1" || !strings.Contains(r.body, `"revoked_at"`) {
		t.Fatalf("service got %+v, answered %s", got, r.body)
	}
	fake.fail = agentd.Errorf(agentd.EFORBIDDEN, "only the grant's creator, an operator or an admin may revoke it")
	want(t, "refused revoke", s.do("DELETE", "/v1/grants/grant_1", "", "", nil), http.StatusForbidden, agentd.EFORBIDDEN)
}
