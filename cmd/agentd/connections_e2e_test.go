package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/demo"
	"github.com/agentd-dev/agentd/demo/billing"
)

const billingToken = "s3cret-billing-token"

// connRules drive the script model through every connection case.
const connRules = `[
 {"when":{"user":"^refund 500$"},"reply":{"text":"Refunding.","tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":500,"reason":"broken"},"intent":"write"}}]}},
 {"when":{"user":"^refund 20000$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1002","amount":20000},"intent":"write"}}]}},
 {"when":{"user":"^refund 200000$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1003","amount":200000},"intent":"write"}}]}},
 {"when":{"user":"^sneaky confirmed$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":5},"intent":"confirmed_write"}}]}},
 {"when":{"user":"^refund as read$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":5},"intent":"read"}}]}},
 {"when":{"user":"^report$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/reports/run","data":{"kind":"summary"},"intent":"read"}}]}},
 {"when":{"user":"^override static$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"GET","endpoint":"/invoices","headers":{"X-Api-Version":"1"},"intent":"read"}}]}},
 {"when":{"user":"^header crlf$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"GET","endpoint":"/invoices","headers":{"X-Note":"a\r\nX-Injected: 1"},"intent":"read"}}]}},
 {"when":{"user":"^header via$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"GET","endpoint":"/invoices","headers":{"Via":"1.1 elsewhere"},"intent":"read"}}]}},
 {"when":{"user":"^secret$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"GET","endpoint":"/secrets/keys","intent":"read"}}]}},
 {"when":{"user":"^ssrf (.*)$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"GET","endpoint":"ENDPOINT","intent":"read"}}]}},
 {"when":{"user":"^op invalid$"},"reply":{"tool_calls":[{"name":"billing__createRefund","arguments":{"body":{"order_id":5,"amount":"lots"}}}]}},
 {"when":{"user":"^op valid$"},"reply":{"tool_calls":[{"name":"billing__createRefund","arguments":{"body":{"order_id":"A-1004","amount":70}}}]}},
 {"when":{"user":"^patch$"},"reply":{"tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"PATCH","endpoint":"/invoices/INV-2003","data":{"memo":"x"},"intent":"write"}}]}},
 {"when":{"user":"^memo$"},"reply":{"tool_calls":[{"name":"billing__updateInvoice","arguments":{"path":{"id":"INV-2002"},"body":{"memo":"Paid by bank transfer","amount":100}}}]}},
 {"when":{"tool_result":"request"},"reply":{"text":"request {{status}}: {{reason}}{{result}}"}},
 {"when":{"tool_result":"billing__createRefund"},"reply":{"text":"createRefund {{status}}: {{reason}}{{result}}"}},
 {"when":{"tool_result":"billing__updateInvoice"},"reply":{"text":"updateInvoice {{status}}: {{reason}}{{result}}"}}
]`

// connPolicy is the demo's policy plus a never endpoint for GETs and a
// threshold on the editable endpoint.
const connPolicy = `{
  "endpoints": {
    "GET /orders/{id}": {},
    "GET /invoices": {},
    "GET /invoices/{id}": {},
    "POST /refunds": { "confirm": true, "reason": "Moves money back to the customer",
      "thresholds": [ { "field": "body.amount", "above": 10000, "escalate": "review", "reason": "Refunds over 10,000 need a finance review" },
                      { "field": "body.amount", "above": 100000, "escalate": "never" } ] },
    "POST /reports/run": { "intent": "read" },
    "PATCH /invoices/{id}": { "confirm": true, "allow_edit": true,
      "thresholds": [ { "field": "body.amount", "above": 10000, "escalate": "review" } ] },
    "DELETE /invoices/{id}": { "confirm": "never", "reason": "Invoices are never deleted by the agent" },
    "GET /secrets/**": { "confirm": "never", "reason": "Secrets stay secret" }
  },
  "defaults": { "read": "auto", "write": "confirm" },
  "delegations": { "escalateConfirm": true }
}`

// connFixture is a project with a "billing" connection to a real billing
// API on loopback that records every request it receives.
type connFixture struct {
	base string
	api  *billing.API
	dir  string
}

const (
	operatorKey = "op-key-1"
	delegateKey = "delegate-key-1"
	clientKey   = "client-key-1"
)

func newConnFixture(t *testing.T, rules string) *connFixture {
	t.Helper()
	return newConnFixtureWith(t, rules, connOpts{})
}

// connOpts vary the connection fixture.
type connOpts struct {
	// keys are added to the fixture's t1 keys: key → tenant, role, project.
	keys map[string][3]string
	// tenantIDs is connection.json's tenant_ids (JSON), "" for none.
	tenantIDs string
}

