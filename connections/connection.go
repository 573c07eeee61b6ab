// Package connections loads a project's connections — its HTTP APIs, each a
// folder connections/<name>/ with a connection.json, an optional
// policy.json and an optional OpenAPI document (SPEC §3) — and provides the
// tools that reach them: the built-in request tool and one native tool per
// OpenAPI operation.
//
// An operation tool's arguments are grouped ({path, query, header, body})
// and checked against a JSON Schema derived from the document. The
// document's paths are relative to the connection's base_url; its
// "servers" are ignored. Only application/json request bodies are
// supported; header parameters the model may not set (credentials, the
// connection's own headers) and cookie parameters are left out.
//
// The outbound client (Connection.Do) enforces the safety rules of SPEC §3
// itself, even though package confirm already checked the call: a request
// never leaves the connection's origin or base path, follows redirects only
// within them, carries the connection's credentials (which the model can
// neither see nor override) and reads a bounded response. Secrets are read
// from environment variables at load time and never appear in an error or
// in a String() result.
package connections

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/strictjson"
)

// Limits and defaults of a connection.
const (
	DefaultTimeout          = 30 * time.Second
	MaxTimeout              = 10 * time.Minute
	DefaultMaxResponseBytes = 64 << 10
	MaxMaxResponseBytes     = 16 << 20
	// maxDocumentBytes bounds an OpenAPI document.
	maxDocumentBytes = 16 << 20
	// maxConfigBytes bounds connection.json and policy.json.
	maxConfigBytes = 1 << 20
)

