package agentd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of an input request (SPEC §12.2).
const (
	MaxInputMessageBytes  = 4 << 10
	MaxFormSchemaBytes    = 16 << 10
	MaxFormSchemaProperty = 32
)

// DefaultFormSchema is the form of an ask_user call without a schema: one
// required string property "answer" (SPEC §12.1).
var DefaultFormSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)

// formProperty is one property of a form schema as CheckContent reads it.
type formProperty struct {
	Type      string        `json:"type"`
	Enum      []string      `json:"enum"`
	OneOf     []formChoice  `json:"oneOf"`
	Items     *formProperty `json:"items"`
	AnyOf     []formChoice  `json:"anyOf"`
	Format    string        `json:"format"`
	MinLength *int          `json:"minLength"`
	MaxLength *int          `json:"maxLength"`
	Minimum   *float64      `json:"minimum"`
	Maximum   *float64      `json:"maximum"`
	MinItems  *int          `json:"minItems"`
	MaxItems  *int          `json:"maxItems"`
	Default   json.RawMessage
}

type formChoice struct {
	Const string `json:"const"`
	Title string `json:"title"`
}

type formSchema struct {
	Properties map[string]formProperty
	Order      []string
	Required   []string
}

// The keywords each kind of property may use (SPEC §12.2); anything else
// is refused.
var formKeywords = map[string][]string{
	"string":  {"type", "title", "description", "minLength", "maxLength", "format", "default"},
	"enum":    {"type", "title", "description", "enum", "default"},
	"oneOf":   {"type", "title", "description", "oneOf", "default"},
	"number":  {"type", "title", "description", "minimum", "maximum", "default"},
	"integer": {"type", "title", "description", "minimum", "maximum", "default"},
	"boolean": {"type", "title", "description", "default"},
	"array":   {"type", "title", "description", "items", "minItems", "maxItems", "default"},
}

var formFormats = []string{"email", "uri", "date", "date-time"}

// CheckFormSchema reports why raw is not a form schema of SPEC §12.2 (MCP's
// restricted subset: an object of at most 32 flat properties, each a
// string, number, integer, boolean, single-select or multi-select enum),
// naming the keyword or property; nil when it is one.
func CheckFormSchema(raw json.RawMessage) error {
	_, err := parseFormSchema(raw)
	return err
}

func parseFormSchema(raw json.RawMessage) (*formSchema, error) {
	if len(raw) > MaxFormSchemaBytes {
		return nil, fmt.Errorf("the schema is %d bytes, over the %d a form schema may have", len(raw), MaxFormSchemaBytes)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, fmt.Errorf("the schema must be a JSON object")
	}
	for k := range top {
		if !slices.Contains([]string{"type", "properties", "required", "title", "description", "$schema"}, k) {
			return nil, fmt.Errorf("keyword %q is not allowed in a form schema", k)
		}
	}
	if string(top["type"]) != `"object"` {
		return nil, fmt.Errorf(`a form schema must have "type": "object"`)
	}
	fs := &formSchema{Properties: map[string]formProperty{}}
	order, props, err := orderedObject(top["properties"])
	if err != nil {
		return nil, fmt.Errorf(`"properties" must be an object`)
	}
	if len(order) > MaxFormSchemaProperty {
		return nil, fmt.Errorf("a form schema has at most %d properties, this one %d", MaxFormSchemaProperty, len(order))
	}
	for _, name := range order {
		p, err := parseFormProperty(props[name])
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		fs.Properties[name], fs.Order = p, append(fs.Order, name)
	}
	if r, ok := top["required"]; ok {
		if err := json.Unmarshal(r, &fs.Required); err != nil {
			return nil, fmt.Errorf(`"required" must be a list of property names`)
		}
		for _, name := range fs.Required {
			if _, ok := fs.Properties[name]; !ok {
				return nil, fmt.Errorf("required property %q is not among the properties", name)
			}
		}
	}
	return fs, nil
}