func newConnFixtureWith(t *testing.T, rules string, o connOpts) *connFixture {
	t.Helper()
	api := billing.New()
	downstream := httptest.NewServer(api.Handler())
	t.Cleanup(downstream.Close)
	keys := map[string][3]string{operatorKey: {"t1", "operator"}, delegateKey: {"t1", "delegate"}, clientKey: {"t1", "client"}}
	for k, v := range o.keys {
		keys[k] = v
	}
	dir, _ := writeProject(t, projectOpts{keys: keys})
	agent := fmt.Sprintf(`{"name":"test","model":{"provider":"script","script":{"rules":%s}},"max_turns":10}`, rules)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	cdir := filepath.Join(dir, "connections", "billing")
	must(t, os.MkdirAll(cdir, 0o755))
	doc, err := fsRead("connections/billing/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, "openapi.json"), doc, 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(connPolicy), 0o644))
	tenants := ""
	if o.tenantIDs != "" {
		tenants = `, "tenant_ids": ` + o.tenantIDs
	}
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(fmt.Sprintf(
		`{"base_url": %q, "auth": {"type": "bearer", "token_env": "BILLING_TOKEN"}, "headers": {"X-Client": "agentd-test", "X-Api-Version": "2"}, "openapi": "openapi.json"%s}`,
		downstream.URL+"/api", tenants)), 0o644))
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"BILLING_TOKEN": billingToken})
	return &connFixture{base: base, api: api, dir: dir}
}

func fsRead(name string) ([]byte, error) {
	f, err := demo.FS().Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

func jsonEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	must(t, json.Unmarshal([]byte(want), &b))
	ga, _ := json.Marshal(a)
	gb, _ := json.Marshal(b)
	if !bytes.Equal(ga, gb) {
		t.Errorf("%s = %s, want %s", what, ga, gb)
	}
}

// Acceptance 1: a confirm-tier POST via the request tool parks with a full
// card; after approval the downstream API receives exactly one request
// with the model's body, the connection's credentials and the
// Idempotency-Key, and the model is not called in between.
func TestConnectionRequestHandshake(t *testing.T) {
	f := newConnFixture(t, connRules)
	conv, st := newConversation(t, f.base, operatorKey)
	send(t, f.base, operatorKey, conv, "refund 500")

	cr := st.waitFor("confirmation_required", nil)
	card, _ := cr.Data["card"].(map[string]any)
	params, _ := cr.Data["params"].(map[string]any)
	body, _ := params["body"].(map[string]any)
	if cr.Data["method"] != "POST" || cr.Data["endpoint"] != "/refunds" || cr.Data["connection_name"] != "billing" ||
		cr.Data["tool_name"] != "request" || cr.Data["server_id"] != "connections" || cr.Data["escalated"] != false ||
		cr.Data["reason"] != "Moves money back to the customer" || body["amount"] != float64(500) ||
		card["path_template"] != "/refunds" || card["connection_name"] != "billing" || card["method"] != "POST" {
		t.Fatalf("card: %s", cr.Raw)
	}
	if got := fmt.Sprint(cr.Data["allowed_decisions"]); got != "[approve deny]" {
		t.Errorf("allowed_decisions %s", got)
	}
	callID := str(cr.Data, "tool_call_id")
	if n := len(f.api.Requests()); n != 0 {
		t.Fatalf("the downstream API got %d requests before approval", n)
	}
	st.waitFor("run_waiting", nil)

	status, dec := call(t, http.MethodPost, f.base+"/v1/tool-calls/"+callID+"/approval", operatorKey,
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, cr.Data["arguments_sha256"]))
	if status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve: %d %v", status, dec)
	}
	// The same call runs next: no model step in between.
	for _, want := range []string{"confirmation_resolved", "tool_call_started", "tool_call_result"} {
		ev := st.next()
		if ev.Type != want || ev.Data["tool_call_id"] != callID {
			t.Fatalf("expected %s for %s, got %s %s", want, callID, ev.Type, ev.Raw)
		}
		if want == "tool_call_started" && ev.Data["intent"] != "confirmed_write" {
			t.Errorf("the approved call does not run as a confirmed_write: %s", ev.Raw)
		}
		if want == "tool_call_result" {
			res, _ := ev.Data["result"].(map[string]any)
			if ev.Data["status"] != "completed" || res["status"] != float64(201) {
				t.Fatalf("result %s", ev.Raw)
			}
		}
	}
	msg := st.waitFor("message", nil)
	if !strings.HasPrefix(str(msg.Data, "content"), "request completed: ") {
		t.Errorf("model did not see the result: %q", msg.Data["content"])
	}
	st.waitFor("run_finished", nil)

	reqs := f.api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("downstream got %d requests, want exactly 1: %+v", len(reqs), reqs)
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/api/refunds" {
		t.Errorf("downstream got %s %s", r.Method, r.Path)
	}
	jsonEqual(t, "downstream body", r.Body, `{"order_id":"A-1001","amount":500,"reason":"broken"}`)
	if got := r.Header.Get("Authorization"); got != "Bearer "+billingToken {
		t.Errorf("Authorization %q", got)
	}
	if got := r.Header.Get("Idempotency-Key"); got != callID {
		t.Errorf("Idempotency-Key %q, want the call id %s", got, callID)
	}
	if r.Header.Get("X-Client") != "agentd-test" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("static headers missing: %v", r.Header)
	}
	if n := len(f.api.Refunds()); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}
}

