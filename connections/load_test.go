package connections

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/tools/registry"
)

const secretValue = "s3cr3t-Value-never-shown"

// A minimal valid OpenAPI document with two operations.
const minimalDoc = `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{
 "/things/{id}":{"get":{"operationId":"getThing","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],"responses":{"200":{"description":"ok"}}}},
 "/things":{"post":{"operationId":"createThing","responses":{"201":{"description":"ok"}}}}}}`

func TestLoadErrors(t *testing.T) {
	env := map[string]string{"TOKEN": secretValue, "USER": "u-" + secretValue, "PASS": "p-" + secretValue}
	validBase := `"base_url": "https://api.example.com/v1"`
	tests := []struct {
		name  string
		files map[string]string // relative to connections/api/
		want  []string
	}{
		{"bad JSON", map[string]string{"connection.json": "{\n  " + validBase + ",\n  \"timeout_ms\": 10,\n}"},
			[]string{"connections/api/connection.json: line 4, column 1"}},
		{"unknown field", map[string]string{"connection.json": `{` + validBase + `, "base_path": "/x"}`},
			[]string{`connections/api/connection.json: field "base_path": unknown field`}},
		{"unknown auth field", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"bearer","token_env":"TOKEN","token":"x"}}`},
			[]string{`connections/api/connection.json: field "auth.token": unknown field`}},
		{"unknown tools field", map[string]string{"connection.json": `{` + validBase + `, "tools": {"requests": false}}`},
			[]string{`connections/api/connection.json: field "tools.requests": unknown field`}},
		{"missing base_url", map[string]string{"connection.json": `{"timeout_ms": 5}`},
			[]string{`connections/api/connection.json: field "base_url": required`}},
		{"relative base_url", map[string]string{"connection.json": `{"base_url": "/api"}`},
			[]string{`connections/api/connection.json: field "base_url": must be an absolute http or https URL`}},
		{"ftp base_url", map[string]string{"connection.json": `{"base_url": "ftp://example.com/"}`},
			[]string{`field "base_url": must be an absolute http or https URL`}},
		{"userinfo base_url", map[string]string{"connection.json": `{"base_url": "https://bob:hunter2@example.com/api"}`},
			[]string{`field "base_url": must not carry a user name or password`}},
		{"query base_url", map[string]string{"connection.json": `{"base_url": "https://example.com/api?key=1"}`},
			[]string{`field "base_url": must not have a query`}},
		{"fragment base_url", map[string]string{"connection.json": `{"base_url": "https://example.com/api#x"}`},
			[]string{`field "base_url": must not have a fragment`}},
		{"dot segment base_url", map[string]string{"connection.json": `{"base_url": "https://example.com/api/../admin"}`},
			[]string{`field "base_url": path of`, "dot segment"}},
		{"missing env var", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"bearer","token_env":"BILLING_TOKEN"}}`},
			[]string{`connections/api/connection.json: field "auth.token_env": environment variable BILLING_TOKEN is not set or empty`}},
		{"missing password var", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"basic","username_env":"USER","password_env":"NOPE"}}`},
			[]string{`field "auth.password_env": environment variable NOPE is not set`}},
		{"header auth without name", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"header","value_env":"TOKEN"}}`},
			[]string{`field "auth.name": required`}},
		{"bearer with a field of basic", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"bearer","token_env":"TOKEN","username_env":"USER"}}`},
			[]string{`field "auth.username_env": not used by auth type "bearer"`}},
		{"unknown auth type", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"oauth"}}`},
			[]string{`field "auth.type": must be "bearer", "header" or "basic"`}},
		{"secret after a later error", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"bearer","token_env":"TOKEN"}, "timeout_ms": 0}`},
			[]string{`field "timeout_ms": must be between 1 and 600000, got 0`}},
		{"static Authorization header", map[string]string{"connection.json": `{` + validBase + `, "headers": {"Authorization": "Bearer x"}}`},
			[]string{`field "headers.Authorization": header "Authorization" cannot be a static header: credentials belong in "auth"`}},
		{"static route header", map[string]string{"connection.json": `{` + validBase + `, "headers": {"Via": "1.1 proxy"}}`},
			[]string{`field "headers.Via": header "Via" cannot be a static header: it would change the client address`}},
		{"static header value with a line break", map[string]string{"connection.json": `{` + validBase + `, "headers": {"X-Note": "a\r\nb"}}`},
			[]string{`field "headers.X-Note": the value of header "X-Note" contains a control character`}},
		{"auth header that is hop-by-hop", map[string]string{"connection.json": `{` + validBase + `, "auth": {"type":"header","name":"Connection","value_env":"TOKEN"}}`},
			[]string{`field "auth.name": header "Connection" cannot carry credentials`}},
		{"static Connection header", map[string]string{"connection.json": `{` + validBase + `, "headers": {"Connection": "close"}}`},
			[]string{`field "headers.Connection"`}},
		{"static Proxy header", map[string]string{"connection.json": `{` + validBase + `, "headers": {"Proxy-Authorization": "x"}}`},
			[]string{`field "headers.Proxy-Authorization"`}},
		{"max_response_bytes too big", map[string]string{"connection.json": `{` + validBase + `, "max_response_bytes": 16777217}`},
			[]string{`field "max_response_bytes": must be between 1 and 16777216`}},
		{"timeout too long", map[string]string{"connection.json": `{` + validBase + `, "timeout_ms": 600001}`},
			[]string{`field "timeout_ms"`}},
		{"absolute openapi", map[string]string{"connection.json": `{` + validBase + `, "openapi": "/etc/passwd"}`},
			[]string{`field "openapi": must be a path inside the connection folder`}},
		{"escaping openapi", map[string]string{"connection.json": `{` + validBase + `, "openapi": "../other/openapi.json"}`},
			[]string{`field "openapi": must be a path inside the connection folder`}},
		{"missing openapi file", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.json"}`},
			[]string{`connections/api/openapi.json: cannot read the OpenAPI document`}},
		{"operations without openapi", map[string]string{"connection.json": `{` + validBase + `, "tools": {"operations": ["x"]}}`},
			[]string{`field "tools.operations": needs an OpenAPI document`}},
		{"policy bad JSON", map[string]string{"connection.json": `{` + validBase + `}`, "policy.json": "{\"endpoints\": {\n\"GET /a\": {\"confirm\": tru}}}"},
			[]string{"connections/api/policy.json: line 2, column"}},
		{"policy unknown field", map[string]string{"connection.json": `{` + validBase + `}`, "policy.json": `{"endpoint": {}}`},
			[]string{`connections/api/policy.json: field "endpoint": unknown field`}},
		{"policy conflicting keys", map[string]string{"connection.json": `{` + validBase + `}`,
			"policy.json": `{"endpoints": {"GET /invoices/{id}": {}, "GET /invoices/{number}": {"confirm": true}}}`},
			[]string{`connections/api/policy.json: field "endpoints.GET /invoices/{number}": conflicts with "GET /invoices/{id}"`}},
		{"policy threshold bad escalate", map[string]string{"connection.json": `{` + validBase + `}`,
			"policy.json": `{"endpoints": {"POST /refunds": {"confirm": true, "thresholds": [{"field": "body.amount", "above": 10, "escalate": "confirm"}]}}}`},
			[]string{`connections/api/policy.json: field "endpoints.POST /refunds.thresholds[0].escalate": must be "review" or "never"`}},
		{"policy bad confirm", map[string]string{"connection.json": `{` + validBase + `}`,
			"policy.json": `{"endpoints": {"POST /refunds": {"confirm": "maybe"}}}`},
			[]string{`connections/api/policy.json: field "endpoints.POST /refunds.confirm"`}},
		{"YAML document failing validation", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.yaml"}`,
			"openapi.yaml": "openapi: 3.0.3\ninfo:\n  title: t\n  version: '1'\npaths:\n  /x:\n    get:\n      operationId: getX\n      parameters:\n        - name: id\n          in: nowhere\n          schema: {type: string}\n      responses:\n        '200': {description: ok}\n"},
			[]string{"connections/api/openapi.yaml: not a valid OpenAPI document", "/x", "GET", "nowhere"}},
		{"YAML syntax error", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.yaml"}`,
			"openapi.yaml": "openapi: 3.0.3\ninfo: [unclosed\n"},
			[]string{"connections/api/openapi.yaml: not a valid OpenAPI document"}},
		{"Swagger 2 document", map[string]string{"connection.json": `{` + validBase + `, "openapi": "swagger.json"}`,
			"swagger.json": `{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{}}`},
			[]string{"connections/api/swagger.json: "}},
		{"unknown operationId", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.json", "tools": {"operations": ["getThing", "deleteThing"]}}`,
			"openapi.json": minimalDoc},
			[]string{`connections/api/connection.json: field "tools.operations[1]": operationId "deleteThing" does not exist in openapi.json`}},
		{"missing operationId", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.json"}`,
			"openapi.json": strings.Replace(minimalDoc, `"operationId":"createThing",`, "", 1)},
			[]string{`connections/api/openapi.json: paths./things.post: the operation has no operationId`}},
		{"external $ref", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.json"}`,
			"openapi.json": strings.Replace(minimalDoc, `"schema":{"type":"string"}`, `"schema":{"$ref":"other.json#/Id"}`, 1),
			"other.json":   `{"Id":{"type":"string"}}`},
			[]string{`connections/api/openapi.json: `, `other.json#/Id`, "another document"}},
		{"tool name too long", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.json"}`,
			"openapi.json": strings.Replace(minimalDoc, `"getThing"`, `"`+strings.Repeat("g", 62)+`"`, 1)},
			[]string{`connections/api/openapi.json: paths./things/{id}.get: operationId "ggg`, `must be 1 to 64 letters`}},
		{"partial path parameter", map[string]string{"connection.json": `{` + validBase + `, "openapi": "openapi.json"}`,
			"openapi.json": strings.Replace(strings.Replace(minimalDoc, `/things/{id}`, `/things/{id}.json`, 1), `"name":"id"`, `"name":"id"`, 1)},
			[]string{`connections/api/openapi.json: paths./things/{id}.json.get (operationId "getThing"): path "/things/{id}.json": a parameter must be a whole path segment`}},
		{"missing connection.json", map[string]string{"policy.json": `{}`},
			[]string{"connections/api/connection.json: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range tt.files {
				files["connections/api/"+k] = v
			}
			conns, err := Load(writeProject(t, files), envOf(env))
			if err == nil {
				t.Fatalf("loaded %v", conns)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			t.Log(err)
			if strings.Contains(err.Error(), secretValue) {
				t.Errorf("error leaks the secret: %q", err)
			}
		})
	}
}