// orderedObject decodes a JSON object, keeping its keys in order.
func orderedObject(raw json.RawMessage) ([]string, map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, nil, fmt.Errorf("not an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var order []string
	_, _ = dec.Token() // {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		order = append(order, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, nil, err
		}
	}
	return order, m, nil
}

// parseFormProperty checks one property of a form schema.
func parseFormProperty(raw json.RawMessage) (formProperty, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return formProperty{}, fmt.Errorf("must be an object")
	}
	var p formProperty
	if err := json.Unmarshal(raw, &p); err != nil {
		return formProperty{}, fmt.Errorf("%v", err)
	}
	p.Default = keys["default"]
	kind := p.Type
	switch {
	case len(p.Enum) > 0 && p.Type == "string":
		kind = "enum"
	case len(p.OneOf) > 0 && (p.Type == "" || p.Type == "string"):
		kind, p.Type = "oneOf", "string"
	}
	allowed, ok := formKeywords[kind]
	if !ok {
		return formProperty{}, fmt.Errorf("type %q is not allowed in a form schema (string, number, integer, boolean, or an enum)", p.Type)
	}
	for k := range keys {
		if !slices.Contains(allowed, k) {
			return formProperty{}, fmt.Errorf("keyword %q is not allowed in a form schema", k)
		}
	}
	if p.Format != "" && !slices.Contains(formFormats, p.Format) {
		return formProperty{}, fmt.Errorf("format %q is not allowed (email, uri, date, date-time)", p.Format)
	}
	for _, c := range p.OneOf {
		if c.Const == "" {
			return formProperty{}, fmt.Errorf(`each "oneOf" choice needs a string "const"`)
		}
	}
	if kind == "array" {
		if err := checkFormItems(p.Items); err != nil {
			return formProperty{}, err
		}
	}
	if p.Default != nil {
		if msg := p.check(p.Default); msg != "" {
			return formProperty{}, fmt.Errorf("default %s", msg)
		}
	}
	return p, nil
}

// checkFormItems checks a multi-select's items: an enum or anyOf of consts.
func checkFormItems(items *formProperty) error {
	switch {
	case items == nil:
		return fmt.Errorf(`a multi-select needs "items" with "enum" or "anyOf"`)
	case len(items.Enum) > 0 && (items.Type == "" || items.Type == "string") && items.AnyOf == nil:
	case len(items.AnyOf) > 0 && (items.Type == "" || items.Type == "string") && items.Enum == nil:
		for _, c := range items.AnyOf {
			if c.Const == "" {
				return fmt.Errorf(`each "anyOf" choice needs a string "const"`)
			}
		}
	default:
		return fmt.Errorf(`a multi-select's "items" must have "enum" or "anyOf" of string choices`)
	}
	return nil
}

// choices are the values a single- or multi-select allows.
func (p formProperty) choices() []string {
	src := p
	if p.Type == "array" && p.Items != nil {
		src = *p.Items
	}
	out := slices.Clone(src.Enum)
	for _, c := range append(src.OneOf, src.AnyOf...) {
		out = append(out, c.Const)
	}
	return out
}

