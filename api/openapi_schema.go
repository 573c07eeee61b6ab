package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
)

// This file turns Go types into the JSON Schemas (the OpenAPI 3.1 dialect,
// JSON Schema 2020-12) of the JSON that encoding/json reads and writes for
// them, so that the document states no field list of its own: a field added
// to a response type is in the document, and a response that carries a
// field the document does not name fails the validating tests.

// schema is one JSON Schema as the document holds it.
type schema = map[string]any

// schemaMode says how a type is read: as a response the server writes, as
// a request body the strict decoder reads, or as an open request body
// (the chat protocols', whose unknown fields are ignored).
type schemaMode int

const (
	modeResponse schemaMode = iota
	modeRequest
	modeOpenRequest
)

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	durationType   = reflect.TypeFor[time.Duration]()
	marshalerType  = reflect.TypeFor[json.Marshaler]()
)

// marshaledAs maps the types with their own MarshalJSON to a type whose
// plain encoding has the same fields. A type with a MarshalJSON that is not
// here makes schemaFor panic, so the document never guesses its shape
// (TestOpenAPIDocumentValid builds it).
var marshaledAs = map[reflect.Type]reflect.Type{
	// ToolCall adds card_revision (card.go); listedCall has it too.
	reflect.TypeFor[agentd.ToolCall](): reflect.TypeFor[struct {
		callFields
		CardRevision int `json:"card_revision,omitempty"`
	}](),
	// ToolCallResultPayload writes result or error, each only when it
	// applies: the same fields, both optional.
	reflect.TypeFor[agentd.ToolCallResultPayload](): reflect.TypeFor[resultPayloadFields](),
}

// resultPayloadFields is agentd.ToolCallResultPayload without its MarshalJSON.
type resultPayloadFields agentd.ToolCallResultPayload

// schemaFor is the schema of t's JSON in mode m.
func schemaFor(t reflect.Type, m schemaMode) schema {
	switch t {
	case rawMessageType:
		return anyJSON()
	case timeType:
		return schema{"type": "string", "format": "date-time"}
	case durationType:
		return schema{"type": "integer"}
	}
	if t.Kind() == reflect.Pointer {
		return nullable(schemaFor(t.Elem(), m))
	}
	if as, ok := marshaledAs[t]; ok {
		return schemaFor(as, m)
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		panic(fmt.Sprintf("api: openapi: %v has its own MarshalJSON: add it to marshaledAs", t))
	}
	switch t.Kind() {
	case reflect.String:
		return schema{"type": "string"}
	case reflect.Bool:
		return schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return schema{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return schema{"type": "number"}
	case reflect.Slice, reflect.Array:
		return nullable(schema{"type": "array", "items": schemaFor(t.Elem(), m)})
	case reflect.Map:
		return nullable(schema{"type": "object", "additionalProperties": schemaFor(t.Elem(), m)})
	case reflect.Interface:
		return anyJSON()
	case reflect.Struct:
		return structSchema(t, m)
	}
	panic(fmt.Sprintf("api: openapi: no schema for %v", t))
}

// anyJSON is any JSON value, null included: anyOf {} and {"type": "null"}.
// In OpenAPI 3.1 (JSON Schema 2020-12) {} alone accepts any value; the null
// branch is for kin-openapi, whose validation reads {} as not nullable. A
// list of every type said the same, but client generators refuse a list
// of types (ogen, oapi-codegen), and kin-openapi ignores "nullable" in a
// 3.1 document (TestGeneratedClient, TestLargeWriteStoredOnce).
func anyJSON() schema {
	return schema{"anyOf": []schema{{}, {"type": "null"}}}
}

// nullable is s that also allows null (a nil pointer, slice or map).
func nullable(s schema) schema {
	switch typ := s["type"].(type) {
	case string:
		s["type"] = []string{typ, "null"}
		return s
	case nil:
		if len(s) == 0 {
			return s
		}
	}
	return schema{"anyOf": []any{s, schema{"type": "null"}}}
}

// structSchema is the object of t's fields as encoding/json sees them:
// embedded structs flattened, "-" left out. In a response every field
// without omitempty is required (encoding/json always writes it) and no
// other field is allowed; a field tagged `event:"required"` (the event
// payloads) is not empty. Request bodies name their required fields
// themselves (the handlers check them); a strict one allows no other.
func structSchema(t reflect.Type, m schemaMode) schema {
	props := schema{}
	var required []string
	addFields(t, m, props, &required)
	s := schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	if m != modeOpenRequest {
		s["additionalProperties"] = false
	}
	return s
}

func addFields(t reflect.Type, m schemaMode, props schema, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if _, custom := marshaledAs[ft]; !custom && ft.Kind() == reflect.Struct {
				addFields(ft, m, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitempty := strings.Contains(","+opts+",", ",omitempty,")
		fs := schemaFor(f.Type, m)
		if omitempty {
			fs = notNull(fs) // omitempty leaves out nil, so a present value is not null
		}
		if f.Tag.Get("event") == "required" {
			fs = notNull(fs)
			nonEmpty(fs)
		}
		props[name] = fs
		if m == modeResponse && !omitempty {
			*required = append(*required, name)
		}
	}
}

// notNull undoes nullable.
func notNull(s schema) schema {
	if typ, ok := s["type"].([]string); ok && len(typ) == 2 && typ[1] == "null" {
		s["type"] = typ[0]
	}
	if any, ok := s["anyOf"].([]any); ok && len(any) == 2 {
		if n, ok := any[1].(schema); ok && n["type"] == "null" {
			return any[0].(schema)
		}
	}
	return s
}

// nonEmpty marks s as not its zero value where a schema can say so.
func nonEmpty(s schema) {
	switch s["type"] {
	case "string":
		s["minLength"] = 1
	case "array":
		s["minItems"] = 1
	}
}
