package connections

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// classify classifies a model call the way the loop does.
func classify(tool *confirm.Tool, args string) confirm.Classification {
	return confirm.Classify(confirm.Call{Name: tool.Name, Arguments: json.RawMessage(args), Tool: tool})
}

func TestRequestToolEndToEnd(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/fail":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":"amount too large"}`))
		case "/api/v1/huge-error":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(strings.Repeat("x", 5000)))
		case "/api/v1/text":
			_, _ = w.Write([]byte("plain words"))
		case "/api/v1/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("{\n  \"id\": \"N-1\"\n}"))
		}
	})
	c := loadConn(t, `{"base_url":"`+api.URL+`/api/v1/","description":"Notes API"}`, nil,
		map[string]string{"policy.json": `{"endpoints":{"POST /orders/{id}/notes":{"confirm":true,"reason":"Adds a note"}}}`})
	rt := NewRequestTool([]*Connection{c})
	dec := rt.Confirm()
	if again := rt.Confirm(); again != dec {
		t.Error("Decision is rebuilt on every call")
	}
	if dec.Name != "request" || dec.ServerID != "connections" || dec.Kind != confirm.KindRequest || dec.Connections["api"] != c.Confirm() {
		t.Errorf("decision = %+v", dec)
	}
	spec := rt.Spec()
	for _, want := range []string{"intent", "approval", "do not retry", "- api: Notes API", "base path /api/v1", "POST /orders/{id}/notes"} {
		if !strings.Contains(spec.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, spec.Description)
		}
	}

	model := `{"connection":"api","method":"post","endpoint":"orders/A 1/notes","params":{"q":"x y","tag":["a","b"],"n":3},` +
		`"data":{"text":"hi <b> & \u00e9","n":1.50,"list":[1,2]},"headers":{"X-Trace":"t-1"},"intent":"write"}`
	d := classify(dec, model)
	if d.Refused || d.Tier != agentd.TierConfirm || d.Reason != "Adds a note" || d.Endpoint != "/orders/A%201/notes" {
		t.Fatalf("decision = %+v", d)
	}
	if !strings.Contains(string(d.Arguments), `"method":"POST"`) {
		t.Errorf("method not upper-cased in the effective arguments: %s", d.Arguments)
	}
	// Approved: the runtime executes the same call, the request recorded
	// when it was classified.
	out, err := rt.Execute(context.Background(), requestCall(rt, "call_42", model))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"status":201,"body":{"id":"N-1"},"truncated":false}` {
		t.Errorf("result = %s", out)
	}
	got := api.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	q, _ := url.ParseQuery(r.RawQuery)
	if r.Method != "POST" || r.Path != "/api/v1/orders/A%201/notes" || q.Get("q") != "x y" || strings.Join(q["tag"], ",") != "a,b" || q.Get("n") != "3" {
		t.Errorf("request = %s %s ? %s", r.Method, r.Path, r.RawQuery)
	}
	if string(r.Body) != `{"text":"hi <b> & \u00e9","n":1.50,"list":[1,2]}` {
		t.Errorf("body = %s", r.Body)
	}
	if r.Header.Get("X-Trace") != "t-1" || r.Header.Get("Idempotency-Key") != "call_42" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", r.Header)
	}

	// HTTP errors are the call's failure, with status and body.
	_, err = rt.Execute(context.Background(), requestCall(rt, "c2", `{"connection":"api","method":"POST","endpoint":"/fail","data":{},"intent":"write"}`))
	if err == nil || err.Error() != `HTTP 422 Unprocessable Entity: {"error":"amount too large"}` {
		t.Errorf("err = %v", err)
	}
	_, err = rt.Execute(context.Background(), requestCall(rt, "c3", `{"connection":"api","method":"GET","endpoint":"/huge-error","intent":"read"}`))
	if err == nil || !strings.HasPrefix(err.Error(), "HTTP 500 Internal Server Error: xxx") || len(err.Error()) > 2200 {
		t.Errorf("err = %.80s… (%d bytes)", err, len(err.Error()))
	}
	out, err = rt.Execute(context.Background(), requestCall(rt, "c4", `{"connection":"api","method":"GET","endpoint":"/text","intent":"read"}`))
	if err != nil || string(out) != `{"status":200,"body":"plain words","truncated":false}` {
		t.Errorf("text result = %s, %v", out, err)
	}
	out, err = rt.Execute(context.Background(), requestCall(rt, "c5", `{"connection":"api","method":"DELETE","endpoint":"/empty","intent":"write"}`))
	if err != nil || string(out) != `{"status":204,"body":"","truncated":false}` {
		t.Errorf("empty result = %s, %v", out, err)
	}
	// Arguments no request can be made of fail before anything is sent.
	before := len(api.requests())
	for _, bad := range []string{
		`{"connection":"nope","method":"GET","endpoint":"/x","intent":"read"}`,
		`{"connection":"api","method":"TRACE","endpoint":"/x","intent":"read"}`,
		`{"connection":"api","method":"GET","endpoint":"/x","intent":"maybe"}`,
		`{"connection":"api","method":"GET","endpoint":"/x","intent":"read","params":{"deep":{"a":1}}}`,
		`not json`,
	} {
		if d := classify(dec, bad); !d.Refused || !d.Invalid {
			t.Errorf("the decision accepted %s", bad)
		}
		if _, err := rt.Execute(context.Background(), requestCall(rt, "bad", bad)); err == nil {
			t.Errorf("Execute accepted %s", bad)
		}
	}
	if n := len(api.requests()) - before; n != 0 {
		t.Errorf("bad calls sent %d requests", n)
	}
}

