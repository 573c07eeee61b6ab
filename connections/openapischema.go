package connections

import (
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// converter turns kin-openapi schemas into plain JSON Schema (draft
// 2020-12): $refs inlined (to a bounded depth), nullable folded into type,
// OpenAPI-only keywords dropped.
type converter struct {
	nodes int
}

// parameter converts a parameter's schema (or its content's JSON schema),
// carrying the parameter's description.
func (cv *converter) parameter(p *openapi3.Parameter) any {
	var s any = map[string]any{}
	switch {
	case p.Schema != nil:
		s = cv.schema(p.Schema, 0, 0)
	case p.Content != nil:
		if mt := p.Content.Get("application/json"); mt != nil && mt.Schema != nil {
			s = cv.schema(mt.Schema, 0, 0)
		}
	}
	if p.Description != "" {
		if m, ok := s.(map[string]any); ok && m["description"] == nil {
			m["description"] = p.Description
		}
	}
	return s
}

// schema converts r. refDepth counts the $refs inlined on the way here,
// nesting the schema levels.
func (cv *converter) schema(r *openapi3.SchemaRef, refDepth, nesting int) any {
	if r == nil || r.Value == nil {
		return map[string]any{}
	}
	if r.Ref != "" {
		refDepth++
		if refDepth > maxRefDepth || cv.nodes > maxSchemaNodes {
			return map[string]any{}
		}
	}
	if nesting > maxNesting {
		return map[string]any{}
	}
	cv.nodes++
	s := r.Value
	if s.Always != nil {
		return *s.Always
	}
	out := map[string]any{}
	typeKeywords(out, s)
	annotationKeywords(out, s)
	numberKeywords(out, s)
	stringKeywords(out, s)
	below := subschemas{cv: cv, refDepth: refDepth, nesting: nesting + 1}
	below.arrayKeywords(out, s)
	below.objectKeywords(out, s)
	below.compositionKeywords(out, s)
	return out
}

// typeKeywords sets type, enum and const of out from s, with OpenAPI 3.0's
// nullable folded into type and enum.
func typeKeywords(out map[string]any, s *openapi3.Schema) {
	types := slices.Clone(s.Type.Slice())
	if s.Nullable && len(types) > 0 && !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	switch len(types) {
	case 0:
	case 1:
		out["type"] = types[0]
	default:
		out["type"] = types
	}
	if len(s.Enum) > 0 {
		enum := slices.Clone(s.Enum)
		if s.Nullable && !slices.Contains(enum, nil) {
			enum = append(enum, nil)
		}
		out["enum"] = enum
	}
	if s.Const != nil {
		out["const"] = s.Const
	}
}

// annotationKeywords copies the annotations of s into out: title,
// description, format, default, deprecated, readOnly, writeOnly.
func annotationKeywords(out map[string]any, s *openapi3.Schema) {
	if s.Title != "" {
		out["title"] = s.Title
	}
	if s.Description != "" {
		out["description"] = s.Description
	}
	if s.Format != "" {
		out["format"] = s.Format
	}
	if s.Default != nil {
		out["default"] = s.Default
	}
	if s.Deprecated {
		out["deprecated"] = true
	}
	if s.ReadOnly {
		out["readOnly"] = true
	}
	if s.WriteOnly {
		out["writeOnly"] = true
	}
}

// numberKeywords copies the numeric bounds of s into out. In OpenAPI 3.0
// exclusiveMinimum is a boolean modifier of minimum; in 3.1 (and JSON
// Schema) it is the bound itself: both come out as the JSON Schema bound.
func numberKeywords(out map[string]any, s *openapi3.Schema) {
	if s.Min != nil {
		if s.ExclusiveMin.IsTrue() {
			out["exclusiveMinimum"] = *s.Min
		} else {
			out["minimum"] = *s.Min
		}
	}
	if s.ExclusiveMin.Value != nil {
		out["exclusiveMinimum"] = *s.ExclusiveMin.Value
	}
	if s.Max != nil {
		if s.ExclusiveMax.IsTrue() {
			out["exclusiveMaximum"] = *s.Max
		} else {
			out["maximum"] = *s.Max
		}
	}
	if s.ExclusiveMax.Value != nil {
		out["exclusiveMaximum"] = *s.ExclusiveMax.Value
	}
	if s.MultipleOf != nil {
		out["multipleOf"] = *s.MultipleOf
	}
}

// stringKeywords copies the string bounds of s into out: minLength,
// maxLength, pattern.
func stringKeywords(out map[string]any, s *openapi3.Schema) {
	if s.MinLength > 0 {
		out["minLength"] = s.MinLength
	}
	if s.MaxLength != nil {
		out["maxLength"] = *s.MaxLength
	}
	if s.Pattern != "" {
		out["pattern"] = s.Pattern
	}
}

// subschemas converts the subschemas of one schema, one nesting level
// below it and with the $ref depth it was reached at.
type subschemas struct {
	cv                *converter
	refDepth, nesting int
}

func (b subschemas) one(x *openapi3.SchemaRef) any { return b.cv.schema(x, b.refDepth, b.nesting) }

func (b subschemas) list(xs openapi3.SchemaRefs) []any {
	out := make([]any, 0, len(xs))
	for _, x := range xs {
		out = append(out, b.one(x))
	}
	return out
}

func (b subschemas) named(m openapi3.Schemas) map[string]any {
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = b.one(x)
	}
	return out
}