// Acceptance 2 and 3: thresholds, delegation, intent rules and a never
// endpoint; every refusal is announced as tool_call_refused, never as
// confirmation_required, and nothing reaches the downstream API.
func TestConnectionTiers(t *testing.T) {
	f := newConnFixture(t, connRules)
	type refusal struct {
		key, msg  string
		tier      string
		escalated bool
		reason    string
	}
	for _, tc := range []refusal{
		{operatorKey, "refund 20000", "review", true, "Refunds over 10,000 need a finance review"},
		{operatorKey, "refund 200000", "never", true, "body.amount is 200000, above the limit of 100000"},
		{delegateKey, "refund 500", "review", true, "delegated"},
		{operatorKey, "refund as read", "never", false, `must declare intent "write"`},
		{operatorKey, "secret", "never", false, "Secrets stay secret"},
		{operatorKey, "override static", "never", false, `header "X-Api-Version" is set by the connection`},
		{operatorKey, "header crlf", "never", false, `the value of header "X-Note" contains a control character`},
		{operatorKey, "header via", "never", false, `header "Via" cannot be set by the model`},
		{operatorKey, "ssrf http://evil/", "never", false, "not a URL"},
		{operatorKey, "ssrf //evil/x", "never", false, "not a URL"},
		{operatorKey, "ssrf /../../admin", "never", false, "dot segment"},
		{operatorKey, "ssrf /%2e%2e/admin", "never", false, "dot segment"},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			rules := connRules
			if strings.HasPrefix(tc.msg, "ssrf ") {
				rules = strings.Replace(rules, `"ENDPOINT"`, fmt.Sprintf("%q", strings.TrimPrefix(tc.msg, "ssrf ")), 1)
			}
			g := f
			if rules != connRules {
				g = newConnFixture(t, rules)
			}
			conv, st := newConversation(t, g.base, tc.key)
			send(t, g.base, tc.key, conv, tc.msg)
			ref := st.waitFor("tool_call_refused", nil)
			if ref.Data["tier"] != tc.tier || ref.Data["escalated"] != tc.escalated || !strings.Contains(str(ref.Data, "reason"), tc.reason) {
				t.Fatalf("refusal %s, want tier %s escalated %v reason ~%q", ref.Raw, tc.tier, tc.escalated, tc.reason)
			}
			msg := st.waitFor("message", func(e sseEvent) bool { return strings.HasPrefix(str(e.Data, "content"), "request refused: ") })
			if !strings.Contains(str(msg.Data, "content"), "The call was not performed") {
				t.Errorf("the model was not told plainly: %q", msg.Data["content"])
			}
			st.waitFor("run_finished", nil)
			for _, ev := range st.seen {
				if ev.Type == "confirmation_required" {
					t.Fatalf("a refusal emitted confirmation_required: %s", st.summary())
				}
			}
			if n := len(g.api.Requests()); n != 0 {
				t.Fatalf("downstream got %d requests", n)
			}
		})
	}

	t.Run("a POST the endpoint declares a read runs as a read", func(t *testing.T) {
		conv, st := newConversation(t, f.base, operatorKey)
		before := len(f.api.Requests())
		send(t, f.base, operatorKey, conv, "report")
		res := st.waitFor("tool_call_result", nil)
		if res.Data["status"] != "completed" {
			t.Fatalf("report: %s", res.Raw)
		}
		reqs := f.api.Requests()
		if len(reqs) != before+1 || reqs[len(reqs)-1].Path != "/api/reports/run" || reqs[len(reqs)-1].Header.Get("Idempotency-Key") == "" {
			t.Fatalf("downstream %+v", reqs[before:])
		}
	})

	t.Run("a model-declared confirmed_write still parks", func(t *testing.T) {
		conv, st := newConversation(t, f.base, operatorKey)
		send(t, f.base, operatorKey, conv, "sneaky confirmed")
		cr := st.waitFor("confirmation_required", nil)
		params, _ := cr.Data["params"].(map[string]any)
		if params == nil {
			t.Fatalf("card %s", cr.Raw)
		}
		status, got := call(t, http.MethodGet, f.base+"/v1/tool-calls/"+str(cr.Data, "tool_call_id"), operatorKey, "")
		args, _ := got["arguments"].(map[string]any)
		if status != 200 || args["intent"] != "write" {
			t.Fatalf("stored intent %v, want write", got["arguments"])
		}
	})
}