func TestRequestToolValidate(t *testing.T) {
	c := loadConn(t, `{"base_url":"https://x.example"}`, nil, nil)
	validate := NewRequestTool([]*Connection{c}).Confirm().Validate
	eff, err := validate(json.RawMessage(` {"connection":"api", "method":"patch", "endpoint":"/a", "intent":"write", "data":{"html":"<b>"}} `))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(eff, &m); err != nil || m["method"] != "PATCH" || strings.ContainsAny(string(eff), " \n") || !strings.Contains(string(eff), `"<b>"`) {
		t.Errorf("effective = %s, %v", eff, err)
	}
	for args, want := range map[string]string{
		`{"connection":"other","method":"GET","endpoint":"/a","intent":"read"}`:                              `at '/connection'`,
		`{"connection":"api","method":"TRACE","endpoint":"/a","intent":"read"}`:                              `at '/method'`,
		`{"connection":"api","method":"GET","intent":"read"}`:                                                `missing property 'endpoint'`,
		`{"connection":"api","method":"GET","endpoint":"/a","intent":"read","extra":1}`:                      `additional properties 'extra' not allowed`,
		`{"connection":"api","method":"GET","endpoint":"/a","intent":"read","params":{"a":{}}}`:              `at '/params/a'`,
		`{"connection":"api","method":"GET","endpoint":"/a","intent":"read","headers":{"a":1}}`:              `at '/headers/a'`,
		`{"connection":"api","method":"GET","endpoint":"` + strings.Repeat("a", 2049) + `","intent":"read"}`: `at '/endpoint'`,
		`[]`: `must be a JSON object`,
	} {
		_, err := validate(json.RawMessage(args))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), `invalid arguments for tool "request": `) {
			t.Errorf("%.60s: err = %v, want %q", args, err, want)
		}
	}
}

const itemsDoc = `{"openapi":"3.0.3","info":{"title":"items","version":"1"},"paths":{
 "/tenants/{tenant}/items/{id}":{
  "parameters":[{"name":"tenant","in":"path","required":true,"schema":{"type":"string"}}],
  "put":{"operationId":"putItem","summary":"Replace an item",
   "parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}},
                 {"name":"dry_run","in":"query","schema":{"type":"boolean"}},
                 {"name":"X-Request-Id","in":"header","schema":{"type":"string"}}],
   "requestBody":{"required":true,"content":{"application/json":{"schema":{"type":"object","properties":{"amount":{"type":"number"}}}}}},
   "responses":{"200":{"description":"ok"}}},
  "get":{"operationId":"getItem","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],"responses":{"200":{"description":"ok"}}}}}}`