func TestLoadBadConnectionName(t *testing.T) {
	for _, name := range []string{"Billing", "1api", "a.b", strings.Repeat("a", 41)} {
		dir := writeProject(t, map[string]string{"connections/" + name + "/connection.json": `{"base_url":"https://x.example"}`})
		if _, err := Load(dir, envOf(nil)); err == nil || !strings.Contains(err.Error(), "connections/"+name+": connection name") {
			t.Errorf("name %q: err = %v", name, err)
		}
	}
}

func TestLoadNoConnections(t *testing.T) {
	conns, err := Load(t.TempDir(), nil)
	if conns != nil || err != nil {
		t.Errorf("no folder: %v, %v", conns, err)
	}
	conns, err = Load(writeProject(t, map[string]string{"connections/README.md": "x"}), nil)
	if conns != nil || err != nil {
		t.Errorf("empty folder: %v, %v", conns, err)
	}
}

const yamlDoc = `openapi: 3.0.3
info:
  title: Shipping
  version: "2"
paths:
  /shipments/{id}:
    parameters:
      - name: id
        in: path
        required: true
        schema: {type: string}
    get:
      operationId: getShipment
      summary: Get a shipment
      responses:
        "200": {description: ok}
    delete:
      operationId: cancelShipment
      responses:
        "204": {description: cancelled}
  /uploads:
    put:
      operationId: upload
      requestBody:
        required: true
        content:
          application/octet-stream:
            schema: {type: string, format: binary}
      responses:
        "201": {description: ok}
`