var (
	connNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)
	envNamePattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Connection is one loaded connection, made by Load (a Connection built
// by hand has no client and cannot Do). It is safe for concurrent use;
// only SetBaseURL changes it after Load.
type Connection struct {
	// Name is the folder name, e.g. "billing".
	Name string
	// Description is connection.json's description, shown to the model.
	Description string
	// Policy is the endpoint policy of policy.json (defaults when absent).
	Policy *confirm.Policy

	mu          sync.RWMutex
	base        *url.URL // scheme and host only are used; see prefix
	prefix      string   // escaped base path without trailing slash; "" for the root
	auth        *credentials
	redacts     []string    // auth.secrets(): what redact replaces
	tenants     []string    // tenant_ids; nil: every tenant
	headers     http.Header // static headers of connection.json
	timeout     time.Duration
	maxResponse int64
	requestTool bool
	document    string // the openapi path as written, "" when none
	ops         []*Operation
	warnings    []string
	opTools     []*OperationTool
	client      *http.Client
	view        *confirm.ConnectionPolicy
}

// credentials are a connection's secrets. String never shows them, and a
// Connection printed with %v or %+v shows only the pointer.
type credentials struct {
	kind     string // "bearer", "header" or "basic"
	header   string // the header name of kind "header"
	value    string // token or header value
	username string
	password string
}

func (c *credentials) String() string   { return "credentials(" + c.kind + ", redacted)" }
func (c *credentials) GoString() string { return c.String() }

// The files as written.
type (
	connectionFile struct {
		BaseURL          *string           `json:"base_url"`
		Auth             json.RawMessage   `json:"auth"`
		Headers          map[string]string `json:"headers"`
		TimeoutMS        *int64            `json:"timeout_ms"`
		MaxResponseBytes *int64            `json:"max_response_bytes"`
		OpenAPI          *string           `json:"openapi"`
		Tools            json.RawMessage   `json:"tools"`
		Description      string            `json:"description"`
		TenantIDs        json.RawMessage   `json:"tenant_ids"`
	}
	authFile struct {
		Type        string  `json:"type"`
		TokenEnv    *string `json:"token_env"`
		Name        *string `json:"name"`
		ValueEnv    *string `json:"value_env"`
		UsernameEnv *string `json:"username_env"`
		PasswordEnv *string `json:"password_env"`
	}
	toolsFile struct {
		Request    *bool    `json:"request"`
		Operations []string `json:"operations"`
	}
)

// Load reads every connections/<name>/ folder of the project in projectDir,
// sorted by name. A project without a connections folder, or with an empty
// one, has no connections (nil, nil). getenv reads the secrets named by
// auth (nil means os.Getenv); it is called only during Load.
//
// Every error starts with the file it is about, relative to projectDir
// (e.g. "connections/billing/policy.json: field ..."), names the field or
// the place in the OpenAPI document, and never contains a secret.
func Load(projectDir string, getenv func(string) string) ([]*Connection, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	root := filepath.Join(projectDir, "connections")
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("connections: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := os.Stat(filepath.Join(root, e.Name()))
		if err != nil || !info.IsDir() {
			continue // a stray file, e.g. a README
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var conns []*Connection
	for _, name := range names {
		c, err := loadOne(filepath.Join(root, name), name, getenv)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func loadOne(dir, name string, getenv func(string) string) (*Connection, error) {
	rel := "connections/" + name
	if !connNamePattern.MatchString(name) {
		return nil, fmt.Errorf("%s: connection name %q must match %s (lower case letters, digits, '_' or '-', starting with a letter, at most 40)",
			rel, name, connNamePattern)
	}
	file := rel + "/connection.json"
	data, err := readBounded(filepath.Join(dir, "connection.json"), maxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing: every connection folder needs a connection.json", file)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c, opsSel, err := parseConnection(data, name, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}

	policyFile := rel + "/policy.json"
	pdata, err := readBounded(filepath.Join(dir, "policy.json"), maxConfigBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		pdata = []byte("{}")
	case err != nil:
		return nil, fmt.Errorf("%s: %w", policyFile, err)
	}
	if c.Policy, err = confirm.ParsePolicy(pdata); err != nil {
		return nil, fmt.Errorf("%s: %w", policyFile, err)
	}
	c.view = &confirm.ConnectionPolicy{Name: c.Name, Policy: c.Policy, CheckHeader: c.checkModelHeader, TenantIDs: c.tenants}

	if c.document != "" {
		docFile := rel + "/" + filepath.ToSlash(filepath.Clean(c.document))
		ops, warnings, err := c.loadOperations(dir, c.document, opsSel)
		var unknown *unknownOperationError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("%s: %w", file, strictjson.FieldErr(fmt.Sprintf("tools.operations[%d]", unknown.index),
				"operationId %q does not exist in %s", unknown.id, c.document))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", docFile, err)
		}
		for _, w := range warnings {
			c.warnings = append(c.warnings, docFile+": "+w)
		}
		c.ops = ops
		for _, op := range ops {
			t, err := newOperationTool(c, op)
			if err != nil {
				return nil, fmt.Errorf("%s: paths.%s.%s: %w", docFile, op.Template, strings.ToLower(op.Method), err)
			}
			c.opTools = append(c.opTools, t)
		}
	}
	return c, nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, errors.New("is a directory")
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return os.ReadFile(path)
}

// parseConnection checks connection.json. opsSel is tools.operations (nil:
// every operation).
func parseConnection(data []byte, name string, getenv func(string) string) (*Connection, []string, error) {
	var f connectionFile
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return nil, nil, err
	}
	c := &Connection{Name: name, Description: strings.TrimSpace(f.Description), timeout: DefaultTimeout,
		maxResponse: DefaultMaxResponseBytes, requestTool: true, headers: http.Header{}}

	if f.BaseURL == nil {
		return nil, nil, strictjson.FieldErr("base_url", `required: the API's absolute http or https URL, e.g. "https://billing.example.com/api"`)
	}
	base, prefix, err := parseBaseURL(*f.BaseURL)
	if err != nil {
		return nil, nil, strictjson.FieldErr("base_url", "%v", err)
	}
	c.base, c.prefix = base, prefix

	if !strictjson.IsNull(f.Auth) {
		if c.auth, err = parseAuth(f.Auth, getenv); err != nil {
			return nil, nil, err
		}
		c.redacts = c.auth.secrets()
	}
	if err := c.setStaticHeaders(f.Headers); err != nil {
		return nil, nil, err
	}
	if err := c.setLimits(f.TimeoutMS, f.MaxResponseBytes); err != nil {
		return nil, nil, err
	}
	if f.OpenAPI != nil {
		if c.document, err = parseDocumentPath(*f.OpenAPI); err != nil {
			return nil, nil, err
		}
	}
	if !strictjson.IsNull(f.TenantIDs) {
		if c.tenants, err = parseTenantIDs(f.TenantIDs); err != nil {
			return nil, nil, err
		}
	}
	var opsSel []string
	if !strictjson.IsNull(f.Tools) {
		if opsSel, err = c.parseTools(f.Tools); err != nil {
			return nil, nil, err
		}
	}
	c.client = c.newClient()
	return c, opsSel, nil
}

// setStaticHeaders checks the headers of connection.json, in name order,
// and sets them on every request of c; the header of c's auth may only be
// set by auth. c.auth must be parsed first.
func (c *Connection) setStaticHeaders(headers map[string]string) error {
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := checkStaticHeader(k, headers[k]); err != nil {
			return strictjson.FieldErr("headers."+k, "%v", err)
		}
		if c.auth != nil && c.auth.kind == "header" && strings.EqualFold(k, c.auth.header) {
			return strictjson.FieldErr("headers."+k, "is the header of auth; set it only there")
		}
		c.headers.Set(k, headers[k])
	}
	return nil
}

// setLimits checks timeout_ms and max_response_bytes (nil: the default
// stays) against MaxTimeout and MaxMaxResponseBytes and sets them on c.
func (c *Connection) setLimits(timeoutMS, maxResponseBytes *int64) error {
	if timeoutMS != nil {
		ms := *timeoutMS
		if ms < 1 || ms > MaxTimeout.Milliseconds() {
			return strictjson.FieldErr("timeout_ms", "must be between 1 and %d, got %d", MaxTimeout.Milliseconds(), ms)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	if maxResponseBytes != nil {
		n := *maxResponseBytes
		if n < 1 || n > MaxMaxResponseBytes {
			return strictjson.FieldErr("max_response_bytes", "must be between 1 and %d (16 MiB), got %d", MaxMaxResponseBytes, n)
		}
		c.maxResponse = n
	}
	return nil
}

// parseDocumentPath checks openapi: a non-empty relative path that stays
// inside the connection folder; it returns the path as written.
func parseDocumentPath(p string) (string, error) {
	switch {
	case p == "":
		return "", strictjson.FieldErr("openapi", "must name a file in the connection folder, e.g. \"openapi.json\"")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || !filepath.IsLocal(p):
		return "", strictjson.FieldErr("openapi", "must be a path inside the connection folder, got %q", p)
	}
	return p, nil
}

// parseTools checks the tools object and sets whether c offers its request
// tool. It returns tools.operations: nil when absent (every operation),
// else the distinct, non-empty operationIds listed, which need c.document.
func (c *Connection) parseTools(raw json.RawMessage) ([]string, error) {
	var tf toolsFile
	if err := strictjson.DecodeStrict(raw, &tf, "tools"); err != nil {
		return nil, err
	}
	if tf.Request != nil {
		c.requestTool = *tf.Request
	}
	if tf.Operations == nil {
		return nil, nil
	}
	if c.document == "" {
		return nil, strictjson.FieldErr("tools.operations", `needs an OpenAPI document: set "openapi"`)
	}
	seen := map[string]bool{}
	for i, id := range tf.Operations {
		if id == "" {
			return nil, strictjson.FieldErr(fmt.Sprintf("tools.operations[%d]", i), "is empty")
		}
		if seen[id] {
			return nil, strictjson.FieldErr(fmt.Sprintf("tools.operations[%d]", i), "%q is listed twice", id)
		}
		seen[id] = true
	}
	return tf.Operations, nil
}

// parseTenantIDs checks tenant_ids: a non-empty array of distinct,
// non-empty tenant ids.
func parseTenantIDs(raw json.RawMessage) ([]string, error) {
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, strictjson.FieldErr("tenant_ids", `must be an array of tenant ids, e.g. ["acme"]`)
	}
	if len(ids) == 0 {
		return nil, strictjson.FieldErr("tenant_ids", "lists no tenant: omit it to let every tenant use the connection")
	}
	for i, id := range ids {
		if id == "" {
			return nil, strictjson.FieldErr(fmt.Sprintf("tenant_ids[%d]", i), "is empty")
		}
		if slices.Contains(ids[:i], id) {
			return nil, strictjson.FieldErr(fmt.Sprintf("tenant_ids[%d]", i), "%q is listed twice", id)
		}
	}
	return ids, nil
}

func parseAuth(raw json.RawMessage, getenv func(string) string) (*credentials, error) {
	var a authFile
	if err := strictjson.DecodeStrict(raw, &a, "auth"); err != nil {
		return nil, err
	}
	// secret reads the variable named by field; the value never appears in
	// an error.
	secret := func(field string, env *string) (string, error) {
		f := "auth." + field
		if env == nil || *env == "" {
			return "", strictjson.FieldErr(f, "required for auth type %q: the name of the environment variable that holds the secret", a.Type)
		}
		if !envNamePattern.MatchString(*env) {
			return "", strictjson.FieldErr(f, "not a valid environment variable name: %q", *env)
		}
		v := getenv(*env)
		if v == "" {
			return "", strictjson.FieldErr(f, "environment variable %s is not set or empty", *env)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return "", strictjson.FieldErr(f, "environment variable %s holds a line break or NUL, which cannot be sent in a header", *env)
		}
		return v, nil
	}
	unused := func(field string, v *string) error {
		if v != nil {
			return strictjson.FieldErr("auth."+field, "not used by auth type %q", a.Type)
		}
		return nil
	}
	c := &credentials{kind: a.Type}
	var err error
	switch a.Type {
	case "bearer":
		if err = errors.Join(unused("name", a.Name), unused("value_env", a.ValueEnv),
			unused("username_env", a.UsernameEnv), unused("password_env", a.PasswordEnv)); err != nil {
			return nil, err
		}
		if c.value, err = secret("token_env", a.TokenEnv); err != nil {
			return nil, err
		}
	case "header":
		if err = errors.Join(unused("token_env", a.TokenEnv),
			unused("username_env", a.UsernameEnv), unused("password_env", a.PasswordEnv)); err != nil {
			return nil, err
		}
		if a.Name == nil || *a.Name == "" {
			return nil, strictjson.FieldErr("auth.name", `required for auth type "header": the header that carries the secret, e.g. "X-API-Key"`)
		}
		if err := confirm.CheckAuthHeader(*a.Name); err != nil {
			return nil, strictjson.FieldErr("auth.name", "%v", err)
		}
		c.header = http.CanonicalHeaderKey(*a.Name)
		if c.value, err = secret("value_env", a.ValueEnv); err != nil {
			return nil, err
		}
	case "basic":
		if err = errors.Join(unused("token_env", a.TokenEnv), unused("name", a.Name), unused("value_env", a.ValueEnv)); err != nil {
			return nil, err
		}
		if c.username, err = secret("username_env", a.UsernameEnv); err != nil {
			return nil, err
		}
		if strings.Contains(c.username, ":") {
			return nil, strictjson.FieldErr("auth.username_env", "environment variable %s holds a ':', which basic auth user names cannot contain", *a.UsernameEnv)
		}
		if c.password, err = secret("password_env", a.PasswordEnv); err != nil {
			return nil, err
		}
	case "":
		return nil, strictjson.FieldErr("auth.type", `required: "bearer", "header" or "basic"`)
	default:
		return nil, strictjson.FieldErr("auth.type", `must be "bearer", "header" or "basic", got %q`, a.Type)
	}
	return c, nil
}

// checkStaticHeader checks one entry of connection.json's headers: a name
// confirm.CheckStaticHeader allows (no credential, which belongs in auth,
// no hop-by-hop, framing, client-set or route header) and a value
// confirm.CheckHeaderValue allows.
func checkStaticHeader(name, value string) error {
	if err := confirm.CheckStaticHeader(name); err != nil {
		return err
	}
	return confirm.CheckHeaderValue(name, value)
}

// parseBaseURL checks a base URL: absolute http or https, a host, no
// userinfo, query or fragment, a clean path. It returns the origin and the
// escaped path prefix without a trailing slash.
func parseBaseURL(s string) (*url.URL, string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("not a valid URL: %q", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "", fmt.Errorf("must be an absolute http or https URL, got %q", s)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, "", fmt.Errorf("must name a host, got %q", s)
	case u.User != nil:
		return nil, "", errors.New("must not carry a user name or password: use auth with environment variables")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, "", fmt.Errorf("must not have a query, got %q", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, "", fmt.Errorf("must not have a fragment, got %q", s)
	}
	prefix := strings.TrimRight(u.EscapedPath(), "/")
	if prefix != "" {
		clean, err := confirm.CleanEndpoint(prefix)
		if err != nil {
			return nil, "", fmt.Errorf("path of %q: %v", s, err)
		}
		prefix = clean
	}
	origin := &url.URL{Scheme: u.Scheme, Host: strings.ToLower(u.Host)}
	return origin, prefix, nil
}

// SetBaseURL points the connection at another base URL, checked like
// connection.json's base_url; the OpenAPI paths and the policy stay
// relative to it. On error nothing changes.
func (c *Connection) SetBaseURL(u string) error {
	base, prefix, err := parseBaseURL(u)
	if err != nil {
		return fmt.Errorf("connection %s: base URL: %w", c.Name, err)
	}
	c.mu.Lock()
	c.base, c.prefix = base, prefix
	c.mu.Unlock()
	return nil
}

// BaseURL returns the base URL requests are made under, without a trailing
// slash. It carries no secret.
func (c *Connection) BaseURL() string {
	base, prefix := c.origin()
	return base.String() + prefix
}

// BasePath returns the escaped path prefix of the base URL ("" for the
// root), e.g. "/api".
func (c *Connection) BasePath() string {
	_, prefix := c.origin()
	return prefix
}

func (c *Connection) origin() (*url.URL, string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.base, c.prefix
}

// Timeout is the connection's request timeout (timeout_ms).
func (c *Connection) Timeout() time.Duration { return c.timeout }

// MaxResponseBytes is how much of a response body is read
// (max_response_bytes).
func (c *Connection) MaxResponseBytes() int64 { return c.maxResponse }

// AuthType is the auth type ("bearer", "header", "basic"), "" for none.
func (c *Connection) AuthType() string {
	if c.auth == nil {
		return ""
	}
	return c.auth.kind
}

// TenantIDs returns connection.json's tenant_ids: the tenants that may use
// the connection; nil means every tenant.
func (c *Connection) TenantIDs() []string { return slices.Clone(c.tenants) }

// RequestTool reports whether the connection is reachable through the
// request tool (tools.request, default true).
func (c *Connection) RequestTool() bool { return c.requestTool }

// Operations returns the exposed OpenAPI operations, sorted by path and
// method; nil without an OpenAPI document.
func (c *Connection) Operations() []*Operation { return c.ops }

// Warnings lists what Load skipped, each naming the file and the place:
// operations of the document that cannot be tools.
func (c *Connection) Warnings() []string { return c.warnings }

// OperationTools returns one tool per exposed operation, in the order of
// Operations. The same tools are returned on every call.
func (c *Connection) OperationTools() []*OperationTool { return c.opTools }

// Confirm returns the connection's policy as package confirm sees it. It is
// created once at load and shared.
func (c *Connection) Confirm() *confirm.ConnectionPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == nil { // a Connection not made by Load
		c.view = &confirm.ConnectionPolicy{Name: c.Name, Policy: c.Policy, CheckHeader: c.checkModelHeader, TenantIDs: c.tenants}
	}
	return c.view
}

// String describes the connection without its secrets.
func (c *Connection) String() string {
	s := fmt.Sprintf("connection %s (%s", c.Name, c.BaseURL())
	if c.auth != nil {
		s += ", " + c.auth.kind + " auth"
	}
	return s + ")"
}

// GoString is String, so that %#v shows no secret either.
func (c *Connection) GoString() string { return c.String() }