// Acceptance 4: an OpenAPI operation tool with invalid arguments is refused
// with the validation message and no card; valid arguments get a card with
// the path template and the grouped arguments.
func TestOperationTools(t *testing.T) {
	f := newConnFixture(t, connRules)
	status, tools := call(t, http.MethodGet, f.base+"/v1/tools", operatorKey, "")
	list, _ := tools["tools"].([]any)
	tiers := map[string]string{}
	for _, x := range list {
		m := x.(map[string]any)
		tiers[str(m, "name")] = str(m, "tier")
	}
	if status != 200 || tiers["request"] != "per_call" || tiers["billing__createRefund"] != "confirm" ||
		tiers["billing__getOrder"] != "auto" || tiers["billing__deleteInvoice"] != "never" {
		t.Fatalf("tools %d %v", status, tiers)
	}

	conv, st := newConversation(t, f.base, operatorKey)
	send(t, f.base, operatorKey, conv, "op invalid")
	ref := st.waitFor("tool_call_refused", nil)
	if !strings.Contains(str(ref.Data, "reason"), "The call was not performed: invalid arguments") {
		t.Fatalf("refusal %s", ref.Raw)
	}
	st.waitFor("run_finished", nil)
	for _, ev := range st.seen {
		if ev.Type == "confirmation_required" {
			t.Fatalf("invalid arguments got a card: %s", st.summary())
		}
	}

	conv, st = newConversation(t, f.base, operatorKey)
	send(t, f.base, operatorKey, conv, "op valid")
	cr := st.waitFor("confirmation_required", nil)
	card, _ := cr.Data["card"].(map[string]any)
	if cr.Data["tool_name"] != "billing__createRefund" || cr.Data["server_id"] != "billing" || cr.Data["connection_name"] != "billing" ||
		card["path_template"] != "/refunds" || cr.Data["method"] != "POST" || cr.Data["reason"] != "Moves money back to the customer" {
		t.Fatalf("card %s", cr.Raw)
	}
	b, _ := json.Marshal(cr.Data["params"])
	jsonEqual(t, "grouped arguments", b, `{"path":{},"query":{},"header":{},"body":{"order_id":"A-1004","amount":70}}`)
	status, _ = call(t, http.MethodPost, f.base+"/v1/tool-calls/"+str(cr.Data, "tool_call_id")+"/approval", operatorKey, `{"decision":"approve"}`)
	if status != 200 {
		t.Fatalf("approve %d", status)
	}
	if res := st.waitFor("tool_call_result", nil); res.Data["status"] != "completed" {
		t.Fatalf("result %s", res.Raw)
	}
	reqs := f.api.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/api/refunds" {
		t.Fatalf("downstream %+v", reqs)
	}
	jsonEqual(t, "body", reqs[0].Body, `{"order_id":"A-1004","amount":70}`)
}

