// Package strictjson is agentd's strict reading of JSON, in two parts.
//
// The one rule for ambiguous JSON (this file): a document whose objects
// repeat a key, or hold two keys that differ only by case, is refused, and
// so is one that is not valid UTF-8. Different JSON readers disagree on
// which of two such keys wins (Go's encoding/json even matches struct fields
// case-insensitively), so the value a check saw might not be the value that
// is used. The HTTP API applies it to every request body; confirm applies it
// to the arguments of connection calls.
//
// The configuration files' decoding (config.go): DecodeStrict rejects
// unknown fields and trailing data, with errors (FieldError) that name the
// field, or the line and column of a syntax error. project, tools,
// connections, hooks, mcp, webhook, confirm's policies and the models' and
// scripts' configuration share it.
package strictjson

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckKeys returns an error naming the first key that appears twice in one
// object of doc, counting keys that differ only by case as the same, and an
// error for a doc that is not valid UTF-8 or not valid JSON. It does not
// decode values.
func CheckKeys(doc []byte) error {
	if !utf8.Valid(doc) {
		return errors.New("the JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		obj  bool
		seen map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 {
				return errors.New("the JSON ends inside an object or array")
			}
			return nil
		} else if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{obj: true, seen: map[string]bool{}, key: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true
				}
			}
			continue
		case string:
			if top != nil && top.obj && top.key {
				k := foldKey(t)
				if top.seen[k] {
					return fmt.Errorf("the key %q appears twice in one object (keys that differ only by case count as the same)", t)
				}
				top.seen[k] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

// foldKey is the key as encoding/json compares field names: every rune
// replaced by the smallest rune of its Unicode case-folding orbit (so "s",
// "S" and "ſ" (U+017F), or "k", "K" and the Kelvin sign, are one key).
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Unmarshal decodes doc (one JSON value) into v as encoding/json does, after
// CheckKeys, except that object keys match struct fields exactly, as
// JavaScript and JSON Schema read them: a key that names a field of v only
// in another case ({"APPROVED": true} for a field "approved") is an error,
// where encoding/json would take it for the field. With known, a key that is
// no field at all is an error too; without, it is ignored. Values that
// decode themselves (json.RawMessage, time.Time) are not looked into.
func Unmarshal(doc []byte, v any, known bool) error {
	if err := CheckKeys(doc); err != nil {
		return err
	}
	if err := ExactKeys(doc, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if known {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// ExactKeys returns an error naming the first key of doc (one JSON value)
// that encoding/json would match to a field of v only in another case
// ({"APPROVED": true} for a field "approved"), at any depth v's type
// reaches, and doc's syntax error if it is not JSON. It decodes nothing
// into v: Unmarshal is CheckKeys, ExactKeys and encoding/json's decoding.
func ExactKeys(doc []byte, v any) error {
	var tree any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	return exactKeys(tree, reflect.TypeOf(v), "")
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// exactKeys checks that every key of val that encoding/json would match to
// a field of t names it exactly; path is where val is, for the message.
func exactKeys(val any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			return nil // encoding/json reports the type
		}
		fields := fieldsOf(t)
		for k, kv := range m {
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if foldKey(name) == foldKey(k) {
						return fmt.Errorf("the key %q at %s is not %q: keys are case-sensitive", k, cmp.Or(path, "the top level"), name)
					}
				}
				continue
			}
			if err := exactKeys(kv, ft, keyPath(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if l, ok := val.([]any); ok {
			for i, e := range l {
				if err := exactKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if m, ok := val.(map[string]any); ok {
			for k, e := range m {
				if err := exactKeys(e, t.Elem(), keyPath(path, k)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// fieldsOf are the JSON names of t's fields as encoding/json sees them
// (the json tag's name, else the Go name; embedded structs' fields
// promoted), with their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

// keyPath is the path of key k in the object at path, for ExactKeys'
// messages (unlike Join, an empty key keeps its dot).
func keyPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
