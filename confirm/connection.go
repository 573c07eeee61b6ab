package confirm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/strictjson"
)

// Tool kinds.
const (
	KindCustom    = ""          // a custom tool (tools/<name>/tool.json)
	KindRequest   = "request"   // the built-in request tool
	KindOperation = "operation" // a native OpenAPI operation tool
)

// RequestToolName is the name of the built-in request tool.
const RequestToolName = "request"

// Intents of a request-tool call (SPEC §3).
const (
	IntentRead           = "read"
	IntentWrite          = "write"
	IntentConfirmedWrite = "confirmed_write"
)

// Mode is the execution context of a call (SPEC §2.3).
type Mode int

const (
	// ModeLoop is a model-selected call of the agent loop: confirm parks.
	ModeLoop Mode = iota
	// ModeDurable is the durable/workflow path: a confirm-tier call without
	// intent confirmed_write gets a preview; confirmed_write runs.
	ModeDurable
)

// ConnectionPolicy is a connection as package confirm sees it when it
// classifies a call: its name, endpoint policy, header rule and tenants.
type ConnectionPolicy struct {
	Name   string
	Policy *Policy
	// CheckHeader, when set, refuses model headers the connection sets
	// itself (its static headers, its auth header); it must be pure.
	CheckHeader func(name string) error
	// TenantIDs are the tenants that may use the connection (its
	// credential acts for each of them); nil means every tenant.
	TenantIDs []string
}

// AllowsTenant reports whether the tenant may use the connection: TenantIDs
// is nil or lists it (exactly, case included).
func (c *ConnectionPolicy) AllowsTenant(tenantID string) bool {
	return c.TenantIDs == nil || slices.Contains(c.TenantIDs, tenantID)
}

// Operation is the HTTP operation behind an OpenAPI operation tool.
type Operation struct {
	Method   string // upper case
	Template string // path template relative to the connection's base_url
}

// Target is the HTTP request a connection call makes, derived purely from
// the effective arguments.
type Target struct {
	Connection string
	Method     string
	// Path is the clean request path relative to the connection's base_url
	// (see CleanEndpoint).
	Path string
	// Template is the path template of the matching policy endpoint or of
	// the operation; "" when neither applies.
	Template string
	Query    url.Values
	Header   map[string]string
	Body     json.RawMessage // nil: no body
	Intent   string          // request tool only
	// Grouped are the grouped arguments {path, query, header, body} that
	// thresholds and the card see.
	Grouped json.RawMessage
}

// Write reports whether the method changes data.
func (t *Target) Write() bool { return !safeMethod(t.Method) }

func safeMethod(m string) bool { return m == "GET" || m == "HEAD" || m == "OPTIONS" }

