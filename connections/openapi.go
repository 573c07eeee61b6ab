package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/schema"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits of the schema conversion.
const (
	// maxRefDepth is how many $refs deep a schema is inlined; a deeper
	// (recursive) reference becomes {} (anything).
	maxRefDepth = 8
	// maxNesting bounds the nesting of a converted schema.
	maxNesting = 64
	// maxSchemaNodes bounds the size of one operation's converted schema;
	// beyond it, references become {}.
	maxSchemaNodes = 20000
	// maxToolDescription bounds an operation tool's description.
	maxToolDescription = 2000
)

// Methods an operation tool may use, in the order operations are listed.
var operationMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Operation is one OpenAPI operation a connection exposes as a tool.
type Operation struct {
	// ID is the operationId.
	ID string
	// Method is the upper-case HTTP method.
	Method string
	// Template is the path template relative to the connection's base
	// URL, as written in the document: "/orders/{id}".
	Template    string
	Summary     string
	Description string
	// Parameters is the JSON Schema (draft 2020-12) of the grouped
	// arguments {path, query, header, body}, compacted.
	Parameters json.RawMessage

	schema *jsonschema.Schema
}

// loadOperations reads the OpenAPI document rel (relative to dir) and
// returns its exposed operations: those named in sel, or every operation
// when sel is nil. An operation that cannot be a tool (an unsupported
// method, a required non-JSON body) is an error when sel names it, and
// skipped with a warning otherwise. Errors name the place in the document.
func (c *Connection) loadOperations(dir, rel string, sel []string) (ops []*Operation, warnings []string, err error) {
	data, err := readDocument(dir, rel)
	if err != nil {
		return nil, nil, err
	}
	doc, err := parseOpenAPI(data)
	if err != nil {
		return nil, nil, err
	}
	return c.selectOperations(doc, sel)
}

// readDocument reads the file rel inside dir (never outside it), at most
// maxDocumentBytes.
func readDocument(dir, rel string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("cannot read the OpenAPI document: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDocumentBytes+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("cannot read the OpenAPI document: %w", err)
	}
	if len(data) > maxDocumentBytes {
		return nil, fmt.Errorf("the OpenAPI document is larger than %d bytes", maxDocumentBytes)
	}
	return data, nil
}

// parseOpenAPI parses and validates an OpenAPI 3 document whose $refs all
// stay inside it.
func parseOpenAPI(data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	loader.Context = context.Background()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		var ext *openapi3.DisallowedExternalRefError
		if errors.As(err, &ext) {
			return nil, fmt.Errorf("$ref %q refers to another document: only references inside the document (#/...) are allowed", ext.Ref)
		}
		return nil, fmt.Errorf("not a valid OpenAPI document: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, fmt.Errorf(`field "openapi": must be an OpenAPI 3 version such as "3.0.3", got %q`, doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("not a valid OpenAPI document: %v", err)
	}
	return doc, nil
}

// selectOperations builds the operations of doc that sel names (every one
// when sel is nil), by path and then method order, as loadOperations
// promises. Every operationId must be unique, and every one sel names
// must exist.
func (c *Connection) selectOperations(doc *openapi3.T, sel []string) (ops []*Operation, warnings []string, err error) {
	want := map[string]bool{}
	for _, id := range sel {
		want[id] = true
	}
	found := map[string]string{} // operationId → where
	var paths []string
	if doc.Paths != nil {
		paths = doc.Paths.Keys()
	}
	sort.Strings(paths)
	for _, p := range paths {
		item := doc.Paths.Value(p)
		if item == nil {
			continue
		}
		all := item.Operations()
		for _, m := range sortedMethods(all) {
			op := all[m]
			where := fmt.Sprintf("paths.%s.%s", p, strings.ToLower(m))
			id := op.OperationID
			if prev, dup := found[id]; dup && id != "" {
				return nil, nil, fmt.Errorf("%s: operationId %q is also used by %s", where, id, prev)
			}
			if id != "" {
				found[id] = where
			}
			if sel != nil && !want[id] {
				continue
			}
			if id == "" {
				return nil, nil, fmt.Errorf(`%s: the operation has no operationId, which its tool's name needs (or leave it out of "tools.operations" in connection.json)`, where)
			}
			o, err := c.buildOperation(p, strings.ToUpper(m), item, op)
			var unsupported *unsupportedError
			if errors.As(err, &unsupported) && sel == nil {
				warnings = append(warnings, fmt.Sprintf("%s (operationId %q): %v; no tool for it", where, id, err))
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s (operationId %q): %w", where, id, err)
			}
			ops = append(ops, o)
		}
	}
	for i, id := range sel {
		if _, ok := found[id]; !ok {
			return nil, nil, &unknownOperationError{index: i, id: id}
		}
	}
	return ops, warnings, nil
}

