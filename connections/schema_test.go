package connections

import (
	"encoding/json"
	"strings"
	"testing"
)

const schemaDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "trees", "version": "1"},
  "paths": {
    "/tenants/{tenant}/nodes/{id}": {
      "parameters": [
        {"name": "tenant", "in": "path", "required": true, "schema": {"type": "string", "minLength": 2}},
        {"name": "limit", "in": "query", "schema": {"type": "integer"}}
      ],
      "put": {
        "operationId": "putNode",
        "summary": "Replace a node",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "description": "The node id.", "schema": {"type": "integer", "minimum": 1}},
          {"name": "limit", "in": "query", "required": true, "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
          {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
          {"name": "X-Request-Id", "in": "header", "required": true, "schema": {"type": "string", "format": "uuid"}},
          {"name": "X-Count", "in": "header", "description": "How many.", "schema": {"type": "integer"}},
          {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
          {"name": "X-Tenant", "in": "header", "schema": {"type": "string"}},
          {"name": "session", "in": "cookie", "schema": {"type": "string"}}
        ],
        "requestBody": {"$ref": "#/components/requestBodies/NodeBody"},
        "responses": {"200": {"description": "ok"}}
      }
    }
  },
  "components": {
    "requestBodies": {
      "NodeBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}
    },
    "schemas": {
      "Node": {
        "type": "object",
        "required": ["name"],
        "additionalProperties": false,
        "x-internal": true,
        "example": {"name": "root"},
        "externalDocs": {"url": "https://example.com/docs"},
        "xml": {"name": "node"},
        "properties": {
          "name": {"type": "string", "maxLength": 20, "example": "root"},
          "note": {"type": "string", "nullable": true},
          "status": {"type": "string", "enum": ["open", "closed"], "nullable": true},
          "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
          "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}
        }
      }
    }
  }
}`

func TestOperationSchema(t *testing.T) {
	c := loadConn(t, `{"base_url":"https://trees.example/api","openapi":"openapi.json","headers":{"X-Tenant":"acme"}}`, nil, map[string]string{"openapi.json": schemaDoc})
	tools := c.OperationTools()
	if len(tools) != 1 || tools[0].Name() != "api__putNode" {
		t.Fatalf("tools = %v", tools)
	}
	tool := tools[0]
	spec := tool.Spec()
	if spec.Name != "api__putNode" || !strings.Contains(spec.Description, "Replace a node") || !strings.Contains(spec.Description, "PUT /tenants/{tenant}/nodes/{id}") {
		t.Errorf("spec = %+v", spec)
	}
	raw := string(spec.Parameters)
	for _, banned := range []string{"x-internal", "example", "externalDocs", "xml", "nullable", "Authorization", "X-Tenant", "session", "$ref"} {
		if strings.Contains(raw, banned) {
			t.Errorf("derived schema keeps %q: %s", banned, raw)
		}
	}
	var s map[string]any
	if err := json.Unmarshal(spec.Parameters, &s); err != nil {
		t.Fatal(err)
	}
	get := func(path string) any {
		var v any = s
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%s: %v is not an object", path, v)
			}
			v = m[k]
		}
		return v
	}
	jsonOf := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	checks := map[string]string{
		"type":                                               `"object"`,
		"additionalProperties":                               `false`,
		"required":                                           `["path","query","header","body"]`,
		"properties.path.required":                           `["id","tenant"]`,
		"properties.path.additionalProperties":               `false`,
		"properties.path.properties.tenant":                  `{"minLength":2,"type":"string"}`,
		"properties.path.properties.id":                      `{"description":"The node id.","minimum":1,"type":"integer"}`,
		"properties.query.required":                          `["limit"]`,
		"properties.query.properties.limit":                  `{"maximum":100,"minimum":1,"type":"integer"}`,
		"properties.query.properties.tags":                   `{"items":{"type":"string"},"maxItems":3,"type":"array"}`,
		"properties.header.required":                         `["X-Request-Id"]`,
		"properties.header.properties.X-Request-Id":          `{"format":"uuid","type":"string"}`,
		"properties.header.properties.X-Count":               `{"description":"How many.","type":"string"}`,
		"properties.body.required":                           `["name"]`,
		"properties.body.additionalProperties":               `false`,
		"properties.body.properties.name":                    `{"maxLength":20,"type":"string"}`,
		"properties.body.properties.note":                    `{"type":["string","null"]}`,
		"properties.body.properties.status":                  `{"enum":["open","closed",null],"type":["string","null"]}`,
		"properties.body.properties.weight":                  `{"exclusiveMinimum":0,"type":"number"}`,
		"properties.body.properties.children.type":           `"array"`,
		"properties.body.properties.children.items.type":     `"object"`,
		"properties.body.properties.children.items.required": `["name"]`,
	}
	for path, want := range checks {
		if got := jsonOf(get(path)); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	// The recursive Node is inlined maxRefDepth deep, then {}.
	depth := 0
	var node any = get("properties.body")
	for {
		m := node.(map[string]any)
		if len(m) == 0 {
			break
		}
		depth++
		node = m["properties"].(map[string]any)["children"].(map[string]any)["items"]
	}
	if depth != maxRefDepth {
		t.Errorf("recursive schema inlined %d levels deep, want %d", depth, maxRefDepth)
	}

	validate := tool.Confirm().Validate
	good := `{"path":{"tenant":"acme","id":7},"query":{"limit":10,"tags":["a"]},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"},
		"body":{"name":"root","note":null,"status":null,"children":[{"name":"kid","note":"n","children":[]}]}}`
	eff, err := validate(json.RawMessage(good))
	if err != nil {
		t.Fatalf("good arguments refused: %v", err)
	}
	if strings.ContainsAny(string(eff), "\n\t") {
		t.Errorf("effective arguments not compact: %s", eff)
	}
	bad := []struct{ args, want string }{
		{`{"path":{"tenant":"acme"},"query":{"limit":1},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"},"body":{"name":"x"}}`, `at '/path': missing property 'id'`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":0},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"},"body":{"name":"x"}}`, `at '/query/limit': minimum`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":1},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"},"body":{"name":"x","note":5}}`, `at '/body/note': got number, want null or string`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":1},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f","X-Count":3},"body":{"name":"x"}}`, `at '/header/X-Count': got number, want string`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":1},"header":{"X-Request-Id":"not-a-uuid"},"body":{"name":"x"}}`, `at '/header/X-Request-Id'`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":1},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"},"body":{"name":"x","children":[{"nam":"typo"}]}}`, `at '/body/children/0'`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":1},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"}}`, `missing property 'body'`},
		{`{"path":{"tenant":"acme","id":1},"query":{"limit":1},"header":{"X-Request-Id":"0b6f8f5e-3c51-4b8e-9d7a-1a2b3c4d5e6f"},"body":{"name":"x"},"cookie":{}}`, `additional properties 'cookie' not allowed`},
		{`[1]`, `must be a JSON object`},
		{`{"path":`, `not valid JSON`},
	}
	for _, b := range bad {
		_, err := validate(json.RawMessage(b.args))
		if err == nil {
			t.Errorf("accepted %s", b.args)
			continue
		}
		if !strings.Contains(err.Error(), b.want) || !strings.HasPrefix(err.Error(), `invalid arguments for tool "api__putNode": `) {
			t.Errorf("%s: error %q lacks %q", b.args, err, b.want)
		}
		if strings.Contains(err.Error(), "urn:") {
			t.Errorf("error leaks schema internals: %q", err)
		}
	}
}

func TestOperationSchemaWithoutParameters(t *testing.T) {
	c := loadConn(t, `{"base_url":"https://x.example","openapi":"openapi.json"}`, nil, map[string]string{"openapi.json": minimalDoc})
	var create *OperationTool
	for _, tool := range c.OperationTools() {
		if tool.Operation().ID == "createThing" {
			create = tool
		}
	}
	if create == nil {
		t.Fatal("no createThing tool")
	}
	if got := string(create.Spec().Parameters); got != `{"additionalProperties":false,"properties":{},"type":"object"}` {
		t.Errorf("parameters = %s", got)
	}
	if eff, err := create.Confirm().Validate(nil); err != nil || string(eff) != "{}" {
		t.Errorf("empty arguments: %s, %v", eff, err)
	}
	if _, err := create.Confirm().Validate(json.RawMessage(`{"body":{}}`)); err == nil {
		t.Error("a body was accepted by an operation without requestBody")
	}
}