// Methods the request tool accepts.
var requestMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// CleanEndpoint checks a request path relative to a connection's base_url
// and returns it in canonical form ("/a/b", each segment percent-encoded
// once). It refuses anything that could leave the base_url's origin or
// path prefix: absolute URLs, "//host", backslashes, dot segments (also
// percent-encoded), encoded slashes, double encoding, queries and
// fragments, and what CheckShown refuses (control and bidirectional
// formatting characters), also once decoded.
func CleanEndpoint(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("endpoint is empty")
	}
	if len(p) > 2048 {
		return "", fmt.Errorf("endpoint is longer than 2048 bytes")
	}
	if strings.Contains(p, "://") || strings.HasPrefix(p, "//") || strings.Contains(p, `\`) {
		return "", fmt.Errorf("endpoint %q must be a path relative to the connection's base_url, not a URL", p)
	}
	if !strings.HasPrefix(p, "/") {
		if i := strings.IndexAny(p, ":/"); i >= 0 && p[i] == ':' {
			return "", fmt.Errorf("endpoint %q must be a path relative to the connection's base_url, not a URL", p)
		}
		p = "/" + p
	}
	if strings.ContainsAny(p, "?#") {
		return "", fmt.Errorf("endpoint %q must not carry a query or fragment: put query parameters in params", p)
	}
	if err := CheckShown(p); err != nil {
		return "", fmt.Errorf("endpoint refused: %v", err)
	}
	parts := splitPath(p)
	out := make([]string, 0, len(parts))
	for _, raw := range parts {
		seg, err := cleanSegment(p, raw)
		if err != nil {
			return "", err
		}
		out = append(out, url.PathEscape(seg))
	}
	return "/" + strings.Join(out, "/"), nil
}

// cleanSegment decodes one raw segment of the endpoint p and refuses what
// CleanEndpoint refuses in a segment.
func cleanSegment(p, raw string) (string, error) {
	seg, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: bad percent-encoding", p)
	}
	if raw == "" {
		return "", fmt.Errorf("endpoint %q has an empty segment", p)
	}
	if seg == "." || seg == ".." {
		return "", fmt.Errorf("endpoint %q has a dot segment; paths may not climb out of the connection's base path", p)
	}
	if strings.Trim(seg, ".") == "" {
		return "", fmt.Errorf("endpoint %q has a segment of only dots", p)
	}
	if !utf8.ValidString(seg) {
		return "", fmt.Errorf("endpoint %q is not valid UTF-8 once decoded", p)
	}
	if strings.ContainsAny(seg, `/\`) {
		return "", fmt.Errorf("endpoint %q has an encoded slash", p)
	}
	if strings.Contains(seg, "%") {
		return "", fmt.Errorf("endpoint %q is encoded twice", p)
	}
	if err := CheckShown(seg); err != nil {
		return "", fmt.Errorf("endpoint refused once decoded: %v", err)
	}
	return seg, nil
}

// The arguments of the request tool and of operation tools.
type (
	requestArgs struct {
		Connection string            `json:"connection"`
		Method     string            `json:"method"`
		Endpoint   string            `json:"endpoint"`
		Params     map[string]any    `json:"params"`
		Data       json.RawMessage   `json:"data"`
		Headers    map[string]string `json:"headers"`
		Intent     string            `json:"intent"`
	}
	operationArgs struct {
		Path   map[string]any    `json:"path"`
		Query  map[string]any    `json:"query"`
		Header map[string]string `json:"header"`
		Body   json.RawMessage   `json:"body"`
	}
)

// Resolve derives the HTTP request of a connection call from its
// effective arguments. It fails, with a message for the model, on
// arguments no request can be made of: an unknown connection, a method the
// request tool does not take, an unsafe endpoint, a forbidden header, a
// missing path parameter.
func Resolve(t *Tool, args json.RawMessage) (*Target, error) {
	switch t.Kind {
	case KindRequest:
		return resolveRequest(t, args)
	case KindOperation:
		return resolveOperation(t, args)
	}
	return nil, fmt.Errorf("tool %q does not make HTTP requests", t.Name)
}

func resolveRequest(t *Tool, args json.RawMessage) (*Target, error) {
	var a requestArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("arguments of the request tool: %v", err)
	}
	conn, ok := t.Connections[a.Connection]
	if !ok {
		return nil, fmt.Errorf("unknown connection %q (available: %s)", a.Connection, strings.Join(t.connectionNames(), ", "))
	}
	m := strings.ToUpper(a.Method)
	if !slices.Contains(requestMethods, m) {
		return nil, fmt.Errorf("method %q is not supported (use one of %s)", a.Method, strings.Join(requestMethods, ", "))
	}
	switch a.Intent {
	case IntentRead, IntentWrite, IntentConfirmedWrite:
	default:
		return nil, fmt.Errorf(`intent must be "read", "write" or "confirmed_write", got %q`, a.Intent)
	}
	path, err := CleanEndpoint(a.Endpoint)
	if err != nil {
		return nil, err
	}
	q, err := queryValues(a.Params, "params")
	if err != nil {
		return nil, err
	}
	if err := checkHeaders(conn, a.Headers); err != nil {
		return nil, err
	}
	tg := &Target{Connection: a.Connection, Method: m, Path: path, Query: q, Header: a.Headers, Intent: a.Intent, Body: bodyOf(a.Data)}
	return tg, nil
}

func resolveOperation(t *Tool, args json.RawMessage) (*Target, error) {
	if t.Connection == nil || t.Operation == nil {
		return nil, fmt.Errorf("tool %q has no operation", t.Name)
	}
	var a operationArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("arguments of %s: %v", t.Name, err)
	}
	segs := splitPath(t.Operation.Template)
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			name := s[1 : len(s)-1]
			v, ok := a.Path[name]
			if !ok {
				return nil, fmt.Errorf("missing path parameter %q", name)
			}
			str, ok := scalarString(v)
			if !ok || str == "" {
				return nil, fmt.Errorf("path parameter %q must be a non-empty string, number or boolean", name)
			}
			segs[i] = url.PathEscape(str)
		}
	}
	path, err := CleanEndpoint("/" + strings.Join(segs, "/"))
	if err != nil {
		return nil, err
	}
	q, err := queryValues(a.Query, "query")
	if err != nil {
		return nil, err
	}
	if err := checkHeaders(t.Connection, a.Header); err != nil {
		return nil, err
	}
	tg := &Target{Connection: t.Connection.Name, Method: t.Operation.Method, Path: path,
		Template: t.Operation.Template, Query: q, Header: a.Header, Body: bodyOf(a.Body)}
	return tg, nil
}

// bodyOf is the request body that arguments' data (or body) raw sends:
// nil when raw is absent or JSON null, else raw as written.
func bodyOf(raw json.RawMessage) json.RawMessage {
	if b := string(bytes.TrimSpace(raw)); b == "" || b == "null" {
		return nil
	}
	return raw
}

// checkHeaders refuses model headers whose name CheckHeader or the
// connection refuses, or whose value CheckHeaderValue refuses, in name
// order so the message is stable.
func checkHeaders(conn *ConnectionPolicy, h map[string]string) error {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := CheckHeader(k); err != nil {
			return err
		}
		if conn != nil && conn.CheckHeader != nil {
			if err := conn.CheckHeader(k); err != nil {
				return err
			}
		}
		if err := CheckHeaderValue(k, h[k]); err != nil {
			return err
		}
	}
	return nil
}

func queryValues(params map[string]any, field string) (url.Values, error) {
	if len(params) == 0 {
		return nil, nil
	}
	q := url.Values{}
	for k, v := range params {
		if s, ok := scalarString(v); ok {
			q.Add(k, s)
			continue
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s.%s must be a string, number, boolean or an array of them", field, k)
		}
		for _, e := range list {
			s, ok := scalarString(e)
			if !ok {
				return nil, fmt.Errorf("%s.%s must be a string, number, boolean or an array of them", field, k)
			}
			q.Add(k, s)
		}
	}
	return q, nil
}

func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func (t *Tool) connectionNames() []string {
	names := make([]string, 0, len(t.Connections))
	for n := range t.Connections {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// grouped returns the grouped arguments {path, query, header, body}. The
// body is kept byte for byte (no HTML escaping): CallTarget sends it.
func grouped(tg *Target, pathParams map[string]string) json.RawMessage {
	g := map[string]any{"path": map[string]string{}, "header": map[string]string{}, "body": nil}
	if pathParams != nil {
		g["path"] = pathParams
	}
	q := map[string]any{}
	for k, vs := range tg.Query {
		if len(vs) == 1 {
			q[k] = vs[0]
		} else {
			q[k] = vs
		}
	}
	g["query"] = q
	if tg.Header != nil {
		g["header"] = tg.Header
	}
	if tg.Body != nil {
		g["body"] = tg.Body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(g) // strings, maps and valid JSON only
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// lookupNumber returns the largest number at a dot path of the grouped
// arguments. Keys match regardless of case at every step (many servers
// bind JSON and query keys that way, so "Amount" must not dodge a threshold
// on "body.amount"), and an array counts by its largest element. In body
// only JSON numbers count; path, query and header values are strings on
// the wire, so there a string holding a number counts too.
func lookupNumber(doc json.RawMessage, path string) (float64, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0, false
	}
	keys := strings.Split(path, ".")
	return maxNumber(v, keys, keys[0] != "body")
}

func maxNumber(v any, keys []string, strs bool) (float64, bool) {
	if len(keys) == 0 {
		switch x := v.(type) {
		case json.Number:
			f, err := x.Float64()
			return f, err == nil
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); strs && err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f, true
			}
		case []any:
			best, found := math.Inf(-1), false
			for _, e := range x {
				if f, ok := maxNumber(e, nil, strs); ok {
					best, found = max(best, f), true
				}
			}
			return best, found
		}
		return 0, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return 0, false
	}
	best, found := math.Inf(-1), false
	for k, sub := range m {
		if !strings.EqualFold(k, keys[0]) {
			continue
		}
		if f, ok := maxNumber(sub, keys[1:], strs); ok {
			best, found = max(best, f), true
		}
	}
	return best, found
}

// checkKeys refuses JSON objects with two keys that are equal or differ
// only by case: servers disagree on which one wins, so the value the
// policy saw might not be the value that runs.
func checkKeys(doc json.RawMessage) error { return strictjson.CheckKeys(doc) }