// Acceptance 5: edit on approve — the edited arguments are re-checked; an
// edit over a threshold is refused, not run; a stale digest is 409; an
// accepted edit runs with the edited body and the decision records both
// digests.
func TestEditOnApprove(t *testing.T) {
	f := newConnFixture(t, connRules)
	park := func() (string, string, *eventStream) {
		conv, st := newConversation(t, f.base, operatorKey)
		send(t, f.base, operatorKey, conv, "memo")
		cr := st.waitFor("confirmation_required", nil)
		if got := fmt.Sprint(cr.Data["allowed_decisions"]); got != "[approve deny edit]" {
			t.Fatalf("allowed_decisions %s", got)
		}
		return str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256"), st
	}
	approve := func(id, body string) (int, map[string]any) {
		return call(t, http.MethodPost, f.base+"/v1/tool-calls/"+id+"/approval", operatorKey, body)
	}

	// Stale digest: 409, nothing decided.
	id, digest, _ := park()
	status, got := approve(id, `{"decision":"approve","arguments_sha256":"`+strings.Repeat("0", 64)+`","arguments":{"path":{"id":"INV-2002"},"body":{"memo":"x"}}}`)
	if status != 409 || errCode(got) != "stale" {
		t.Fatalf("stale: %d %v", status, got)
	}
	// Invalid edited arguments: 400, still pending.
	status, got = approve(id, `{"decision":"approve","arguments":{"path":{"id":"INV-2002"},"body":{"amount":"lots"}}}`)
	if status != 400 || errCode(got) != "invalid" {
		t.Fatalf("invalid edit: %d %v", status, got)
	}
	// An edit over the threshold: refused, not run.
	status, got = approve(id, `{"decision":"approve","arguments_sha256":"`+digest+`","arguments":{"path":{"id":"INV-2002"},"body":{"memo":"x","amount":20000}}}`)
	if status != 403 || !strings.Contains(fmt.Sprint(got), "escalated to review") {
		t.Fatalf("escalating edit: %d %v", status, got)
	}
	status, got = call(t, http.MethodGet, f.base+"/v1/tool-calls/"+id, operatorKey, "")
	if status != 200 || got["status"] != "refused" || got["tier"] != "review" {
		t.Fatalf("after an escalating edit the call is %v", got)
	}
	if n := len(f.api.Requests()); n != 0 {
		t.Fatalf("an escalating edit reached the downstream API (%d requests)", n)
	}

	// An accepted edit runs with the edited body; both digests are recorded.
	id, digest, st := park()
	edited := `{"path":{"id":"INV-2002"},"body":{"memo":"Paid in cash","amount":90}}`
	status, dec := approve(id, `{"decision":"edit","arguments_sha256":"`+digest+`","arguments":`+edited+`}`)
	if status != 200 || dec["arguments_sha256"] != digest || str(dec, "edited_arguments_sha256") == "" || dec["edited_arguments_sha256"] == digest {
		t.Fatalf("edit: %d %v", status, dec)
	}
	resolved := st.waitFor("confirmation_resolved", nil)
	if resolved.Data["edited_arguments_sha256"] != dec["edited_arguments_sha256"] {
		t.Errorf("confirmation_resolved %s", resolved.Raw)
	}
	started := st.waitFor("tool_call_started", nil)
	b, _ := json.Marshal(started.Data["arguments"])
	jsonEqual(t, "started arguments", b, edited)
	if res := st.waitFor("tool_call_result", nil); res.Data["status"] != "completed" {
		t.Fatalf("result %s", res.Raw)
	}
	reqs := f.api.Requests()
	if len(reqs) != 1 || reqs[0].Method != "PATCH" || reqs[0].Path != "/api/invoices/INV-2002" {
		t.Fatalf("downstream %+v", reqs)
	}
	jsonEqual(t, "edited body", reqs[0].Body, `{"memo":"Paid in cash","amount":90}`)
	// Repeating the same edit is idempotent; another edit is a conflict.
	if status, again := approve(id, `{"decision":"edit","arguments":`+edited+`}`); status != 200 || again["id"] != dec["id"] {
		t.Errorf("repeat: %d %v", status, again)
	}
	if status, _ := approve(id, `{"decision":"edit","arguments":{"path":{"id":"INV-2002"},"body":{"memo":"other"}}}`); status != 409 {
		t.Errorf("different edit after the decision: %d, want 409", status)
	}
	if status, _ := approve(id, `{"decision":"approve"}`); status != 409 {
		t.Errorf("a plain approval after an edited one: %d, want 409 (other arguments ran)", status)
	}
	// Request-tool edits: the effective arguments count (a repeat with the
	// same lower-case method is the same edit), and an edit may not send
	// the call to another endpoint.
	conv, st3 := newConversation(t, f.base, operatorKey)
	send(t, f.base, operatorKey, conv, "patch")
	cr3 := st3.waitFor("confirmation_required", nil)
	pid := str(cr3.Data, "tool_call_id")
	if status, got := approve(pid, `{"decision":"edit","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":1},"intent":"write"}}`); status != 400 {
		t.Fatalf("retargeting edit: %d %v", status, got)
	}
	lower := `{"decision":"edit","arguments":{"connection":"billing","method":"patch","endpoint":"/invoices/INV-2003","data":{"memo":"y"},"intent":"confirmed_write"}}`
	status, first := approve(pid, lower)
	if status != 200 {
		t.Fatalf("edit: %d %v", status, first)
	}
	if status, again := approve(pid, lower); status != 200 || again["id"] != first["id"] {
		t.Fatalf("the same edit again: %d %v", status, again)
	}
	st3.waitFor("tool_call_result", nil)

	// A call without "edit" in allowed_decisions refuses edited arguments.
	conv, st2 := newConversation(t, f.base, operatorKey)
	send(t, f.base, operatorKey, conv, "refund 500")
	cr := st2.waitFor("confirmation_required", nil)
	if status, got := approve(str(cr.Data, "tool_call_id"), `{"decision":"approve","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":1},"intent":"write"}}`); status != 400 {
		t.Errorf("edit where not allowed: %d %v", status, got)
	}
}

