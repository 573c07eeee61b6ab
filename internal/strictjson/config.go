package strictjson

// This file decodes agentd's JSON configuration files strictly (unknown
// fields and trailing data are errors) with errors that name the field, or
// the line and column of a syntax error.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// FieldError is a configuration error about one field of a JSON file.
type FieldError struct {
	field string // dotted path, e.g. "exposure.kind"
	msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.field, e.msg) }

// FieldErr returns a *FieldError for the dotted field path.
func FieldErr(field, format string, args ...any) error {
	return &FieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// DecodeStrict decodes the JSON object data into v, rejecting unknown
// fields and trailing data. prefix is the dotted path of data inside its
// file ("" for the whole file); errors name the field, or the line and
// column of a syntax error.
func DecodeStrict(data []byte, v any, prefix string) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if prefix == "" {
			return errors.New("empty file, expected a JSON object")
		}
		return FieldErr(prefix, "must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if json.Valid(trimmed) && trimmed[0] != '{' {
		if prefix == "" {
			return errors.New("must be a JSON object")
		}
		return FieldErr(prefix, "must be an object")
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(data, err, prefix)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := position(data, dec.InputOffset())
		return fmt.Errorf("line %d, column %d: unexpected data after the JSON object", line, col)
	}
	return nil
}

func decodeError(data []byte, err error, prefix string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(data, max(syn.Offset-1, 0)) // Offset is just past the bad byte
		return fmt.Errorf("line %d, column %d: %s", line, col, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(data, int64(len(data)))
		return fmt.Errorf("line %d, column %d: unexpected end of JSON", line, col)
	case errors.As(err, &typ):
		return FieldErr(Join(prefix, typ.Field), "must be %s, got %s", describe(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), `json: unknown field "`):
		name := strings.TrimSuffix(strings.TrimPrefix(err.Error(), `json: unknown field "`), `"`)
		return FieldErr(Join(prefix, name), "unknown field")
	}
	if prefix != "" {
		return FieldErr(prefix, "%v", err)
	}
	return err
}

// Join appends field to the dotted path prefix.
func Join(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// describe names the JSON shape of a Go type for error messages.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