// boolOrSchema is a keyword that is either true/false or a schema; nil
// when it is absent.
func (b subschemas) boolOrSchema(v openapi3.BoolSchema) any {
	if v.Has != nil {
		return *v.Has
	}
	if v.Schema != nil {
		return b.one(v.Schema)
	}
	return nil
}

// arrayKeywords converts the array keywords of s into out.
func (b subschemas) arrayKeywords(out map[string]any, s *openapi3.Schema) {
	if s.MinItems > 0 {
		out["minItems"] = s.MinItems
	}
	if s.MaxItems != nil {
		out["maxItems"] = *s.MaxItems
	}
	if s.UniqueItems {
		out["uniqueItems"] = true
	}
	if s.Items != nil {
		out["items"] = b.one(s.Items)
	}
	if len(s.PrefixItems) > 0 {
		out["prefixItems"] = b.list(s.PrefixItems)
	}
	if s.Contains != nil {
		out["contains"] = b.one(s.Contains)
	}
	if s.MinContains != nil {
		out["minContains"] = *s.MinContains
	}
	if s.MaxContains != nil {
		out["maxContains"] = *s.MaxContains
	}
	if v := b.boolOrSchema(s.UnevaluatedItems); v != nil {
		out["unevaluatedItems"] = v
	}
}

// objectKeywords converts the object keywords of s into out.
func (b subschemas) objectKeywords(out map[string]any, s *openapi3.Schema) {
	if len(s.Properties) > 0 {
		out["properties"] = b.named(s.Properties)
	}
	if len(s.Required) > 0 {
		out["required"] = slices.Clone(s.Required)
	}
	if s.MinProps > 0 {
		out["minProperties"] = s.MinProps
	}
	if s.MaxProps != nil {
		out["maxProperties"] = *s.MaxProps
	}
	if v := b.boolOrSchema(s.AdditionalProperties); v != nil {
		out["additionalProperties"] = v
	}
	if len(s.PatternProperties) > 0 {
		out["patternProperties"] = b.named(s.PatternProperties)
	}
	if s.PropertyNames != nil {
		out["propertyNames"] = b.one(s.PropertyNames)
	}
	if len(s.DependentRequired) > 0 {
		out["dependentRequired"] = s.DependentRequired
	}
	if len(s.DependentSchemas) > 0 {
		out["dependentSchemas"] = b.named(s.DependentSchemas)
	}
	if v := b.boolOrSchema(s.UnevaluatedProperties); v != nil {
		out["unevaluatedProperties"] = v
	}
}

// compositionKeywords converts allOf, anyOf, oneOf, not and if/then/else
// of s into out; then and else only come with an if.
func (b subschemas) compositionKeywords(out map[string]any, s *openapi3.Schema) {
	if len(s.AllOf) > 0 {
		out["allOf"] = b.list(s.AllOf)
	}
	if len(s.AnyOf) > 0 {
		out["anyOf"] = b.list(s.AnyOf)
	}
	if len(s.OneOf) > 0 {
		out["oneOf"] = b.list(s.OneOf)
	}
	if s.Not != nil {
		out["not"] = b.one(s.Not)
	}
	if s.If != nil {
		out["if"] = b.one(s.If)
		if s.Then != nil {
			out["then"] = b.one(s.Then)
		}
		if s.Else != nil {
			out["else"] = b.one(s.Else)
		}
	}
}
