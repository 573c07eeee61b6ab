package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidateArguments(t *testing.T) {
	tool := &Tool{Name: "refund_payment", Parameters: json.RawMessage(`{
		"type": "object",
		"properties": {
			"order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"},
			"amount": {"type": "number", "exclusiveMinimum": 0},
			"currency": {"type": "string", "enum": ["EUR", "USD"], "default": "EUR"},
			"note": {"type": "string", "maxLength": 10}
		},
		"required": ["order_id", "amount"],
		"additionalProperties": false
	}`)}
	tests := []struct {
		name    string
		args    string
		want    string // effective arguments, when valid
		wantErr []string
	}{
		{name: "valid, default filled", args: `{ "order_id": "A-1001", "amount": 42.5 }`, want: `{"order_id":"A-1001","amount":42.5,"currency":"EUR"}`},
		{name: "valid, given value kept", args: `{"order_id":"A-1","amount":1,"currency":"USD"}`, want: `{"order_id":"A-1","amount":1,"currency":"USD"}`},
		{name: "big numbers keep precision", args: `{"order_id":"A-1","amount":12345678901234567890.5,"currency":"USD"}`, want: `{"order_id":"A-1","amount":12345678901234567890.5,"currency":"USD"}`},
		{name: "missing required", args: `{"amount": 1}`, wantErr: []string{`invalid arguments for tool "refund_payment": `, `missing property 'order_id'`}},
		{name: "zero amount", args: `{"order_id":"A-1","amount":0}`, wantErr: []string{`at '/amount': exclusiveMinimum: got 0, want 0`}},
		{name: "wrong types", args: `{"order_id":5,"amount":"x"}`, wantErr: []string{`at '/order_id': got number, want string`, `at '/amount': got string, want number`}},
		{name: "extra property", args: `{"order_id":"A-1","amount":1,"admin":true}`, wantErr: []string{`additional properties 'admin' not allowed`}},
		{name: "pattern", args: `{"order_id":"nope","amount":1}`, wantErr: []string{`at '/order_id'`, `does not match pattern`}},
		{name: "enum", args: `{"order_id":"A-1","amount":1,"currency":"GBP"}`, wantErr: []string{`at '/currency'`}},
		{name: "not JSON", args: `{"order_id":`, wantErr: []string{`invalid arguments for tool "refund_payment": not valid JSON`}},
		{name: "array", args: `["A-1"]`, wantErr: []string{`must be a JSON object`}},
		{name: "null", args: `null`, wantErr: []string{`must be a JSON object`}},
		{name: "string", args: `"hi"`, wantErr: []string{`must be a JSON object`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tool.ValidateArguments(json.RawMessage(tt.args))
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("accepted %s as %s", tt.args, got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "urn:agentd") || strings.Contains(err.Error(), "jsonschema") {
					t.Errorf("error leaks schema internals: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("effective = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestValidateArgumentsEmptyMeansObject(t *testing.T) {
	tool := &Tool{Name: "ping"}
	for _, args := range []string{"", "  ", "{}"} {
		got, err := tool.ValidateArguments(json.RawMessage(args))
		if err != nil || string(got) != "{}" {
			t.Errorf("ValidateArguments(%q) = %s, %v; want {}", args, got, err)
		}
	}
	required := &Tool{Name: "need", Parameters: json.RawMessage(`{"type":"object","required":["x"]}`)}
	if _, err := required.ValidateArguments(nil); err == nil || !strings.Contains(err.Error(), "missing property 'x'") {
		t.Errorf("empty arguments against a required property: err = %v", err)
	}
}

func TestValidateArgumentsMessageBounded(t *testing.T) {
	props := map[string]any{}
	var required []string
	for i := range 200 {
		name := strings.Repeat("p", 20) + string(rune('a'+i%26)) + strings.Repeat("q", i%7) + string(rune('A'+i/26))
		props[name] = map[string]any{"type": "string"}
		required = append(required, name)
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	tool := &Tool{Name: "wide", Parameters: schema}
	args := map[string]any{}
	for name := range props {
		args[name] = 1 // every one the wrong type
	}
	raw, _ := json.Marshal(args)
	_, err := tool.ValidateArguments(raw)
	if err == nil {
		t.Fatal("accepted wrong types")
	}
	if n := len(err.Error()); n > maxValidationMessage+100 {
		t.Errorf("message is %d bytes, want at most about %d", n, maxValidationMessage)
	}
	if !strings.HasSuffix(err.Error(), "…") {
		t.Errorf("a cut message is not marked: %q", err.Error()[len(err.Error())-40:])
	}
}

func TestLoadedToolValidates(t *testing.T) {
	tool, warning, err := parseTool([]byte(`{"name":"t","parameters":{"type":"object","properties":{"n":{"type":"integer"}}},"command":["sh"]}`), "t", t.TempDir())
	if err != nil || warning != "" {
		t.Fatal(err, warning)
	}
	if _, err := tool.ValidateArguments(json.RawMessage(`{"n":1.5}`)); err == nil || !strings.Contains(err.Error(), "at '/n'") {
		t.Errorf("err = %v, want a complaint about /n", err)
	}
	if got, err := tool.ValidateArguments(json.RawMessage(`{"n": 2}`)); err != nil || string(got) != `{"n":2}` {
		t.Errorf("ValidateArguments = %s, %v", got, err)
	}
}
