package connections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/schema"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ServerID is the server_id of the request tool's calls.
const ServerID = "connections"

// maxErrorBody bounds the response body quoted in the error of a failed
// (HTTP status >= 400) call.
const maxErrorBody = 2 << 10

// RequestTool is the built-in request tool (SPEC §3): one HTTP request to
// one of the project's connections per call. It is a tool source
// (toolset.Source, ID ServerID) with this one tool, and safe for
// concurrent use.
type RequestTool struct {
	conns  map[string]*Connection
	names  []string // sorted
	params json.RawMessage
	schema *jsonschema.Schema
	view   *confirm.Tool
	// tenants are the tenants that see the tool: those of the connections
	// it reaches together; nil when one of them allows every tenant.
	tenants []string
}

// NewRequestTool returns the request tool over the connections that expose
// it (tools.request, default true), or nil when none does.
func NewRequestTool(conns []*Connection) *RequestTool {
	t := &RequestTool{conns: map[string]*Connection{}}
	views := map[string]*confirm.ConnectionPolicy{}
	for _, c := range conns {
		if c == nil || !c.requestTool {
			continue
		}
		if _, dup := t.conns[c.Name]; dup {
			continue
		}
		t.conns[c.Name] = c
		t.names = append(t.names, c.Name)
		views[c.Name] = c.Confirm()
	}
	if len(t.names) == 0 {
		return nil
	}
	slices.Sort(t.names)
	t.tenants = unionTenants(t.names, t.conns)
	t.params = requestParameters(t.names)
	sch, err := schema.Compile(confirm.RequestToolName, t.params)
	if err != nil { // the schema is ours: a failure is a bug
		panic(fmt.Sprintf("connections: request tool schema: %v", err))
	}
	t.schema = sch
	t.view = &confirm.Tool{
		Name: confirm.RequestToolName, ServerID: ServerID, Kind: confirm.KindRequest,
		Connections: views, Validate: t.validate,
	}
	return t
}

// unionTenants is the tenants of the named connections together, sorted;
// nil when one of them allows every tenant.
func unionTenants(names []string, conns map[string]*Connection) []string {
	var all []string
	for _, name := range names {
		ids := conns[name].tenants
		if ids == nil {
			return nil
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// requestParameters is the request tool's JSON Schema.
func requestParameters(names []string) json.RawMessage {
	scalar := []string{"string", "number", "boolean"}
	s := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"connection": map[string]any{"type": "string", "enum": names, "description": "The connection (API) to call."},
			"method":     map[string]any{"type": "string", "enum": []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}, "description": "The HTTP method."},
			"endpoint": map[string]any{"type": "string", "minLength": 1, "maxLength": 2048,
				"description": "path relative to the connection's base URL, e.g. /orders/A-1001; no scheme, host, query or '..'"},
			"params": map[string]any{"type": "object", "description": "Query parameters.",
				"additionalProperties": map[string]any{"type": append(scalar, "array"), "items": map[string]any{"type": scalar}}},
			"data":    map[string]any{"description": "The JSON request body, if any."},
			"headers": map[string]any{"type": "object", "description": "Extra request headers. Credentials are added by the connection and cannot be set here.", "additionalProperties": map[string]any{"type": "string"}},
			"intent": map[string]any{"type": "string", "enum": []string{confirm.IntentRead, confirm.IntentWrite, confirm.IntentConfirmedWrite},
				"description": `"read" for a request that only reads, "write" for one that changes data ("confirmed_write" is set by the runtime once the user approved).`},
		},
		"required":             []string{"connection", "method", "endpoint", "intent"},
		"additionalProperties": false,
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Spec returns the tool as the model sees it: its description lists every
// connection with its description, base path and policy endpoints.
func (t *RequestTool) Spec() agentd.ToolSpec {
	var b strings.Builder
	b.WriteString("Make one HTTP request to one of the project's APIs (connections); one call per request. ")
	b.WriteString(`Declare "intent": "read" for a request that only reads and "write" for one that changes data (POST, PUT, PATCH, DELETE need "write" unless the endpoint is listed as a read). `)
	b.WriteString("Writes may need the user's approval: a call with intent write to an endpoint that needs confirmation waits for the user, and runs by itself once approved, so do not retry it. ")
	b.WriteString("The endpoint is a path relative to the connection's base URL; query parameters go in params, the JSON body in data. Credentials are added automatically.\n\nConnections:")
	for _, name := range t.names {
		c := t.conns[name]
		fmt.Fprintf(&b, "\n- %s", name)
		if c.Description != "" {
			fmt.Fprintf(&b, ": %s", c.Description)
		}
		if bp := c.BasePath(); bp != "" {
			fmt.Fprintf(&b, " (base path %s)", bp)
		}
		if c.Policy != nil && len(c.Policy.Endpoints) > 0 {
			keys := make([]string, 0, len(c.Policy.Endpoints))
			for _, ep := range c.Policy.Endpoints {
				keys = append(keys, ep.Key)
			}
			fmt.Fprintf(&b, "; endpoints: %s", strings.Join(keys, ", "))
		}
	}
	return agentd.ToolSpec{Name: confirm.RequestToolName, Description: b.String(), Parameters: t.params}
}

// Confirm returns what package confirm classifies a call with. It is
// built once; the same value is returned on every call.
func (t *RequestTool) Confirm() *confirm.Tool { return t.view }

// ID is ServerID, the request tool's server_id.
func (t *RequestTool) ID() string { return ServerID }

// Tools lists the request tool, llm_callable and not idempotent (a request
// interrupted by a crash is not re-sent).
func (t *RequestTool) Tools() []toolset.Tool {
	return []toolset.Tool{{Spec: t.Spec(), Confirm: t.view, LLMCallable: true,
		Origin: ServerID + " (the request tool)", TenantIDs: t.tenants}}
}

// Connections returns the names of the connections the tool reaches, sorted.
func (t *RequestTool) Connections() []string { return append([]string(nil), t.names...) }

// validate upper-cases "method", checks the arguments against the schema
// and returns them compacted.
func (t *RequestTool) validate(args json.RawMessage) (json.RawMessage, error) {
	obj, err := argsObject(confirm.RequestToolName, args)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: must be a JSON object", confirm.RequestToolName)
	}
	var method string
	if raw, ok := m["method"]; ok && json.Unmarshal(raw, &method) == nil && method != strings.ToUpper(method) {
		m["method"], _ = json.Marshal(strings.ToUpper(method))
		if obj, err = marshalNoEscape(m); err != nil {
			return nil, fmt.Errorf("invalid arguments for tool %q: %v", confirm.RequestToolName, err)
		}
	}
	if err := schema.Validate(t.schema, obj); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: %v", confirm.RequestToolName, err)
	}
	return obj, nil
}

