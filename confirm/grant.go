package confirm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
)

// Remembered grants' matches (SPEC §11.2): "exact" (the digest), "any",
// or constraints on dot paths into the arguments (a connection call's
// grouped path/query/header/body). Pure: no I/O.

// GrantMatch is a parsed match.
type GrantMatch struct {
	// Kind is agentd.GrantMatchExact, agentd.GrantMatchAny or
	// "constraints".
	Kind        string
	Constraints map[string]Constraint
}

// Constraint is one dot path's condition; every one set must hold.
type Constraint struct {
	Equals json.RawMessage   `json:"equals,omitempty"`
	OneOf  []json.RawMessage `json:"one_of,omitempty"`
	Min    *float64          `json:"min,omitempty"`
	Max    *float64          `json:"max,omitempty"`
}

// matchConstraints is GrantMatch.Kind of an object of constraints.
const matchConstraints = "constraints"

// ParseGrantMatch reads a remember's match (empty: "exact"). Errors are
// EINVALID naming the field under "remember.match".
func ParseGrantMatch(raw json.RawMessage) (GrantMatch, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return GrantMatch{Kind: agentd.GrantMatchExact}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != agentd.GrantMatchExact && s != agentd.GrantMatchAny {
			return GrantMatch{}, agentd.Errorf(agentd.EINVALID, `remember.match: must be "exact", "any" or an object of constraints, got %q`, s)
		}
		return GrantMatch{Kind: s}, nil
	}
	if raw[0] != '{' {
		return GrantMatch{}, agentd.Errorf(agentd.EINVALID, `remember.match: must be "exact", "any" or an object of constraints`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || len(obj) == 0 {
		return GrantMatch{}, agentd.Errorf(agentd.EINVALID, "remember.match: an object of constraints needs at least one dot path")
	}
	m := GrantMatch{Kind: matchConstraints, Constraints: map[string]Constraint{}}
	for path, v := range obj {
		c, err := parseConstraint(path, v)
		if err != nil {
			return GrantMatch{}, err
		}
		m.Constraints[path] = c
	}
	return m, nil
}

func parseConstraint(path string, v json.RawMessage) (Constraint, error) {
	field := "remember.match." + path
	if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
		return Constraint{}, agentd.Errorf(agentd.EINVALID, "%s: not a dot path", field)
	}
	var c Constraint
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Constraint{}, agentd.Errorf(agentd.EINVALID, "%s: must be an object of equals, one_of, min, max: %v", field, err)
	}
	if err := strictjson.CheckKeys(v); err != nil {
		return Constraint{}, agentd.Errorf(agentd.EINVALID, "%s: %v", field, err)
	}
	if c.Equals == nil && c.OneOf == nil && c.Min == nil && c.Max == nil {
		return Constraint{}, agentd.Errorf(agentd.EINVALID, "%s: names no condition (equals, one_of, min, max)", field)
	}
	if c.OneOf != nil && len(c.OneOf) == 0 {
		return Constraint{}, agentd.Errorf(agentd.EINVALID, "%s.one_of: must list at least one value", field)
	}
	if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
		return Constraint{}, agentd.Errorf(agentd.EINVALID, "%s: min %v is above max %v", field, *c.Min, *c.Max)
	}
	return c, nil
}

// Matches reports whether a call with digest and doc (its arguments, or a
// connection call's grouped arguments) is covered by m, made on a call
// with grantDigest. A path doc lacks fails the match.
func (m GrantMatch) Matches(grantDigest, digest string, doc json.RawMessage) bool {
	switch m.Kind {
	case agentd.GrantMatchExact:
		return grantDigest != "" && digest == grantDigest
	case agentd.GrantMatchAny:
		return true
	case matchConstraints:
	default:
		return false
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return false
	}
	for path, c := range m.Constraints {
		got, ok := at(v, strings.Split(path, "."))
		if !ok || !c.holds(got) {
			return false
		}
	}
	return true
}

// at is the value at keys in v (objects only).
func at(v any, keys []string) (any, bool) {
	for _, k := range keys {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// holds reports whether every condition of c holds for got.
func (c Constraint) holds(got any) bool {
	if c.Equals != nil && !sameJSON(c.Equals, got) {
		return false
	}
	if c.OneOf != nil && !slices.ContainsFunc(c.OneOf, func(w json.RawMessage) bool { return sameJSON(w, got) }) {
		return false
	}
	if c.Min != nil || c.Max != nil {
		n, ok := got.(float64)
		if !ok || (c.Min != nil && n < *c.Min) || (c.Max != nil && n > *c.Max) {
			return false
		}
	}
	return true
}

// sameJSON reports whether the JSON want decodes to got.
func sameJSON(want json.RawMessage, got any) bool {
	var w any
	return json.Unmarshal(want, &w) == nil && reflect.DeepEqual(w, got)
}
