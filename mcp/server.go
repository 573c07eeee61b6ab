// Package mcp makes MCP servers tool sources (SPEC §4.2), on the official
// Go SDK (github.com/modelcontextprotocol/go-sdk). Each server of a
// project's mcp.json is one toolset.Source whose ID is the server's id and
// whose tools are the server's, named <id>__<tool>, with the server's own
// input schema. A stdio server is a subprocess agentd starts, watches and
// starts again with backoff when it dies; a streamable HTTP server is
// reached at its URL with headers read from the environment, and reached
// again with backoff once it is found gone (a failed call whose ping
// fails too, or the keepalive ping). A server's
// text (descriptions, annotations) is shown to the model but is never
// configuration: a tool is auto only when mcp.json's tiers say so or its
// server is listed in trust_annotations and annotates it readOnlyHint.
//
// The package imports the domain, confirm and toolset, never the loop
// (docs/architecture.md, "A new tool source"); package server starts the
// servers and hands them to the registry. docs/mcp.md is the user's page.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/origin"
	"github.com/agentd-dev/agentd/internal/schema"
	"github.com/agentd-dev/agentd/internal/tracing"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// Server states, as Status reports them.
const (
	StateReady    = "ready"    // connected; its tools are listed
	StateStarting = "starting" // connecting, or waiting to start again after a failure
	StateStopped  = "stopped"  // closed
)

// Restart backoff of a server that failed: it doubles from minBackoff up
// to maxBackoff, and starts again from minBackoff after a server stayed up
// for healthyRun. startTimeout bounds one connect and tool listing.
var (
	minBackoff   = 250 * time.Millisecond
	maxBackoff   = 30 * time.Second
	healthyRun   = time.Minute
	startTimeout = 20 * time.Second
	// pingTimeout bounds the ping after a failed call (check).
	pingTimeout = agentd.DefaultMCPPingTimeout
	// keepAlive is how often an HTTP server is pinged.
	keepAlive = agentd.DefaultMCPKeepAlive
)

var _ toolset.Changing = (*Server)(nil)