// Execute sends the request of a call that was cleared to run: the one
// recorded on the call when it was classified (confirm.CallTarget), not
// one rebuilt from its arguments. The result is {"status", "body",
// "truncated"}; an HTTP status of 400 or more is an error "HTTP <code>
// <text>: <body>" for the model to read. Every request other than GET and
// HEAD carries Idempotency-Key: <call id>. A call of another tool, one
// that records no request or names no connection of the tool, and one
// whose TenantID the connection's tenant_ids do not list are errors, and
// nothing is sent.
func (t *RequestTool) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	if call.Name != confirm.RequestToolName {
		return nil, fmt.Errorf("tool %q is not the request tool", call.Name)
	}
	tg, err := confirm.CallTarget(call)
	if err != nil {
		return nil, err
	}
	c := t.conns[tg.Connection]
	if c == nil {
		return nil, fmt.Errorf("unknown connection %q", tg.Connection)
	}
	return execute(ctx, c, tg, call)
}

// OperationTool is the native tool of one OpenAPI operation, named
// <connection>__<operationId>, taking grouped arguments {path, query,
// header, body}. Its connection is its tool source (Connection.Tools). It
// is safe for concurrent use.
type OperationTool struct {
	conn *Connection
	op   *Operation
	name string
	view *confirm.Tool
}

func newOperationTool(c *Connection, op *Operation) (*OperationTool, error) {
	name := c.Name + "__" + op.ID
	if !agentd.ValidToolName(name) {
		return nil, fmt.Errorf("operationId %q: the tool name %q must be 1 to 64 letters, digits, '_' or '-'", op.ID, name)
	}
	t := &OperationTool{conn: c, op: op, name: name}
	t.view = &confirm.Tool{
		Name: name, ServerID: c.Name, Kind: confirm.KindOperation,
		Connection: c.Confirm(), Operation: &confirm.Operation{Method: op.Method, Template: op.Template},
		Validate: t.validate,
	}
	return t, nil
}

// Name is the tool's name, <connection>__<operationId>.
func (t *OperationTool) Name() string { return t.name }

// Connection is the connection the tool calls.
func (t *OperationTool) Connection() *Connection { return t.conn }

// Operation is the operation the tool calls.
func (t *OperationTool) Operation() *Operation { return t.op }

// Spec returns the tool as the model sees it.
func (t *OperationTool) Spec() agentd.ToolSpec {
	return agentd.ToolSpec{Name: t.name, Description: describeOperation(t.conn, t.op), Parameters: t.op.Parameters}
}

// Confirm returns what package confirm classifies a call with. It is
// built once; the same value is returned on every call.
func (t *OperationTool) Confirm() *confirm.Tool { return t.view }

// def is the tool as its connection lists it: llm_callable, not
// idempotent (a request interrupted by a crash is not re-sent).
func (t *OperationTool) def() toolset.Tool {
	return toolset.Tool{Spec: t.Spec(), Confirm: t.view, LLMCallable: true,
		Origin: fmt.Sprintf("connection %q", t.conn.Name), TenantIDs: t.conn.tenants}
}