// sortedMethods returns the methods of a path item's operations in
// operationMethods order, unknown methods last.
func sortedMethods(all map[string]*openapi3.Operation) []string {
	methods := make([]string, 0, len(all))
	for m := range all {
		methods = append(methods, m)
	}
	sort.Slice(methods, func(i, j int) bool { return methodOrder(methods[i]) < methodOrder(methods[j]) })
	return methods
}

func methodOrder(m string) int {
	if i := slices.Index(operationMethods, strings.ToUpper(m)); i >= 0 {
		return i
	}
	return len(operationMethods)
}

// buildOperation derives the grouped-arguments schema of one operation.
// Header parameters the model may not set (credentials, the connection's
// own headers, cookies) are left out: the connection sets them.
func (c *Connection) buildOperation(tmpl, method string, item *openapi3.PathItem, op *openapi3.Operation) (*Operation, error) {
	if !slices.Contains(operationMethods, method) {
		return nil, &unsupportedError{fmt.Sprintf("method %s is not supported (only %s)", method, strings.Join(operationMethods, ", "))}
	}
	pathParams, err := templateParams(tmpl)
	if err != nil {
		return nil, err
	}
	cv := &converter{}
	groups, err := c.parameterGroups(cv, pathParams, mergeParameters(item, op))
	if err != nil {
		return nil, err
	}
	props, required := groupProperties(groups)
	body, bodyRequired, err := jsonBody(cv, op.RequestBody)
	if err != nil {
		return nil, err
	}
	if body != nil {
		props["body"] = body
		if bodyRequired {
			required = append(required, "body")
		}
	}
	top := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		top["required"] = required
	}
	raw, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("cannot derive the arguments schema: %v", err)
	}
	o := &Operation{ID: op.OperationID, Method: method, Template: tmpl,
		Summary: strings.TrimSpace(op.Summary), Description: strings.TrimSpace(op.Description), Parameters: raw}
	if o.schema, err = schema.Compile(o.ID, raw); err != nil {
		return nil, fmt.Errorf("the derived arguments schema does not compile: %v", err)
	}
	return o, nil
}

// mergeParameters returns the parameters of op: the path item's, each
// overridden by an operation parameter of the same name and location, in
// the order they first appear.
func mergeParameters(item *openapi3.PathItem, op *openapi3.Operation) []*openapi3.Parameter {
	type key struct{ in, name string }
	merged := map[key]*openapi3.Parameter{}
	var order []key
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, ref := range list {
			if ref == nil || ref.Value == nil {
				continue
			}
			k := key{ref.Value.In, ref.Value.Name}
			if _, ok := merged[k]; !ok {
				order = append(order, k)
			}
			merged[k] = ref.Value
		}
	}
	out := make([]*openapi3.Parameter, len(order))
	for i, k := range order {
		out[i] = merged[k]
	}
	return out
}

// parameterGroups sorts params into the path, query and header groups of
// the grouped arguments. Every name of the path template is a required
// string unless a parameter describes it; a path parameter the template
// lacks is an error. Headers the model may not set and cookies are left
// out; header values are strings.
func (c *Connection) parameterGroups(cv *converter, pathParams []string, params []*openapi3.Parameter) (map[string]*group, error) {
	groups := map[string]*group{"path": newGroup(), "query": newGroup(), "header": newGroup()}
	for _, p := range params {
		switch p.In {
		case openapi3.ParameterInPath:
			if !slices.Contains(pathParams, p.Name) {
				return nil, fmt.Errorf("path parameter %q is not in the path template", p.Name)
			}
			groups["path"].add(p.Name, cv.parameter(p), true)
		case openapi3.ParameterInQuery:
			groups["query"].add(p.Name, cv.parameter(p), p.Required)
		case openapi3.ParameterInHeader:
			if c.checkModelHeader(p.Name) != nil {
				continue // the connection or the client sets it; the model may not
			}
			s := cv.parameter(p)
			if m, ok := s.(map[string]any); !ok || m["type"] != "string" {
				// Header values travel as strings.
				s = stringSchema(s)
			}
			groups["header"].add(p.Name, s, p.Required)
		default: // cookie: the model may not set cookies
		}
	}
	for _, name := range pathParams {
		if !groups["path"].has(name) {
			groups["path"].add(name, map[string]any{"type": "string"}, true)
		}
	}
	return groups, nil
}