func TestLoadValid(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"connections/shipping/connection.json": `{"base_url": "https://ship.example.com/api/v2/", "auth": {"type":"basic","username_env":"SHIP_USER","password_env":"SHIP_PASS"},
			"openapi": "spec/openapi.yaml", "tools": {"request": false}, "timeout_ms": 1500, "max_response_bytes": 2048, "description": "Shipments"}`,
		"connections/shipping/spec/openapi.yaml": yamlDoc,
		"connections/billing/connection.json": `{"base_url": "http://127.0.0.1:9/api", "auth": {"type":"bearer","token_env":"BILLING_TOKEN"},
			"headers": {"Accept": "application/json", "X-Tenant": "acme"}, "openapi": "openapi.json", "tools": {"operations": ["getThing"]}}`,
		"connections/billing/openapi.json":  minimalDoc,
		"connections/billing/policy.json":   `{"endpoints": {"GET /things/{id}": {}, "POST /things": {"confirm": true}}, "delegations": {"escalateConfirm": true}}`,
		"connections/plain/connection.json": `{"base_url": "https://plain.example.com"}`,
	})
	env := map[string]string{"BILLING_TOKEN": secretValue, "SHIP_USER": "ship", "SHIP_PASS": secretValue}
	conns, err := Load(dir, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range conns {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "billing,plain,shipping" {
		t.Fatalf("names = %v", names)
	}
	billing, plain, shipping := conns[0], conns[1], conns[2]

	if billing.BaseURL() != "http://127.0.0.1:9/api" || billing.BasePath() != "/api" || billing.AuthType() != "bearer" {
		t.Errorf("billing: %s %s %s", billing.BaseURL(), billing.BasePath(), billing.AuthType())
	}
	if !billing.RequestTool() || len(billing.Operations()) != 1 || billing.Operations()[0].ID != "getThing" {
		t.Errorf("billing tools: request %v, operations %v", billing.RequestTool(), billing.Operations())
	}
	if billing.Timeout() != DefaultTimeout || billing.MaxResponseBytes() != DefaultMaxResponseBytes {
		t.Errorf("billing defaults: %v %d", billing.Timeout(), billing.MaxResponseBytes())
	}
	if !billing.Policy.EscalateConfirm || len(billing.Policy.Endpoints) != 2 {
		t.Errorf("billing policy = %+v", billing.Policy)
	}
	if v := billing.Confirm(); v.Name != "billing" || v.Policy != billing.Policy || v != billing.Confirm() {
		t.Errorf("Confirm() = %+v", v)
	}

	if plain.BaseURL() != "https://plain.example.com" || plain.BasePath() != "" || plain.Operations() != nil || plain.AuthType() != "" {
		t.Errorf("plain: %s %q", plain.BaseURL(), plain.BasePath())
	}
	if plain.Policy == nil || plain.Policy.DefaultRead != "auto" || plain.Policy.DefaultWrite != "confirm" {
		t.Errorf("plain default policy = %+v", plain.Policy)
	}

	if shipping.BaseURL() != "https://ship.example.com/api/v2" || shipping.RequestTool() || shipping.Timeout().Milliseconds() != 1500 ||
		shipping.MaxResponseBytes() != 2048 || shipping.Description != "Shipments" {
		t.Errorf("shipping: %s %v %v %d", shipping.BaseURL(), shipping.RequestTool(), shipping.Timeout(), shipping.MaxResponseBytes())
	}
	var ops []string
	for _, tool := range shipping.OperationTools() {
		ops = append(ops, tool.Name()+"="+tool.Operation().Method+" "+tool.Operation().Template)
	}
	if got := strings.Join(ops, ", "); got != "shipping__getShipment=GET /shipments/{id}, shipping__cancelShipment=DELETE /shipments/{id}" {
		t.Errorf("shipping operation tools = %s", got)
	}
	// The upload takes an octet-stream body: not a tool, and said so.
	if w := shipping.Warnings(); len(w) != 1 || !strings.Contains(w[0], "connections/shipping/spec/openapi.yaml: paths./uploads.put") {
		t.Errorf("warnings = %q", w)
	}

	// The request tool reaches billing and plain, not shipping.
	rt := NewRequestTool(conns)
	if got := strings.Join(rt.Connections(), ","); got != "billing,plain" {
		t.Errorf("request tool connections = %s", got)
	}
	if NewRequestTool([]*Connection{shipping}) != nil || NewRequestTool(nil) != nil {
		t.Error("a request tool without connections")
	}

	// No secret in any rendering.
	for _, c := range conns {
		for _, s := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%+v %v", c.auth, c.auth), fmt.Sprintf("%#v", c.auth)} {
			if strings.Contains(s, secretValue) {
				t.Errorf("%s shows its secret: %s", c.Name, s)
			}
		}
	}
}

