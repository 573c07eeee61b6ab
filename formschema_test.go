package agentd

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckFormSchema: SPEC §12.2's subset is taken; anything else is
// refused with a message naming the keyword or property.
func TestCheckFormSchema(t *testing.T) {
	ok := []string{
		string(DefaultFormSchema),
		`{"type":"object","properties":{}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","title":"T","description":"D","properties":{
			"name":{"type":"string","title":"Name","minLength":1,"maxLength":40,"default":"x"},
			"mail":{"type":"string","format":"email"},
			"n":{"type":"integer","minimum":1,"maximum":9,"default":3},
			"f":{"type":"number"},
			"b":{"type":"boolean","default":false},
			"color":{"type":"string","enum":["red","blue"]},
			"size":{"oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]},
			"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"minItems":1,"maxItems":2,"default":["a"]},
			"picks":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]}}},"required":["name","n"]}`,
	}
	for _, s := range ok {
		if err := CheckFormSchema(json.RawMessage(s)); err != nil {
			t.Errorf("CheckFormSchema(%s) = %v, want nil", s, err)
		}
	}
	bad := map[string]string{
		`[]`:                               "JSON object",
		`{"type":"array","properties":{}}`: `"type": "object"`,
		`{"type":"object","properties":{},"$ref":"#/x"}`:                                                                         `keyword "$ref"`,
		`{"type":"object","properties":{"o":{"type":"object"}}}`:                                                                 `property "o": type "object"`,
		`{"type":"object","properties":{"s":{"type":"string","pattern":"x"}}}`:                                                   `property "s": keyword "pattern"`,
		`{"type":"object","properties":{"s":{"type":"string","format":"ipv4"}}}`:                                                 `property "s": format "ipv4"`,
		`{"type":"object","properties":{"s":{"type":"string"}},"required":["t"]}`:                                                `required property "t"`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`:                                       `property "a": a multi-select`,
		`{"type":"object","properties":{"n":{"type":"integer","default":"x"}}}`:                                                  `property "n": default must be an integer`,
		`{"type":"object","properties":{"c":{"oneOf":[{"title":"no const"}]}}}`:                                                  `property "c": each "oneOf"`,
		`{"type":"object","properties":` + manyProperties(33) + `}`:                                                              "at most 32 properties",
		`{"type":"object","properties":{"x":{"type":"string","description":"` + strings.Repeat("d", MaxFormSchemaBytes) + `"}}}`: "bytes",
	}
	for s, want := range bad {
		err := CheckFormSchema(json.RawMessage(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckFormSchema(%.80s) = %v, want an error with %q", s, err, want)
		}
	}
}

func manyProperties(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + strings.Repeat("x", i) + `":{"type":"boolean"}`)
	}
	return b.String() + "}"
}

// TestCheckContent: a valid answer comes back with its defaults; every
// bad field is named, unknown properties and missing required ones too.
func TestCheckContent(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string","minLength":2},
		"mail":{"type":"string","format":"email"},
		"day":{"type":"string","format":"date"},
		"n":{"type":"integer","minimum":1,"maximum":9,"default":3},
		"ok":{"type":"boolean"},
		"size":{"oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]},
		"tags":{"type":"array","items":{"type":"string","enum":["a","b"]},"maxItems":1}},"required":["name"]}`)
	tests := []struct {
		content string
		want    string // the filled content, or the bad fields "field: message; …"
	}{
		{`{"name":"Al"}`, `{"n":3,"name":"Al"}`},
		{`{"name":"Al","n":9,"ok":true,"size":"l","tags":["b"],"mail":"a@b.c","day":"2026-12-08"}`,
			`{"day":"2026-12-08","mail":"a@b.c","n":9,"name":"Al","ok":true,"size":"l","tags":["b"]}`},
		{``, `name: is required`},
		{`[]`, `content: must be a JSON object`},
		{`{"name":"A","n":1.5,"ok":"yes","size":"m","tags":["a","b"],"extra":1,"mail":"nope","day":"8.12.2026"}`,
			`day: must be a valid date; extra: is not a property of the form; mail: must be a valid email; n: must be an integer; ` +
				`name: must be at least 2 characters; ok: must be true or false; size: must be one of s, l; tags: must have at most 1 choices`},
		{`{"name":"Al","n":"3"}`, `n: must be an integer`},
		{`{"name":"Al","n":10}`, `n: must be at most 9`},
	}
	for _, tt := range tests {
		got, bad, err := CheckContent(schema, json.RawMessage(tt.content))
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, f := range bad {
			parts = append(parts, f.Field+": "+f.Message)
		}
		if s := strings.Join(parts, "; "); bad != nil && s != tt.want {
			t.Errorf("CheckContent(%s) fields = %s, want %s", tt.content, s, tt.want)
		} else if bad == nil && string(got) != tt.want {
			t.Errorf("CheckContent(%s) = %s, want %s", tt.content, got, tt.want)
		}
	}
}