// groupProperties returns the top-level properties of the grouped
// arguments for the non-empty groups, and the names of those that are
// required (those with a required member), in path, query, header order.
func groupProperties(groups map[string]*group) (map[string]any, []string) {
	props := map[string]any{}
	var required []string
	for _, g := range []string{"path", "query", "header"} {
		gr := groups[g]
		if len(gr.props) == 0 {
			continue
		}
		props[g] = gr.schema()
		if len(gr.required) > 0 {
			required = append(required, g)
		}
	}
	return props, required
}

// jsonBody returns the schema of the body argument (nil when the
// operation takes no JSON body) and whether the body is required. A
// required body with no application/json media type is unsupported.
func jsonBody(cv *converter, ref *openapi3.RequestBodyRef) (any, bool, error) {
	if ref == nil || ref.Value == nil {
		return nil, false, nil
	}
	rb := ref.Value
	mt := rb.Content.Get("application/json")
	switch {
	case mt != nil:
		var body any = map[string]any{}
		if mt.Schema != nil {
			body = cv.schema(mt.Schema, 0, 0)
		}
		if rb.Description != "" {
			if m, ok := body.(map[string]any); ok && m["description"] == nil {
				m["description"] = rb.Description
			}
		}
		return body, rb.Required, nil
	case rb.Required:
		return nil, false, &unsupportedError{"the required request body has no application/json media type; only JSON bodies are supported"}
	}
	return nil, false, nil
}

// unknownOperationError is an operationId of tools.operations that the
// document lacks.
type unknownOperationError struct {
	index int
	id    string
}

func (e *unknownOperationError) Error() string {
	return fmt.Sprintf("operationId %q does not exist in the document", e.id)
}

// unsupportedError is an operation that cannot be a tool.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

// templateParams returns the {names} of a path template; every templated
// segment must be a whole segment.
func templateParams(tmpl string) ([]string, error) {
	if !strings.HasPrefix(tmpl, "/") {
		return nil, fmt.Errorf("path %q must start with /", tmpl)
	}
	var names []string
	for _, seg := range strings.Split(strings.Trim(tmpl, "/"), "/") {
		if !strings.ContainsAny(seg, "{}") {
			continue
		}
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") || strings.Count(seg, "{") != 1 {
			return nil, fmt.Errorf("path %q: a parameter must be a whole path segment, got %q", tmpl, seg)
		}
		names = append(names, seg[1:len(seg)-1])
	}
	return names, nil
}

// group is one of the path, query and header objects of the grouped
// arguments.
type group struct {
	props    map[string]any
	required []string
}

func newGroup() *group { return &group{props: map[string]any{}} }

func (g *group) has(name string) bool { _, ok := g.props[name]; return ok }

func (g *group) add(name string, s any, required bool) {
	g.props[name] = s
	if required && !slices.Contains(g.required, name) {
		g.required = append(g.required, name)
	}
}

func (g *group) schema() map[string]any {
	s := map[string]any{"type": "object", "properties": g.props, "additionalProperties": false}
	if len(g.required) > 0 {
		sort.Strings(g.required)
		s["required"] = g.required
	}
	return s
}

// stringSchema is the schema of a header parameter: a string, with the
// description of s.
func stringSchema(s any) map[string]any {
	out := map[string]any{"type": "string"}
	if m, ok := s.(map[string]any); ok {
		if d, ok := m["description"]; ok {
			out["description"] = d
		}
	}
	return out
}

// describeOperation is an operation tool's description for the model.
func describeOperation(c *Connection, op *Operation) string {
	var b strings.Builder
	switch {
	case op.Summary != "" && op.Description != "" && op.Description != op.Summary:
		b.WriteString(op.Summary + "\n\n" + op.Description)
	case op.Summary != "":
		b.WriteString(op.Summary)
	default:
		b.WriteString(op.Description)
	}
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "%s %s on the %q API.", op.Method, op.Template, c.Name)
	switch tier := confirm.OperationTier(c.Policy, op.Method, op.Template); tier {
	case agentd.TierConfirm:
		b.WriteString(" It needs the user's approval: the call waits for it and runs once approved; do not retry it.")
	case agentd.TierReview:
		b.WriteString(" The agent may not run it: it needs a human review outside this conversation.")
	case agentd.TierNever:
		b.WriteString(" The agent is not allowed to run it.")
	}
	b.WriteString(" Arguments are grouped: path, query, header, body.")
	return schema.Truncate(b.String(), maxToolDescription)
}