// Two connections whose operation tools have the same name load; the tool
// registry, which checks names across every source, refuses them.
func TestDuplicateOperationToolNames(t *testing.T) {
	doc := func(id string) string { return strings.Replace(minimalDoc, `"getThing"`, `"`+id+`"`, 1) }
	dir := writeProject(t, map[string]string{
		"connections/a_/connection.json": `{"base_url":"https://a.example","openapi":"o.json","tools":{"operations":["_b"]}}`,
		"connections/a_/o.json":          doc("_b"),
		"connections/a/connection.json":  `{"base_url":"https://a.example","openapi":"o.json","tools":{"operations":["__b"]}}`,
		"connections/a/o.json":           doc("__b"),
	})
	conns, err := Load(dir, nil)
	if err != nil || len(conns) != 2 {
		t.Fatalf("Load: %v, %v", conns, err)
	}
	_, err = registry.New(Sources(conns)...)
	if want := `tool "a____b" is defined by connection "a" and connection "a_"`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestSetBaseURL(t *testing.T) {
	c := loadConn(t, `{"base_url":"http://127.0.0.1:8091/api"}`, nil, nil)
	if err := c.SetBaseURL("http://127.0.0.1:4321/api/"); err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "http://127.0.0.1:4321/api" || c.BasePath() != "/api" {
		t.Errorf("BaseURL = %s", c.BaseURL())
	}
	for _, bad := range []string{"ftp://x/", "http://u:p@x/", "http://x/?q", "/api", "http://x/a/../b"} {
		if err := c.SetBaseURL(bad); err == nil {
			t.Errorf("SetBaseURL(%q) accepted", bad)
		}
	}
	if c.BaseURL() != "http://127.0.0.1:4321/api" {
		t.Errorf("a refused SetBaseURL changed the URL to %s", c.BaseURL())
	}
}