// Acceptance 7: the durable path previews a confirm-tier write (nothing
// reaches the downstream API) and executes a confirmed_write exactly once;
// review/never refuse; only operator and delegate keys may use it.
func TestDurableConnectionRequest(t *testing.T) {
	f := newConnFixture(t, connRules)
	url := f.base + "/v1/connections/billing/request"
	write := `{"method":"POST","endpoint":"/refunds","data":{"order_id":"A-1002","amount":300},"intent":"%s"}`

	status, prev := call(t, http.MethodPost, url, operatorKey, fmt.Sprintf(write, "write"))
	p, _ := prev["preview"].(map[string]any)
	args, _ := p["arguments"].(map[string]any)
	if status != 200 || p == nil || p["connection"] != "billing" || p["method"] != "POST" || p["endpoint"] != "/refunds" ||
		p["path_template"] != "/refunds" || p["reason"] != "Moves money back to the customer" || args["body"] == nil ||
		!strings.Contains(str(p, "instruction"), "confirmed_write") {
		t.Fatalf("preview: %d %v", status, prev)
	}
	if n := len(f.api.Requests()); n != 0 {
		t.Fatalf("a preview reached the downstream API")
	}

	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(fmt.Sprintf(write, "confirmed_write")))
	req.Header.Set("Authorization", "Bearer "+operatorKey)
	req.Header.Set("Idempotency-Key", "wf-run-7")
	resp, err := testClient.Do(req)
	must(t, err)
	var done map[string]any
	must(t, json.NewDecoder(resp.Body).Decode(&done))
	resp.Body.Close()
	if resp.StatusCode != 200 || done["status"] != float64(201) {
		t.Fatalf("confirmed_write: %d %v", resp.StatusCode, done)
	}
	reqs := f.api.Requests()
	// The caller's key goes downstream namespaced by tenant and project;
	// the answer names the key that was sent.
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+billingToken {
		t.Fatalf("downstream %+v", reqs)
	}
	if k := reqs[0].Header.Get("Idempotency-Key"); k == "wf-run-7" || len(k) != 64 || done["idempotency_key"] != k {
		t.Fatalf("downstream Idempotency-Key %q, answer %v", k, done["idempotency_key"])
	}
	if n := len(f.api.Refunds()); n != 1 {
		t.Fatalf("%d refunds, want exactly 1", n)
	}

	for _, tc := range []struct {
		key, body string
		status    int
		code      string
	}{
		{operatorKey, `{"method":"POST","endpoint":"/refunds","data":{"order_id":"A-1002","amount":50000},"intent":"confirmed_write"}`, 403, "forbidden"},
		{operatorKey, `{"method":"DELETE","endpoint":"/invoices/INV-2001","intent":"confirmed_write"}`, 403, "forbidden"},
		{delegateKey, fmt.Sprintf(write, "confirmed_write"), 403, "forbidden"}, // escalateConfirm: confirm → review
		{clientKey, fmt.Sprintf(write, "write"), 403, "forbidden"},
		{operatorKey, `{"method":"GET","endpoint":"//evil/x","intent":"read"}`, 400, "invalid"},
		{operatorKey, `{"method":"POST","endpoint":"/refunds","intent":"write","extra":1}`, 400, "invalid"},
		{operatorKey, `{"method":"POST","endpoint":"/refunds","data":{"amount":1},"intent":"read"}`, 403, "forbidden"},
		// Header values that cannot be sent, and forbidden header names,
		// are refused up front: no preview, nothing sent.
		{operatorKey, `{"method":"GET","endpoint":"/invoices","headers":{"X-Note":"a\r\nX-Injected: 1"},"intent":"read"}`, 400, "invalid"},
		{operatorKey, `{"method":"GET","endpoint":"/invoices","headers":{"X-Note":"a\u0000b"},"intent":"read"}`, 400, "invalid"},
		{operatorKey, `{"method":"POST","endpoint":"/refunds","data":{"order_id":"A-1002","amount":3},"headers":{"X-Note":"a\nb"},"intent":"write"}`, 400, "invalid"},
		{operatorKey, `{"method":"GET","endpoint":"/invoices","headers":{"X-Originating-IP":"10.0.0.1"},"intent":"read"}`, 400, "invalid"},
		{operatorKey, `{"method":"GET","endpoint":"/invoices","headers":{"X-Auth-Token":"t"},"intent":"read"}`, 400, "invalid"},
	} {
		status, got := call(t, http.MethodPost, url, tc.key, tc.body)
		if status != tc.status || errCode(got) != tc.code {
			t.Errorf("%s %s: %d %v, want %d %s", tc.key, tc.body, status, got, tc.status, tc.code)
		}
	}
	if status, got := call(t, http.MethodPost, f.base+"/v1/connections/nope/request", operatorKey, fmt.Sprintf(write, "write")); status != 404 {
		t.Errorf("unknown connection: %d %v", status, got)
	}
	if n := len(f.api.Requests()); n != 1 {
		t.Fatalf("refused durable requests reached the downstream API: %d requests", n)
	}
	// Every request the path answered is in the audit log, refusals too
	// (a body the API cannot decode asked nothing of the path).
	status, page := call(t, http.MethodGet, f.base+"/v1/audit?kind=connection_request&limit=100", operatorKey, "")
	entries, _ := page["entries"].([]any)
	if status != 200 || len(entries) != 14 {
		t.Fatalf("audit of the durable path: %d, %d entries, want 14: %v", status, len(entries), page)
	}
	entry := func(i int) map[string]any { e, _ := entries[i].(map[string]any); return e }
	for i, want := range map[int][4]string{0: {"preview", "operator", "POST", "/refunds"}, 1: {"performed", "operator", "POST", "/refunds"},
		5: {"forbidden", "client", "POST", "/refunds"}, 6: {"invalid", "operator", "GET", "//evil/x"},
		13: {"not_found", "operator", "POST", "/refunds"}} {
		e := entry(i)
		if e["outcome"] != want[0] || e["role"] != want[1] || e["method"] != want[2] || e["endpoint"] != want[3] || str(e, "key_id") == "" {
			t.Errorf("audit entry %d = %v, want %v", i, e, want)
		}
	}
}

