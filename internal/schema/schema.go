// Package schema compiles the JSON Schemas of tool arguments (draft
// 2020-12, with santhosh-tekuri/jsonschema/v6) and turns validation errors
// into short, readable text for the model. Custom command tools and the
// connection tools (the request tool, OpenAPI operation tools) share it,
// so every tool refuses bad arguments in the same words.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxMessage bounds the text of a validation error, in bytes.
const MaxMessage = 1000

// Compile compiles a JSON Schema object. name identifies the schema (a
// tool name); it never appears in error text. Known "format" values are
// asserted. References to other documents are not loaded: no file or
// network access happens. The error says what is wrong with the schema
// in bounded length.
func Compile(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("must be a JSON Schema object")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network access
	c.AssertFormat()
	loc := "urn:agentd:tool:" + url.PathEscape(name)
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(loc)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		if errors.As(err, &sve) {
			return nil, fmt.Errorf("not a valid JSON Schema: %s", Text(sve.Err, MaxMessage))
		}
		return nil, errors.New(Truncate(strings.ReplaceAll(err.Error(), loc, "schema"), MaxMessage))
	}
	return sch, nil
}

// Validate checks the JSON document args against s. A nil error means
// args is valid; otherwise the error's text is meant for the model: the
// leaf problems, each naming its location ("at '/body/amount': ..."),
// joined by "; " and cut to at most MaxMessage bytes. Invalid JSON is
// reported as "not valid JSON".
func Validate(s *jsonschema.Schema, args json.RawMessage) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return errors.New("not valid JSON")
	}
	if err := s.Validate(value); err != nil {
		return errors.New(Text(err, MaxMessage))
	}
	return nil
}

// Text renders a validation error as its leaf messages joined by "; ",
// each naming the instance location, cut to at most limit bytes. Other
// errors are rendered by their own text, cut the same way.
func Text(err error, limit int) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return Truncate(err.Error(), limit)
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := e.Error()
			msg = strings.TrimPrefix(msg, "at '': ")
			parts = append(parts, msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	// The validator visits properties in map order: sort by location
	// (stable, so messages about one location keep their order).
	slices.SortStableFunc(parts, func(a, b string) int { return strings.Compare(location(a), location(b)) })
	return Truncate(strings.Join(parts, "; "), limit)
}

// Truncate cuts s to at most limit bytes on a rune boundary, marking the
// cut with "…" (which counts toward limit; a limit below its 3 bytes
// yields just "…"); s is returned unchanged when it fits.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return agentd.TruncateUTF8(s, limit-len("…")) + "…"
}

// location is the "at '/x/y'" prefix of a message ("" when none).
func location(msg string) string {
	if !strings.HasPrefix(msg, "at '") {
		return ""
	}
	if i := strings.Index(msg[4:], "'"); i >= 0 {
		return msg[:4+i]
	}
	return msg
}

// ObjectValidator compiles a tool's schema into a validator of its calls'
// arguments: they must be a JSON object (empty counts as {}) valid against
// the schema, and the validator returns them compacted. Its errors' text
// names the tool and is meant for the model.
func ObjectValidator(name string, raw json.RawMessage) (func(json.RawMessage) (json.RawMessage, error), error) {
	sch, err := Compile(name, raw)
	if err != nil {
		return nil, err
	}
	return func(args json.RawMessage) (json.RawMessage, error) {
		trimmed := bytes.TrimSpace(args)
		if len(trimmed) == 0 {
			trimmed = []byte("{}")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, trimmed); err != nil {
			return nil, fmt.Errorf("invalid arguments for tool %q: not valid JSON", name)
		}
		if buf.Bytes()[0] != '{' {
			return nil, fmt.Errorf("invalid arguments for tool %q: must be a JSON object", name)
		}
		if err := Validate(sch, buf.Bytes()); err != nil {
			return nil, fmt.Errorf("invalid arguments for tool %q: %v", name, err)
		}
		return json.RawMessage(buf.Bytes()), nil
	}, nil
}