// check returns why v is not a value of p ("" when it is).
func (p formProperty) check(v json.RawMessage) string {
	switch p.Type {
	case "string":
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "must be a string"
		}
		return p.checkString(s)
	case "number", "integer":
		var f float64
		if json.Unmarshal(v, &f) != nil || bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`)) {
			if p.Type == "integer" {
				return "must be an integer"
			}
			return "must be a number"
		}
		return p.checkNumber(f)
	case "boolean":
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return "must be true or false"
		}
	case "array":
		var items []string
		if json.Unmarshal(v, &items) != nil || items == nil {
			return "must be a list of choices"
		}
		return p.checkItems(items)
	}
	return ""
}

func (p formProperty) checkString(s string) string {
	n := utf8.RuneCountInString(s)
	if ch := p.choices(); len(ch) > 0 && !slices.Contains(ch, s) {
		return fmt.Sprintf("must be one of %s", strings.Join(ch, ", "))
	}
	switch {
	case p.MinLength != nil && n < *p.MinLength:
		return fmt.Sprintf("must be at least %d characters", *p.MinLength)
	case p.MaxLength != nil && n > *p.MaxLength:
		return fmt.Sprintf("must be at most %d characters", *p.MaxLength)
	}
	return checkFormat(p.Format, s)
}

func checkFormat(format, s string) string {
	var err error
	switch format {
	case "email":
		var a *mail.Address
		if a, err = mail.ParseAddress(s); err == nil && a.Address != s {
			err = fmt.Errorf("not a bare address")
		}
	case "uri":
		var u *url.URL
		if u, err = url.Parse(s); err == nil && (u.Scheme == "" || !u.IsAbs()) {
			err = fmt.Errorf("no scheme")
		}
	case "date":
		_, err = time.Parse(time.DateOnly, s)
	case "date-time":
		_, err = time.Parse(time.RFC3339, s)
	}
	if err != nil {
		return "must be a valid " + format
	}
	return ""
}

func (p formProperty) checkNumber(f float64) string {
	switch {
	case p.Type == "integer" && f != math.Trunc(f):
		return "must be an integer"
	case p.Minimum != nil && f < *p.Minimum:
		return fmt.Sprintf("must be at least %v", *p.Minimum)
	case p.Maximum != nil && f > *p.Maximum:
		return fmt.Sprintf("must be at most %v", *p.Maximum)
	}
	return ""
}

func (p formProperty) checkItems(items []string) string {
	ch := p.choices()
	for _, it := range items {
		if !slices.Contains(ch, it) {
			return fmt.Sprintf("%q is not one of %s", it, strings.Join(ch, ", "))
		}
	}
	switch {
	case p.MinItems != nil && len(items) < *p.MinItems:
		return fmt.Sprintf("must have at least %d choices", *p.MinItems)
	case p.MaxItems != nil && len(items) > *p.MaxItems:
		return fmt.Sprintf("must have at most %d choices", *p.MaxItems)
	}
	return ""
}

// CheckContent validates an accepted answer's content against a form
// schema (SPEC §12.3): only the schema's properties, each of its type,
// bounds, format and choices, and every required one. It returns the
// content with the defaults of absent properties filled in (its keys
// sorted), or every bad field, in name order (unknown properties too). A
// schema that is not a form schema is an error.
func CheckContent(schema, content json.RawMessage) (json.RawMessage, []FieldError, error) {
	fs, err := parseFormSchema(schema)
	if err != nil {
		return nil, nil, err
	}
	if len(bytes.TrimSpace(content)) == 0 {
		content = json.RawMessage(`{}`)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(content, &got); err != nil || got == nil {
		return nil, []FieldError{{Field: "content", Message: "must be a JSON object"}}, nil
	}
	var bad []FieldError
	for name, v := range got {
		p, ok := fs.Properties[name]
		if !ok {
			bad = append(bad, FieldError{Field: name, Message: "is not a property of the form"})
		} else if msg := p.check(v); msg != "" {
			bad = append(bad, FieldError{Field: name, Message: msg})
		}
	}
	for _, name := range fs.Order {
		if _, ok := got[name]; !ok && fs.Properties[name].Default != nil {
			got[name] = fs.Properties[name].Default
		}
	}
	for _, name := range fs.Required {
		if _, ok := got[name]; !ok {
			bad = append(bad, FieldError{Field: name, Message: "is required"})
		}
	}
	if len(bad) > 0 {
		sort.Slice(bad, func(i, j int) bool { return bad[i].Field < bad[j].Field })
		return nil, bad, nil
	}
	out, err := json.Marshal(got)
	return out, nil, err
}