// durableWrite performs a confirmed_write refund on the durable path with
// an Idempotency-Key and returns the status and the answer.
func durableWrite(t *testing.T, base, key, idempotencyKey, orderID string, amount int) (int, map[string]any) {
	t.Helper()
	body := fmt.Sprintf(`{"method":"POST","endpoint":"/refunds","data":{"order_id":%q,"amount":%d},"intent":"confirmed_write"}`, orderID, amount)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/connections/billing/request", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idempotencyKey)
	resp, err := testClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var out map[string]any
	must(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// Two tenants that send the same Idempotency-Key on the durable path each
// get their own refund: the key goes downstream namespaced by tenant and
// project, so B never receives A's record. A retry by A with its key is
// still answered with A's first refund.
func TestDurableIdempotencyKeyPerTenant(t *testing.T) {
	const keyB, keyA2 = "op-key-tenant-b", "op-key-project-2"
	f := newConnFixtureWith(t, connRules, connOpts{keys: map[string][3]string{
		keyB: {"t2", "operator"}, keyA2: {"t1", "operator", "p2"},
	}})
	refundID := func(m map[string]any) string {
		b, _ := m["body"].(map[string]any)
		return str(b, "id")
	}
	statusA, a := durableWrite(t, f.base, operatorKey, "refund-42", "A-1001", 100)
	statusB, b := durableWrite(t, f.base, keyB, "refund-42", "A-1002", 200)
	statusP, p := durableWrite(t, f.base, keyA2, "refund-42", "A-1004", 30)
	if statusA != 200 || statusB != 200 || statusP != 200 || a["status"] != float64(201) || b["status"] != float64(201) || p["status"] != float64(201) {
		t.Fatalf("refunds: %d %v / %d %v / %d %v", statusA, a, statusB, b, statusP, p)
	}
	if refundID(a) == "" || refundID(a) == refundID(b) || refundID(a) == refundID(p) || refundID(b) == refundID(p) {
		t.Fatalf("tenants share a downstream result: A %v, B %v, other project %v", a["body"], b["body"], p["body"])
	}
	refunds := f.api.Refunds()
	if len(refunds) != 3 || refunds[1].OrderID != "A-1002" || refunds[1].Amount != 200 {
		t.Fatalf("refunds made: %+v, want A's, B's (A-1002, 200) and the other project's", refunds)
	}
	keys := map[string]bool{}
	for _, r := range f.api.Requests() {
		k := r.Header.Get("Idempotency-Key")
		if k == "refund-42" || len(k) != 64 {
			t.Errorf("downstream Idempotency-Key %q: want the caller's key namespaced (64 hex digits)", k)
		}
		keys[k] = true
	}
	if len(keys) != 3 {
		t.Errorf("%d distinct downstream keys, want 3", len(keys))
	}
	// A's retry with its own key is the same downstream request: A's refund.
	if status, again := durableWrite(t, f.base, operatorKey, "refund-42", "A-1001", 100); status != 200 || refundID(again) != refundID(a) {
		t.Errorf("A's retry: %d %v, want refund %s", status, again, refundID(a))
	}
	if n := len(f.api.Refunds()); n != 3 {
		t.Errorf("A's retry made a refund: %d refunds", n)
	}
}

// connection.json tenant_ids limits which tenants may use a connection:
// to another tenant it is not found on the durable path (as an unknown
// connection is) and its tools, which its model is not offered, are
// refused in the loop before any card;
// nothing reaches the downstream API.
func TestConnectionTenantIDs(t *testing.T) {
	const keyB = "op-key-tenant-b"
	f := newConnFixtureWith(t, connRules, connOpts{keys: map[string][3]string{keyB: {"t2", "operator"}}, tenantIDs: `["t1"]`})
	url := f.base + "/v1/connections/billing/request"
	read := `{"method":"GET","endpoint":"/invoices","intent":"read"}`

	status, got := call(t, http.MethodPost, url, keyB, read)
	_, unknown := call(t, http.MethodPost, f.base+"/v1/connections/billinx/request", keyB, read)
	msg := func(m map[string]any) string { e, _ := m["error"].(map[string]any); return str(e, "message") }
	if status != 404 || errCode(got) != "not_found" || msg(got) != strings.Replace(msg(unknown), "billinx", "billing", 1) {
		t.Fatalf("tenant t2 on the durable path: %d %v; an unknown connection reads %v", status, got, unknown)
	}
	status, _ = call(t, http.MethodPost, url, keyB, `{"method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":5},"intent":"confirmed_write"}`)
	if status != 404 || len(f.api.Requests()) != 0 {
		t.Fatalf("tenant t2's write: %d, %d downstream requests", status, len(f.api.Requests()))
	}

	for _, msg := range []string{"refund 500", "op valid"} {
		conv, st := newConversation(t, f.base, keyB)
		send(t, f.base, keyB, conv, msg)
		ref := st.waitFor("tool_call_refused", nil)
		// The tenant's model is not offered the tools (TestTenantToolLists):
		// a call naming one anyway is a call of an unknown tool.
		if ref.Data["tier"] != "never" || !strings.Contains(str(ref.Data, "reason"), "is not available") {
			t.Fatalf("%s by tenant t2: %s", msg, ref.Raw)
		}
		st.waitFor("run_finished", nil)
		for _, ev := range st.seen {
			if ev.Type == "confirmation_required" {
				t.Fatalf("%s by tenant t2 got a card: %s", msg, st.summary())
			}
		}
	}
	if n := len(f.api.Requests()); n != 0 {
		t.Fatalf("tenant t2 reached the downstream API: %d requests", n)
	}

	// Tenant t1 is listed: its calls work.
	if status, got := call(t, http.MethodPost, url, operatorKey, read); status != 200 || got["status"] != float64(200) {
		t.Fatalf("tenant t1 on the durable path: %d %v", status, got)
	}
	conv, st := newConversation(t, f.base, operatorKey)
	send(t, f.base, operatorKey, conv, "refund 500")
	st.waitFor("confirmation_required", nil)
}

// Acceptance 8: a malformed policy.json, connection.json or OpenAPI
// document stops the server from starting, naming the file and the field.
func TestBadConnectionFilesRefuseToStart(t *testing.T) {
	good := map[string]string{
		"connection.json": `{"base_url": "http://127.0.0.1:1/api", "openapi": "openapi.json"}`,
		"policy.json":     `{"endpoints": {"GET /a": {}}}`,
		"openapi.json":    `{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {"operationId": "getA", "responses": {"200": {"description": "ok"}}}}}}`,
	}
	for _, tc := range []struct {
		file, content, want string
	}{
		{"policy.json", `{"endpoints": {"GET /a": {"confirm": "maybe"}}}`, `connections/billing/policy.json: field "endpoints.GET /a.confirm"`},
		{"policy.json", `{"endpoints": {"GET /a/{x}": {}, "GET /a/*": {}}}`, `connections/billing/policy.json: field "endpoints.GET /a/{x}": conflicts with`},
		{"connection.json", `{"base_url": "ftp://x"}`, `connections/billing/connection.json: field "base_url"`},
		{"connection.json", `{"base_url": "http://x", "auth": {"type": "bearer", "token_env": "NOPE_UNSET_VAR"}}`, `NOPE_UNSET_VAR`},
		{"connection.json", `{"base_url": "http://x", "timeout": 5}`, `connections/billing/connection.json: field "timeout": unknown field`},
		{"connection.json", `{"base_url": "http://x", "tenant_ids": ["t1", ""]}`, `connections/billing/connection.json: field "tenant_ids[1]": is empty`},
		{"connection.json", `{"base_url": "http://x", "tenant_ids": "t1"}`, `connections/billing/connection.json: field "tenant_ids": must be an array of tenant ids`},
		{"openapi.json", `{"openapi": "3.0.3", "paths": {"/a": {"get": {"responses": {}}}}}`, `connections/billing/openapi.json`},
	} {
		t.Run(tc.file+" "+tc.want, func(t *testing.T) {
			dir, _ := writeProject(t, projectOpts{})
			cdir := filepath.Join(dir, "connections", "billing")
			must(t, os.MkdirAll(cdir, 0o755))
			for name, content := range good {
				if name == tc.file {
					content = tc.content
				}
				must(t, os.WriteFile(filepath.Join(cdir, name), []byte(content), 0o644))
			}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"serve", "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir()},
				func(string) string { return "" }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(stdout.String(), "listening") {
				t.Fatalf("the server started: %s", stdout.String())
			}
		})
	}
}