// validate checks grouped arguments against the operation's schema and
// returns them compacted.
func (t *OperationTool) validate(args json.RawMessage) (json.RawMessage, error) {
	obj, err := argsObject(t.name, args)
	if err != nil {
		return nil, err
	}
	if err := schema.Validate(t.op.schema, obj); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: %v", t.name, err)
	}
	return obj, nil
}

// Execute sends the operation's request for a call that was cleared to
// run: the one recorded on the call when it was classified
// (confirm.CallTarget); the result and errors are those of
// RequestTool.Execute, and a call recorded for another connection is an
// error too.
func (t *OperationTool) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	tg, err := confirm.CallTarget(call)
	if err != nil {
		return nil, err
	}
	if tg.Connection != t.conn.Name {
		return nil, fmt.Errorf("the call's request is for connection %q, not %q", tg.Connection, t.conn.Name)
	}
	return execute(ctx, t.conn, tg, call)
}

// ID is the connection's name, the server_id of its operation tools: a
// Connection is the tool source (toolset.Source) of its OpenAPI
// operations.
func (c *Connection) ID() string { return c.Name }

// Tools lists the connection's operation tools, in the order of
// Operations; none without an OpenAPI document.
func (c *Connection) Tools() []toolset.Tool {
	defs := make([]toolset.Tool, 0, len(c.opTools))
	for _, t := range c.opTools {
		defs = append(defs, t.def())
	}
	return defs
}

// Execute runs a call of the operation tool call.Name names (see
// OperationTool.Execute); a name the connection has no tool of is an
// error, and nothing is sent.
func (c *Connection) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	for _, t := range c.opTools {
		if t.name == call.Name {
			return t.Execute(ctx, call)
		}
	}
	return nil, fmt.Errorf("tool %q is not an operation of connection %q", call.Name, c.Name)
}

// Sources returns the tool sources of conns for the tool registry: the
// request tool when a connection exposes it (NewRequestTool), then every
// connection, whose tools are its OpenAPI operations.
func Sources(conns []*Connection) []toolset.Source {
	var out []toolset.Source
	if rt := NewRequestTool(conns); rt != nil {
		out = append(out, rt)
	}
	for _, c := range conns {
		out = append(out, c)
	}
	return out
}

// argsObject returns args compacted, checking it is a JSON object; empty
// args are {}.
func argsObject(tool string, args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		trimmed = []byte("{}")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: not valid JSON", tool)
	}
	if buf.Bytes()[0] != '{' {
		return nil, fmt.Errorf("invalid arguments for tool %q: must be a JSON object", tool)
	}
	return buf.Bytes(), nil
}

func marshalNoEscape(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// toolResult is the result of a connection call.
type toolResult struct {
	Status    int             `json:"status"`
	Body      json.RawMessage `json:"body"`
	Truncated bool            `json:"truncated"`
}

// execute runs tg of call on c and shapes the result. It refuses a call of
// a tenant that c's tenant_ids do not list, whatever was decided before.
func execute(ctx context.Context, c *Connection, tg *confirm.Target, call agentd.ToolCall) (json.RawMessage, error) {
	if !c.Confirm().AllowsTenant(call.TenantID) {
		return nil, fmt.Errorf("connection %q is not available to this tenant", c.Name)
	}
	key := ""
	if tg.Method != http.MethodGet && tg.Method != http.MethodHead {
		key = call.ID
	}
	resp, err := c.Do(ctx, tg, key) // redacted: an echoing server hands the model no credentials
	if err != nil {
		return nil, err
	}
	if resp.Status >= 400 {
		text := fmt.Sprintf("HTTP %d %s", resp.Status, resp.StatusText)
		if b := strings.TrimSpace(bodyText(resp.Body)); b != "" {
			text += ": " + schema.Truncate(b, maxErrorBody)
		}
		return nil, errors.New(text)
	}
	r := toolResult{Status: resp.Status, Body: shapeBody(resp, c.maxResponse), Truncated: resp.Truncated}
	return marshalNoEscape(r)
}

// shapeBody renders a response body as a result's "body": the JSON itself
// (compacted) when the body is complete, valid JSON; otherwise a JSON
// string of at most limit bytes of text ("" for an empty body).
func shapeBody(resp *Response, limit int64) json.RawMessage {
	if !resp.Truncated && len(bytes.TrimSpace(resp.Body)) > 0 && json.Valid(resp.Body) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, resp.Body); err == nil {
			return buf.Bytes()
		}
	}
	s := bodyText(resp.Body)
	if int64(len(s)) > limit { // invalid bytes were replaced: keep the bound
		s = cutRunes(s, int(limit))
	}
	b, _ := marshalNoEscape(s)
	return b
}

// bodyText is a body as text: an incomplete rune at the end (a cut of
// the body) is dropped, invalid UTF-8 is replaced.
func bodyText(b []byte) string {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// cutRunes cuts s to at most n bytes on a rune boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
