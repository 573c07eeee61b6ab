package schema

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCompileAndValidate(t *testing.T) {
	s, err := Compile("refund", json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0},
		"when":{"type":"string","format":"date-time"}},"required":["amount"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(s, json.RawMessage(`{"amount":5,"when":"2024-01-02T03:04:05Z"}`)); err != nil {
		t.Errorf("valid: %v", err)
	}
	for args, want := range map[string]string{
		`{"amount":0}`:                    `at '/amount': exclusiveMinimum`,
		`{}`:                              `missing property 'amount'`,
		`{"amount":1,"x":1}`:              `additional properties 'x' not allowed`,
		`{"amount":1,"when":"yesterday"}`: `at '/when'`,
		`{"amount":"1","when":5}`:         `at '/amount': got string, want number; at '/when': got number, want string`,
		`{"amount":`:                      `not valid JSON`,
	} {
		err := Validate(s, json.RawMessage(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", args, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "urn:") || strings.Contains(err.Error(), "jsonschema")) {
			t.Errorf("%s: error leaks internals: %v", args, err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type": 5}`:                       "not a valid JSON Schema",
		`[]`:                                "must be a JSON Schema object",
		`{`:                                 "not valid JSON",
		`{"$ref": "https://example.com/s"}`: "",
	} {
		_, err := Compile("t", json.RawMessage(schema))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", schema, err, want)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate = %q", got)
	}
	s := strings.Repeat("é", 100)
	for _, limit := range []int{0, 1, 3, 4, 5, 50, 199} {
		got := Truncate(s, limit)
		if len(got) > max(limit, len("…")) || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
			t.Errorf("Truncate(%d) = %q (%d bytes)", limit, got, len(got))
		}
	}
}

// TestObjectValidator: empty arguments are {}, a non-object and bad JSON
// are refused naming the tool, a schema violation says where, and what
// passes comes back compacted.
func TestObjectValidator(t *testing.T) {
	v, err := ObjectValidator("lookup", json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v(json.RawMessage(` { "id" : "A-1" } `)); err != nil || string(got) != `{"id":"A-1"}` {
		t.Fatalf("valid arguments = %s, %v", got, err)
	}
	for args, want := range map[string]string{
		``:          `invalid arguments for tool "lookup": `,
		`[1]`:       `invalid arguments for tool "lookup": must be a JSON object`,
		`{"id":`:    `invalid arguments for tool "lookup": not valid JSON`,
		`{"id": 1}`: `invalid arguments for tool "lookup": `,
	} {
		if _, err := v(json.RawMessage(args)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("arguments %q: %v, want an error starting %q", args, err, want)
		}
	}
}