// Server is one MCP server of mcp.json as a tool source. Start connects
// it; Close stops it. It is safe for concurrent use.
type Server struct {
	cfg   ServerConfig
	tiers map[string]agentd.Tier
	// approval is mcp.json "approval" by tool name.
	approval map[string]*agentd.ApprovalRule
	trust    bool
	log      zerolog.Logger
	client   *sdk.Client

	mu       sync.Mutex
	defs     []toolset.Tool // the tools as the registry gets them, sorted by name
	print    string         // what defs were built from (rebuild)
	version  uint64         // moves with defs
	session  *sdk.ClientSession
	pid      int
	state    string
	lastErr  string
	restarts int
	offered  map[string]*sdk.Tool // the server's tools now, by agentd name
	// relisting is true while a relist runs (relists); again asks it for
	// one more, of relistSess, the session of the last list_changed.
	relisting, again bool
	relistSess       *sdk.ClientSession
	leftOut          []LeftOut // the tools not offered, at most maxLeftOut

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Status is what /readyz and the log say of a server. It is described in
// the API's OpenAPI document too (api/openapi_paths.go
// mcpServerStatus); the end-to-end tests validate /readyz against it.
type Status struct {
	ID string `json:"id"`
	// Transport is "stdio" or "http".
	Transport string `json:"transport"`
	State     string `json:"state"`
	// Error is the last failure ("" when none since the last start).
	Error    string `json:"error,omitempty"`
	Restarts int    `json:"restarts"`
	// Tools are the server's tools offered now, by agentd name.
	Tools []string `json:"tools"`
	// LeftOut are the server's tools not offered (a name a model may not
	// be offered, an input schema that does not compile), at most
	// maxLeftOut of them.
	LeftOut []LeftOut `json:"left_out,omitempty"`
	// PID is a stdio server's process id (0 when none runs).
	PID int `json:"pid,omitempty"`
}

// NewServers returns a Server per configured server, not started.
func NewServers(cfg *Config, log zerolog.Logger) []*Server {
	if cfg == nil {
		return nil
	}
	out := make([]*Server, 0, len(cfg.Servers))
	for _, sc := range cfg.Servers {
		out = append(out, newServer(sc, cfg, log))
	}
	return out
}

func newServer(sc ServerConfig, cfg *Config, log zerolog.Logger) *Server {
	s := &Server{cfg: sc, tiers: cfg.Tiers, approval: cfg.Approval, trust: cfg.Trust[sc.ID], state: StateStarting,
		log: log.With().Str("mcp_server", sc.ID).Logger()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var every time.Duration
	if sc.URL != "" {
		// A stdio server's death is seen at once (its process exits); an
		// HTTP server's only by a request that fails.
		every = keepAlive
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "agentd", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		KeepAlive:    every,
		ToolListChangedHandler: func(_ context.Context, req *sdk.ToolListChangedRequest) {
			s.listChanged(req.Session)
		},
	})
	return s
}

// ID is the server's id: the server_id of its tools.
func (s *Server) ID() string { return s.cfg.ID }

// Start connects the server and lists its tools, now. A server that
// fails to start is logged and reported by Status, has no tools, and is
// tried again in the background with backoff (its tools appear when it is
// up); Start's error only says so, the caller carries on without it.
// Start then watches the server until Close.
func (s *Server) Start(ctx context.Context) error {
	err := s.connect(ctx)
	s.wg.Go(s.watch)
	return err
}

// watch waits for the session to end and connects again with backoff,
// until Close.
func (s *Server) watch() {
	backoff := minBackoff
	for {
		s.mu.Lock()
		sess := s.session
		s.mu.Unlock()
		if sess != nil {
			up := time.Now()
			err := sess.Wait()
			if s.ctx.Err() != nil {
				return
			}
			s.down(sess, fmt.Errorf("the server stopped: %v", orExited(err)))
			if time.Since(up) >= healthyRun {
				backoff = minBackoff
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
		if err := s.connect(s.ctx); err == nil {
			s.mu.Lock()
			s.restarts++
			s.mu.Unlock()
			s.log.Info().Msg("MCP server started again")
		}
	}
}

func orExited(err error) error {
	if err == nil {
		return errors.New("exited")
	}
	return err
}

// connect starts or reaches the server and lists its tools; a failure is
// recorded (Status, the log).
func (s *Server) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	transport, cmd := s.transport()
	sess, err := s.client.Connect(ctx, transport, nil)
	if err != nil {
		return s.fail(fmt.Errorf("connect: %w", err))
	}
	tools, err := list(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return s.fail(fmt.Errorf("list tools: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		_ = sess.Close()
		return s.ctx.Err()
	}
	s.session, s.state, s.lastErr = sess, StateReady, ""
	s.rebuild(tools)
	s.pid = 0
	if cmd != nil && cmd.Process != nil {
		s.pid = cmd.Process.Pid
	}
	return nil
}

// fail records a failure to start.
func (s *Server) fail(err error) error {
	err = fmt.Errorf("MCP server %q: %w", s.cfg.ID, err)
	s.mu.Lock()
	if s.ctx.Err() == nil {
		s.state, s.lastErr = StateStarting, err.Error()
	}
	s.mu.Unlock()
	s.log.Error().Err(err).Msg("MCP server failed to start; trying again")
	return err
}

// down records that sess ended, once.
func (s *Server) down(sess *sdk.ClientSession, err error) {
	s.mu.Lock()
	current := s.session == sess
	if current {
		s.session, s.pid, s.state, s.lastErr = nil, 0, StateStarting, err.Error()
	}
	s.mu.Unlock()
	if current {
		s.log.Error().Err(err).Msg("MCP server is down; starting it again")
	}
}

// check pings sess after one of its calls failed, and ends the session
// when the ping fails too, so that watch connects again. The SDK does not
// end a session by itself when a request fails to reach an HTTP server
// (its standalone SSE stream notices only after its own retries, many
// seconds later), so without this a server that went away would stay
// "ready" in /readyz with a dead session.
func (s *Server) check(sess *sdk.ClientSession) {
	ctx, cancel := context.WithTimeout(s.ctx, pingTimeout)
	defer cancel()
	err := sess.Ping(ctx, nil)
	if err == nil || answered(err) || s.ctx.Err() != nil {
		return // it answered (an error answer too: a server without ping is alive)
	}
	s.down(sess, fmt.Errorf("the server does not answer: %v", err))
	_ = sess.Close()
}

// transport is the server's transport; cmd is a stdio server's process.
func (s *Server) transport() (sdk.Transport, *exec.Cmd) {
	if s.cfg.URL != "" {
		hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: s.cfg.Headers},
			CheckRedirect: sameOrigin(s.cfg.URL)}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, nil
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = environ(s.cfg.Env)
	cmd.Stderr = stderrLog{s.log}
	setProcAttr(cmd)
	return &stdioTransport{cmd: cmd, grace: 2 * time.Second, log: s.log}, cmd
}

// list lists every tool of the session, page by page.
func list(ctx context.Context, sess *sdk.ClientSession) ([]*sdk.Tool, error) {
	var out []*sdk.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// maxLeftOut bounds the tools Status lists as left out.
const maxLeftOut = 20

// LeftOut is a tool of the server that agentd does not offer, and why.
type LeftOut struct {
	// Tool is the tool's agentd name, escaped (Go string escapes, so a
	// control or bidi character shows as \u202e) and cut to 100 bytes.
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

// Why a tool is left out.
const (
	badName   = "its name is not 1 to 64 of the letters A-Z a-z, digits, '_' and '-' (what model providers accept)"
	badSchema = "its input schema is not valid"
)

// shown is a tool name as Status and the log show it: escaped, bounded.
func shown(name string) string {
	q := strconv.Quote(agentd.TruncateUTF8(name, 100))
	return q[1 : len(q)-1]
}

// named keys the server's tools by agentd name (<id>__<tool>); a tool
// whose agentd name may not be offered to a model (agentd.ValidToolName),
// or that has no name, is left out.
func (s *Server) named(tools []*sdk.Tool) (map[string]*sdk.Tool, []LeftOut) {
	m := make(map[string]*sdk.Tool, len(tools))
	var out []LeftOut
	for _, t := range tools {
		name := s.cfg.ID + "__" + t.Name
		if t.Name == "" || !agentd.ValidToolName(name) {
			out = append(out, LeftOut{Tool: shown(name), Reason: badName})
			continue
		}
		m[name] = t
	}
	return m, out
}

// listChanged takes notifications/tools/list_changed of sess: one relist
// runs at a time, and a notification that comes meanwhile asks for one
// more after it (however many come), so a flood of notifications costs two
// listings, not one each. Listing runs apart from the notification's
// handler, which could otherwise wait on the connection that delivers it.
func (s *Server) listChanged(sess *sdk.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relistSess = sess
	if s.ctx.Err() != nil {
		return // closed
	}
	if s.relisting {
		s.again = true
		return
	}
	s.relisting = true
	s.wg.Go(s.relists)
}

// relists relists until no notification asked for another.
func (s *Server) relists() {
	for {
		s.mu.Lock()
		sess := s.relistSess
		s.again = false
		s.mu.Unlock()
		s.relist(sess)
		s.mu.Lock()
		s.relisting = s.again
		done := !s.relisting
		s.mu.Unlock()
		if done {
			return
		}
	}
}

// relist reads the server's tools again after notifications/tools/list_changed.
func (s *Server) relist(sess *sdk.ClientSession) {
	ctx, cancel := context.WithTimeout(s.ctx, startTimeout)
	defer cancel()
	tools, err := list(ctx, sess)
	if err != nil {
		s.log.Warn().Err(err).Msg("MCP server said its tools changed, but listing them failed")
		return
	}
	s.mu.Lock()
	if s.session == sess {
		s.rebuild(tools)
	}
	st := s.statusLocked()
	s.mu.Unlock()
	s.log.Info().Strs("tools", st.Tools).Msg("MCP server's tools changed")
}

// rebuild takes the server's tools as listed now; the tools the registry
// gets (defs) change, with the version, only when one of them does. A tool
// left out is logged (once per change) and listed by Status. It holds s.mu.
func (s *Server) rebuild(tools []*sdk.Tool) {
	print, _ := json.Marshal(tools) // each field the defs come from
	if string(print) == s.print && s.defs != nil {
		return
	}
	offered, leftOut := s.named(tools)
	names := make([]string, 0, len(offered))
	for name := range offered {
		names = append(names, name)
	}
	sort.Strings(names)
	defs := []toolset.Tool{}
	for _, name := range names {
		def, err := s.def(name, offered[name])
		if err != nil {
			leftOut = append(leftOut, LeftOut{Tool: name, Reason: badSchema + ": " + agentd.TruncateUTF8(err.Error(), 200)})
			continue
		}
		defs = append(defs, def)
	}
	for _, l := range leftOut {
		s.log.Warn().Str("tool", l.Tool).Str("reason", l.Reason).Msg("MCP tool left out")
	}
	s.offered, s.defs, s.print = offered, defs, string(print)
	s.leftOut = leftOut[:min(len(leftOut), maxLeftOut)]
	s.version++
}

// Tools lists the server's tools, sorted by name (none before it first
// started): the same slice until the server lists other tools.
func (s *Server) Tools() []toolset.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defs
}

// Version moves whenever Tools lists other tools (toolset.Changing): after
// notifications/tools/list_changed, or when the server first starts after
// failing.
func (s *Server) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// def is one of the server's tools as the registry gets it; an error for
// a tool whose input schema does not compile.
func (s *Server) def(name string, t *sdk.Tool) (toolset.Tool, error) {
	raw, err := json.Marshal(t.InputSchema)
	if err != nil || len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	v, err := schema.ObjectValidator(name, raw)
	if err != nil {
		return toolset.Tool{}, err
	}
	exposure := confirm.ExposureRequiresConfirmation
	if s.tier(name, t.Annotations) == agentd.TierAuto {
		exposure = confirm.ExposureOpen
	}
	return toolset.Tool{
		Spec:        agentd.ToolSpec{Name: name, Description: t.Description, Parameters: raw},
		Confirm:     &confirm.Tool{Name: name, ServerID: s.cfg.ID, Exposure: exposure, Validate: v, Approval: s.approval[name]},
		LLMCallable: true,
		Origin:      fmt.Sprintf("MCP server %q (%s)", s.cfg.ID, File),
		TenantIDs:   s.cfg.TenantIDs,
	}, nil
}

// tier is a tool's tier (SPEC §4.2): mcp.json's tiers win; else a
// readOnlyHint tool of a server in trust_annotations is auto; else
// confirm.
func (s *Server) tier(name string, ann *sdk.ToolAnnotations) agentd.Tier {
	if t, ok := s.tiers[name]; ok {
		return t
	}
	if s.trust && ann != nil && ann.ReadOnlyHint {
		return agentd.TierAuto
	}
	return agentd.TierConfirm
}

// Execute calls the tool on the server with the effective arguments,
// bounded by the server's timeout and ctx (a cancelled run cancels the
// request). Errors, read by the model: the server is not running now, it
// no longer offers the tool, the call failed or timed out, or the tool
// reported an error (its text). A call that failed without the server's
// answer (and was not cancelled) has the session checked (check).
func (s *Server) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	s.mu.Lock()
	sess, t, state, lastErr := s.session, s.offered[call.Name], s.state, s.lastErr
	s.mu.Unlock()
	switch {
	case sess == nil && state == StateStopped:
		return nil, fmt.Errorf("MCP server %q is stopped", s.cfg.ID)
	case sess == nil:
		return nil, fmt.Errorf("MCP server %q is not running (agentd is starting it again): %s", s.cfg.ID, lastErr)
	case t == nil:
		return nil, fmt.Errorf("MCP server %q no longer offers tool %q", s.cfg.ID, call.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &sdk.CallToolParams{Name: t.Name, Arguments: args}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// The tool's span as _meta.traceparent, the W3C trace context
		// convention MCP servers read (docs/observability.md).
		params.Meta = sdk.Meta{"traceparent": tracing.Format(sc)}
	}
	res, err := sess.CallTool(ctx, params)
	if err != nil {
		if !answered(err) && !errors.Is(ctx.Err(), context.Canceled) && s.ctx.Err() == nil {
			// Not an answer of the server, nor a cancelled run: is the
			// server still there?
			s.wg.Go(func() { s.check(sess) })
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("MCP server %q: tool %q timed out after %s", s.cfg.ID, call.Name, s.cfg.Timeout)
		}
		return nil, fmt.Errorf("MCP server %q: calling tool %q failed: %v", s.cfg.ID, call.Name, err)
	}
	text := resultText(res, agentd.DefaultMCPResultBytes)
	if res.IsError {
		return nil, fmt.Errorf("MCP tool %q failed: %s", call.Name, text)
	}
	return json.Marshal(text)
}

// rejectedByTransport is the code of the SDK's internal
// jsonrpc2.ErrRejected: a JSON-RPC error the SDK makes up itself when a
// request did not reach the server (the HTTP request failed, or answered
// 5xx without a JSON-RPC body), which the server never sent.
const rejectedByTransport = -32005

// answered reports whether err is the server's own JSON-RPC error answer:
// the server is there.
func answered(err error) bool {
	var wire *jsonrpc.Error
	return errors.As(err, &wire) && wire.Code != rejectedByTransport
}

// ForTenant reports whether the tenant sees the server's tools (its
// tenant_ids; none: every tenant).
func (s *Server) ForTenant(tenantID string) bool {
	return s.cfg.TenantIDs == nil || slices.Contains(s.cfg.TenantIDs, tenantID)
}

// Status reports the server's state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Server) statusLocked() Status {
	st := Status{ID: s.cfg.ID, Transport: "stdio", State: s.state, Error: s.lastErr, Restarts: s.restarts, PID: s.pid, Tools: []string{}}
	if s.cfg.URL != "" {
		st.Transport = "http"
	}
	for _, d := range s.defs {
		st.Tools = append(st.Tools, d.Spec.Name) // sorted
	}
	st.LeftOut = slices.Clone(s.leftOut)
	return st
}

// Close stops watching the server and ends its session (a stdio server's
// process gets its stdin closed, then SIGTERM, then SIGKILL).
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	sess := s.session
	s.session, s.state, s.pid = nil, StateStopped, 0
	s.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	s.wg.Wait()
}

// maxRedirects is how many redirects a request to an HTTP server follows.
const maxRedirects = 5

// sameOrigin is the redirect policy of an HTTP server at endpoint: a
// redirect is followed only on the endpoint's origin (scheme, host and
// port), at most maxRedirects times; any other fails the request unsent,
// so mcp.json's headers (headerTransport sets them on every request)
// never leave the server's origin.
func sameOrigin(endpoint string) func(*http.Request, []*http.Request) error {
	from, err := url.Parse(endpoint)
	if err != nil {
		from = &url.URL{} // on no origin: no redirect is followed (Parse checked the URL)
	}
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if to := req.URL; !origin.Same(to, from) {
			return fmt.Errorf("the redirect to another origin (%s://%s) was refused: the server's headers go to %s://%s only",
				to.Scheme, to.Host, from.Scheme, from.Host)
		}
		return nil
	}
}

// headerTransport adds mcp.json's headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// environ is a stdio server's environment: PATH, HOME and TMPDIR, and the
// variables mcp.json's env names that are set.
func environ(names []string) []string {
	var env []string
	for _, name := range append([]string{"PATH", "HOME", "TMPDIR"}, names...) {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// stderrLog logs what a stdio server writes to stderr, a line at a time.
type stderrLog struct{ log zerolog.Logger }

func (w stderrLog) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		w.log.Info().Str("stderr", agentd.TruncateUTF8(line, 1000)).Msg("MCP server")
	}
	return len(p), nil
}