func TestOperationToolEndToEnd(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("dry_run") == "false" {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"busy"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	c := loadConn(t, `{"base_url":"`+api.URL+`/api","openapi":"openapi.json","tools":{"request":false}}`, nil, map[string]string{
		"openapi.json": itemsDoc,
		"policy.json":  `{"endpoints":{"PUT /tenants/{t}/items/{id}":{"confirm":true,"allow_edit":true,"thresholds":[{"field":"body.amount","above":100,"escalate":"review"}]}}}`,
	})
	if NewRequestTool([]*Connection{c}) != nil {
		t.Error("tools.request false still made a request tool")
	}
	var put, get *OperationTool
	for _, tool := range c.OperationTools() {
		switch tool.Name() {
		case "api__putItem":
			put = tool
		case "api__getItem":
			get = tool
		}
	}
	if put == nil || get == nil {
		t.Fatalf("tools = %v", c.OperationTools())
	}
	dec := put.Confirm()
	if again := put.Confirm(); again != dec {
		t.Error("Decision is rebuilt on every call")
	}
	if dec.Kind != confirm.KindOperation || dec.ServerID != "api" || dec.Connection != c.Confirm() ||
		dec.Operation.Method != "PUT" || dec.Operation.Template != "/tenants/{tenant}/items/{id}" {
		t.Errorf("decision = %+v", dec)
	}
	if !strings.Contains(put.Spec().Description, "needs the user's approval") || strings.Contains(get.Spec().Description, "approval") {
		t.Errorf("descriptions: %q / %q", put.Spec().Description, get.Spec().Description)
	}

	model := `{"path":{"tenant":"acme","id":"it em"},"query":{"dry_run":true},"header":{"X-Request-Id":"r-1"},"body":{"amount":12.50}}`
	d := classify(dec, model)
	if d.Refused || d.Tier != agentd.TierConfirm || d.PathTemplate != "/tenants/{tenant}/items/{id}" || len(d.AllowedDecisions) != 3 {
		t.Fatalf("decision = %+v", d)
	}
	if d := classify(dec, `{"path":{"tenant":"acme","id":"x"},"body":{"amount":500}}`); d.Tier != agentd.TierReview || !d.Refused {
		t.Errorf("threshold: %+v", d)
	}
	if d := classify(dec, `{"path":{"tenant":"acme"},"body":{}}`); !d.Refused || !strings.Contains(d.Reason, "missing property 'id'") {
		t.Errorf("invalid arguments: %+v", d)
	}
	out, err := put.Execute(context.Background(), classified(dec, "call_9", model))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"status":200,"body":{"ok":true},"truncated":false}` {
		t.Errorf("result = %s", out)
	}
	// A path parameter is one segment: one that would climb out is refused.
	for _, id := range []string{"x/../y", "..", "%2e%2e", "a\\b"} {
		args, _ := json.Marshal(map[string]any{"path": map[string]any{"tenant": "acme", "id": id}})
		if d := classify(get.Confirm(), string(args)); !d.Refused || !d.Invalid {
			t.Errorf("path parameter %q passed the decision", id)
		}
		if _, err := get.Execute(context.Background(), classified(get.Confirm(), "call_10", string(args))); err == nil {
			t.Errorf("path parameter %q was sent", id)
		}
	}
	// A recorded path that climbs out (a store written by something else)
	// is not sent either.
	climb := classified(get.Confirm(), "call_10", `{"path":{"tenant":"acme","id":"A-1"}}`)
	climb.Endpoint = "/tenants/acme/../../admin"
	if _, err := get.Execute(context.Background(), climb); err == nil {
		t.Error("a recorded path that leaves the base path was sent")
	}
	out, err = get.Execute(context.Background(), classified(get.Confirm(), "call_10", `{"path":{"tenant":"acme","id":"A-1"}}`))
	if err != nil || string(out) != `{"status":200,"body":{"ok":true},"truncated":false}` {
		t.Fatalf("get: %s, %v", out, err)
	}
	_, err = put.Execute(context.Background(), classified(dec, "call_11",
		`{"path":{"tenant":"acme","id":"a"},"query":{"dry_run":false},"body":{}}`))
	if err == nil || err.Error() != `HTTP 409 Conflict: {"error":"busy"}` {
		t.Errorf("err = %v", err)
	}

	got := api.requests()
	if len(got) != 3 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if r.Method != "PUT" || r.Path != "/api/tenants/acme/items/it%20em" || r.RawQuery != "dry_run=true" || string(r.Body) != `{"amount":12.50}` {
		t.Errorf("request = %s %s ? %s %s", r.Method, r.Path, r.RawQuery, r.Body)
	}
	if r.Header.Get("X-Request-Id") != "r-1" || r.Header.Get("Idempotency-Key") != "call_9" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", r.Header)
	}
	if r := got[1]; r.Method != "GET" || r.Path != "/api/tenants/acme/items/A-1" {
		t.Errorf("get request = %s %s", r.Method, r.Path)
	}
	if r := got[1]; r.Header.Get("Idempotency-Key") != "" || len(r.Body) != 0 {
		t.Errorf("GET carried Idempotency-Key %q or a body %q", r.Header.Get("Idempotency-Key"), r.Body)
	}
}

// An operation's base tier is confirm's one rule, with or without a
// policy: the description the model reads and the decision agree.
func TestOperationTierWithoutPolicy(t *testing.T) {
	c := loadConn(t, `{"base_url":"http://127.0.0.1:1/api","openapi":"openapi.json","tools":{"request":false}}`, nil,
		map[string]string{"openapi.json": itemsDoc})
	for _, tool := range c.OperationTools() {
		tier := tool.Confirm().OperationTier()
		want := map[string]agentd.Tier{"api__putItem": agentd.TierConfirm, "api__getItem": agentd.TierAuto}[tool.Name()]
		if tier != want || confirm.OperationTier(nil, tool.Operation().Method, tool.Operation().Template) != want {
			t.Errorf("%s: tier %s, without a policy %s, want %s", tool.Name(), tier,
				confirm.OperationTier(nil, tool.Operation().Method, tool.Operation().Template), want)
		}
		asks := strings.Contains(tool.Spec().Description, "It needs the user's approval")
		if asks != (want == agentd.TierConfirm) {
			t.Errorf("%s: description %q disagrees with tier %s", tool.Name(), tool.Spec().Description, want)
		}
	}
}

// The request tool and each connection are tool sources: their IDs are the
// server_ids of their tools, which they list with the decision the loop
// classifies with, and Execute dispatches by name.
func TestSources(t *testing.T) {
	api := newRecorder(t, nil)
	conns, err := Load(writeProject(t, map[string]string{
		"connections/api/connection.json":  `{"base_url":"` + api.URL + `","openapi":"openapi.json"}`,
		"connections/api/openapi.json":     minimalDoc,
		"connections/only/connection.json": `{"base_url":"` + api.URL + `","tools":{"request":false}}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	srcs := Sources(conns)
	if len(srcs) != 3 || srcs[0].ID() != "connections" || srcs[1].ID() != "api" || srcs[2].ID() != "only" {
		t.Fatalf("sources = %v", srcs)
	}
	rt := srcs[0].(*RequestTool)
	if defs := rt.Tools(); len(defs) != 1 || defs[0].Spec.Name != "request" || defs[0].Confirm != rt.Confirm() ||
		!defs[0].LLMCallable || defs[0].Idempotent || defs[0].Origin != "connections (the request tool)" {
		t.Errorf("request tool defs = %+v", defs)
	}
	if rt.Connections()[0] != "api" || len(rt.Connections()) != 1 {
		t.Errorf("the request tool reaches %v", rt.Connections())
	}
	defs := conns[0].Tools()
	if len(defs) != 2 || len(conns[1].Tools()) != 0 {
		t.Fatalf("operation defs = %+v / %+v", defs, conns[1].Tools())
	}
	for i, d := range defs {
		op := conns[0].OperationTools()[i]
		if d.Spec.Name != op.Name() || d.Confirm != op.Confirm() || d.Confirm.ServerID != "api" || !d.LLMCallable || d.Idempotent ||
			d.Origin != `connection "api"` {
			t.Errorf("operation def %d = %+v", i, d)
		}
	}
	var get *OperationTool
	for _, op := range conns[0].OperationTools() {
		if op.Operation().Method == "GET" {
			get = op
		}
	}
	if _, err := conns[0].Execute(context.Background(), classified(get.Confirm(), "call_1", `{"path":{"id":"7"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := api.requests(); len(got) != 1 || got[0].Path != "/things/7" {
		t.Fatalf("requests = %+v", got)
	}
	for _, call := range []agentd.ToolCall{
		{ID: "call_2", Name: "api__nope"},
		requestCall(rt, "call_3", `{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`),
	} {
		if _, err := conns[0].Execute(context.Background(), call); err == nil || !strings.Contains(err.Error(), "is not an operation of connection") {
			t.Errorf("%s on the connection: %v", call.Name, err)
		}
	}
	op := classified(get.Confirm(), "call_4", `{"path":{"id":"7"}}`)
	if _, err := rt.Execute(context.Background(), op); err == nil || !strings.Contains(err.Error(), "not the request tool") {
		t.Errorf("an operation call on the request tool: %v", err)
	}
	op.ConnectionName = "only"
	if _, err := get.Execute(context.Background(), op); err == nil || !strings.Contains(err.Error(), `for connection "only"`) {
		t.Errorf("a call recorded for another connection: %v", err)
	}
	if n := len(api.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// Execute sends the request recorded on the call when it was classified
// (or edited on approval), whatever the call's arguments say, and sends
// nothing for a call that records no request.
func TestExecuteSendsTheRecordedRequest(t *testing.T) {
	api := newRecorder(t, nil)
	c := loadConn(t, `{"base_url":"`+api.URL+`/api","openapi":"openapi.json"}`, nil, map[string]string{"openapi.json": minimalDoc})
	rt := NewRequestTool([]*Connection{c})
	call := requestCall(rt, "call_1", `{"connection":"api","method":"POST","endpoint":"/a","params":{"q":"1"},"data":{"x":"<1>"},"intent":"write"}`)
	call.Arguments = json.RawMessage(`{"connection":"api","method":"DELETE","endpoint":"/b","intent":"write"}`)
	if _, err := rt.Execute(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	// An approval's edit replaces the record (loop: CallEdit).
	edited := classify(rt.Confirm(), `{"connection":"api","method":"POST","endpoint":"/a","data":{"x":2},"intent":"write"}`)
	call.ID, call.Method, call.Endpoint, call.PathTemplate, call.Params = "call_2", edited.Method, edited.Endpoint, edited.PathTemplate, edited.Params
	if _, err := rt.Execute(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	var get *OperationTool
	for _, op := range c.OperationTools() {
		if op.Operation().Method == "GET" {
			get = op
		}
	}
	opCall := classified(get.Confirm(), "call_3", `{"path":{"id":"7"}}`)
	opCall.Arguments = json.RawMessage(`{"path":{"id":"8"}}`)
	if _, err := get.Execute(context.Background(), opCall); err != nil {
		t.Fatal(err)
	}
	got := api.requests()
	if len(got) != 3 {
		t.Fatalf("%d requests", len(got))
	}
	if r := got[0]; r.Method != "POST" || r.Path != "/api/a" || r.RawQuery != "q=1" || string(r.Body) != `{"x":"<1>"}` || r.Header.Get("Idempotency-Key") != "call_1" {
		t.Errorf("first request = %s %s ? %s %s", r.Method, r.Path, r.RawQuery, r.Body)
	}
	if r := got[1]; r.Method != "POST" || r.Path != "/api/a" || r.RawQuery != "" || string(r.Body) != `{"x":2}` {
		t.Errorf("edited request = %s %s ? %s %s", r.Method, r.Path, r.RawQuery, r.Body)
	}
	if r := got[2]; r.Method != "GET" || r.Path != "/api/things/7" {
		t.Errorf("operation request = %s %s", r.Method, r.Path)
	}
	bareRequest := agentd.ToolCall{ID: "call_4", Name: "request", Arguments: json.RawMessage(`{"connection":"api","method":"GET","endpoint":"/a","intent":"read"}`)}
	if _, err := rt.Execute(context.Background(), bareRequest); err == nil || !strings.Contains(err.Error(), "records no HTTP request") {
		t.Errorf("a request call without a record: %v", err)
	}
	bareOp := agentd.ToolCall{ID: "call_5", Name: get.Name(), Arguments: json.RawMessage(`{"path":{"id":"7"}}`)}
	if _, err := c.Execute(context.Background(), bareOp); err == nil || !strings.Contains(err.Error(), "records no HTTP request") {
		t.Errorf("an operation call without a record: %v", err)
	}
	if n := len(api.requests()); n != 3 {
		t.Errorf("calls without a record sent %d requests", n-3)
	}
}
