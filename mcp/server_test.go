package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/mcptest"
	"github.com/agentd-dev/agentd/internal/tracing"
	"github.com/agentd-dev/agentd/mcp/internal/testserver"
	"github.com/agentd-dev/agentd/toolset"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// serverBin is mcp/testdata/server, built once by TestMain.
var serverBin string

func TestMain(m *testing.M) {
	var err error
	if serverBin, err = mcptest.Build(); err != nil {
		panic(err)
	}
	code := m.Run()
	mcptest.Remove()
	os.Exit(code)
}

// stdioServer starts the test server over stdio with mcp.json text cfg
// (its command filled in), notes written to the returned file.
func stdioServer(t *testing.T, cfg string) (*Server, string) {
	t.Helper()
	return stdioServerLog(t, cfg, zerolog.Nop())
}

// stdioServerLog is stdioServer logging to log.
func stdioServerLog(t *testing.T, cfg string, log zerolog.Logger) (*Server, string) {
	t.Helper()
	notes := filepath.Join(t.TempDir(), "notes")
	t.Setenv("NOTES_FILE", notes)
	cfg = strings.ReplaceAll(cfg, "SERVER", serverBin)
	c, err := Parse([]byte(cfg), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServers(c, log)[0]
	t.Cleanup(s.Close)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, notes
}

const stdioConfig = `{"servers": [{"id": "notes", "command": ["SERVER"], "env": ["NOTES_FILE"]}],
	"trust_annotations": ["notes"]}`

func names(defs []toolset.Tool) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Spec.Name)
	}
	return out
}

func find(t *testing.T, s *Server, name string) toolset.Tool {
	t.Helper()
	for _, d := range s.Tools() {
		if d.Spec.Name == name {
			return d
		}
	}
	t.Fatalf("no tool %q in %v", name, names(s.Tools()))
	return toolset.Tool{}
}

func classify(d toolset.Tool, args string) confirm.Classification {
	return confirm.Classify(confirm.Call{Name: d.Spec.Name, Arguments: json.RawMessage(args), Tool: d.Confirm})
}

func call(s *Server, ctx context.Context, name, args string) (string, error) {
	out, err := s.Execute(ctx, agentd.ToolCall{ID: "c1", Name: name, ServerID: s.ID(), Arguments: json.RawMessage(args)})
	if err != nil {
		return "", err
	}
	var text string
	if err := json.Unmarshal(out, &text); err != nil {
		return "", fmt.Errorf("result %s is not a JSON string: %v", out, err)
	}
	return text, nil
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// eventually polls cond until it holds or a generous bound passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func TestStdioToolsAndTiers(t *testing.T) {
	s, _ := stdioServer(t, stdioConfig)
	want := []string{"notes__big", "notes__grow", "notes__lookup", "notes__note", "notes__wait"}
	if got := names(s.Tools()); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	note, lookup := find(t, s, "notes__note"), find(t, s, "notes__lookup")
	if note.Confirm.ServerID != "notes" || !strings.Contains(string(note.Spec.Parameters), `"text"`) || note.Spec.Description != "Writes a note." {
		t.Errorf("note = %+v, schema %s", note.Confirm, note.Spec.Parameters)
	}
	if c := classify(note, `{"text": "hi"}`); c.Tier != agentd.TierConfirm {
		t.Errorf("unannotated note: tier %s, want confirm", c.Tier)
	}
	if c := classify(lookup, `{"q": "a"}`); c.Tier != agentd.TierAuto {
		t.Errorf("readOnlyHint lookup of a trusted server: tier %s, want auto", c.Tier)
	}
	// The server's own schema is checked before any card.
	if c := classify(lookup, `{"q": 7}`); c.Tier != agentd.TierNever || !c.Invalid || !strings.Contains(c.Why, "at '/q'") {
		t.Errorf("bad arguments: %+v", c)
	}
	if c := classify(lookup, `[1]`); !c.Invalid {
		t.Errorf("an array as arguments: %+v", c)
	}
}

func TestTierRules(t *testing.T) {
	for _, tt := range []struct {
		name, cfg string
		lookup    agentd.Tier
		note      agentd.Tier
	}{
		{"untrusted readOnlyHint is confirm", `{"servers": [{"id": "notes", "command": ["SERVER"]}]}`, agentd.TierConfirm, agentd.TierConfirm},
		{"tiers win over annotations", `{"servers": [{"id": "notes", "command": ["SERVER"]}], "trust_annotations": ["notes"],
			"tiers": {"notes__lookup": "confirm", "notes__note": "auto"}}`, agentd.TierConfirm, agentd.TierAuto},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := stdioServer(t, tt.cfg)
			if c := classify(find(t, s, "notes__lookup"), `{"q": "a"}`); c.Tier != tt.lookup {
				t.Errorf("lookup: %s, want %s", c.Tier, tt.lookup)
			}
			if c := classify(find(t, s, "notes__note"), `{"text": "a"}`); c.Tier != tt.note {
				t.Errorf("note: %s, want %s", c.Tier, tt.note)
			}
		})
	}
}

func TestStdioExecute(t *testing.T) {
	s, notes := stdioServer(t, stdioConfig)
	got, err := call(s, context.Background(), "notes__note", `{"text": "first"}`)
	if err != nil || got != "noted first" {
		t.Fatalf("note = %q, %v", got, err)
	}
	if l := lines(t, notes); !slices.Equal(l, []string{"first"}) {
		t.Errorf("notes = %q, want one run", l)
	}
	// A traced call sends its span as _meta.traceparent.
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, _ := tracing.Parse(tp)
	if _, err := call(s, trace.ContextWithRemoteSpanContext(context.Background(), sc), "notes__note", `{"text": "traced"}`); err != nil {
		t.Fatal(err)
	}
	if l := lines(t, notes); !slices.Equal(l, []string{"first", "traceparent " + tp, "traced"}) {
		t.Errorf("notes = %q, want the traced call's traceparent", l)
	}
	if _, err := call(s, context.Background(), "notes__nope", `{}`); err == nil || !strings.Contains(err.Error(), `no longer offers tool "notes__nope"`) {
		t.Errorf("unknown tool: %v", err)
	}
	// Results are bounded, and other content is summarised.
	big, err := call(s, context.Background(), "notes__big", fmt.Sprintf(`{"n": %d}`, agentd.DefaultMCPResultBytes*2))
	if err != nil || len(big) > agentd.DefaultMCPResultBytes || !strings.Contains(big, "[cut: the result was") {
		t.Errorf("big: %d bytes, %v", len(big), err)
	}
	small, err := call(s, context.Background(), "notes__big", `{"n": 3}`)
	if err != nil || small != "xxx\n[image image/png, 3 bytes]" {
		t.Errorf("small = %q, %v", small, err)
	}
}

func TestStdioCancelAndTimeout(t *testing.T) {
	s, notes := stdioServer(t, `{"servers": [{"id": "notes", "command": ["SERVER"], "env": ["NOTES_FILE"], "timeout_ms": 5000}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := call(s, ctx, "notes__wait", `{}`); done <- err }()
	eventually(t, "the call reaches the server", func() bool { return len(lines(t, notes)) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	// The server saw the request cancelled (notifications/cancelled).
	eventually(t, "the server cancels the request", func() bool { return len(lines(t, notes)) == 2 })
	if l := lines(t, notes); !slices.Equal(l, []string{"waiting", "cancelled"}) {
		t.Errorf("notes = %q", l)
	}
	s.cfg.Timeout = 200 * time.Millisecond
	_, err := call(s, context.Background(), "notes__wait", `{}`)
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Errorf("timeout: %v", err)
	}
	if got, err := call(s, context.Background(), "notes__lookup", `{"q": "still"}`); err != nil || !strings.HasPrefix(got, "found still") {
		t.Errorf("after a timeout the server still answers: %q, %v", got, err)
	}
	// What the timeout started in the background: the server answers the
	// ping, so its session stays.
	s.mu.Lock()
	sess := s.session
	s.mu.Unlock()
	s.check(sess)
	s.mu.Lock()
	kept := s.session == sess
	s.mu.Unlock()
	if st := s.Status(); !kept || st.State != StateReady || st.Restarts != 0 {
		t.Errorf("a server that answers the ping after a timeout lost its session: %+v", st)
	}
}

func TestStdioRestart(t *testing.T) {
	minBackoff = time.Second // long enough to see the server down
	t.Cleanup(func() { minBackoff = 250 * time.Millisecond })
	s, _ := stdioServer(t, stdioConfig)
	first := s.Status()
	if first.State != StateReady || first.PID == 0 || first.Transport != "stdio" {
		t.Fatalf("status = %+v", first)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server is seen down", func() bool { return s.Status().State != StateReady })
	_, err := call(s, context.Background(), "notes__lookup", `{"q": "a"}`)
	if err == nil || !strings.Contains(err.Error(), `MCP server "notes" is not running (agentd is starting it again)`) {
		t.Errorf("a call to a dead server: %v", err)
	}
	if st := s.Status(); !strings.Contains(st.Error, "the server stopped") {
		t.Errorf("status of a dead server: %+v", st)
	}
	eventually(t, "the server comes back", func() bool { return s.Status().State == StateReady })
	again := s.Status()
	if again.PID == first.PID || again.Restarts != 1 || again.Error != "" {
		t.Errorf("after a restart: %+v (before %+v)", again, first)
	}
	got, err := call(s, context.Background(), "notes__lookup", `{"q": "b"}`)
	if err != nil || got != fmt.Sprintf("found b (pid %d)", again.PID) {
		t.Errorf("after a restart: %q, %v", got, err)
	}
}

// A stdio server that hangs (SIGSTOP): a call times out, the ping that
// follows gets no answer either, and the server is started again.
func TestStdioWedged(t *testing.T) {
	pingTimeout = 100 * time.Millisecond
	t.Cleanup(func() { pingTimeout = agentd.DefaultMCPPingTimeout })
	s, _ := stdioServer(t, `{"servers": [{"id": "notes", "command": ["SERVER"], "env": ["NOTES_FILE"], "timeout_ms": 200}]}`)
	first := s.Status()
	if first.PID <= 0 { // never signal a process group (pid 0, or a negative one)
		t.Fatalf("status pid %d, want a running server's", first.PID)
	}
	if err := syscall.Kill(first.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(first.PID, syscall.SIGKILL) })
	// SIGSTOP is asynchronous: wait until the kernel shows every thread
	// stopped, or a call sent meanwhile may still be answered.
	eventually(t, "the server is stopped", func() bool { return processStopped(first.PID) })
	if _, err := call(s, context.Background(), "notes__lookup", `{"q": "a"}`); err == nil || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("a call to a hung server: %v", err)
	}
	eventually(t, "the hung server is started again", func() bool {
		st := s.Status()
		return st.State == StateReady && st.PID != first.PID
	})
	if got, err := call(s, context.Background(), "notes__lookup", `{"q": "b"}`); err != nil || !strings.HasPrefix(got, "found b") {
		t.Errorf("after the hung server was started again: %q, %v", got, err)
	}
}

// processStopped reports whether every thread of process pid is stopped
// (state T in /proc/<pid>/task/*/stat).
func processStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// The state follows the command name in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

func TestStdioListChanged(t *testing.T) {
	s, _ := stdioServer(t, stdioConfig)
	if _, err := call(s, context.Background(), "notes__extra", `{}`); err == nil {
		t.Fatal("extra exists before grow")
	}
	before, list := s.Version(), s.Tools()
	if again := s.Tools(); &again[0] != &list[0] || s.Version() != before {
		t.Fatal("an unchanged server lists another slice")
	}
	if _, err := call(s, context.Background(), "notes__grow", `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "list_changed is picked up", func() bool { return slices.Contains(s.Status().Tools, "notes__extra") })
	if got, err := call(s, context.Background(), "notes__extra", `{}`); err != nil || got != "extra" {
		t.Errorf("extra = %q, %v", got, err)
	}
	if got := names(s.Tools()); !slices.Contains(got, "notes__extra") || s.Version() != before+1 {
		t.Errorf("tools = %v, version %d (before %d)", got, s.Version(), before)
	}
	if c := classify(find(t, s, "notes__extra"), `{}`); c.Tier != agentd.TierAuto {
		t.Errorf("a new readOnlyHint tool of a trusted server: %s", c.Tier)
	}
}

func TestStartFailure(t *testing.T) {
	c, err := Parse([]byte(`{"servers": [{"id": "gone", "command": ["/nonexistent/server"]}]}`), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServers(c, zerolog.Nop())[0]
	defer s.Close()
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `MCP server "gone": connect`) {
		t.Fatalf("Start = %v", err)
	}
	if st := s.Status(); st.State != StateStarting || !strings.Contains(st.Error, "/nonexistent/server") || len(s.Tools()) != 0 {
		t.Errorf("status = %+v, tools %v", st, names(s.Tools()))
	}
	if _, err := call(s, context.Background(), "gone__x", `{}`); err == nil || !strings.Contains(err.Error(), "is not running") {
		t.Errorf("call = %v", err)
	}
}

// httpServer serves the test server over streamable HTTP, refusing
// requests without the bearer token.
func httpServer(t *testing.T, token string) (*httptest.Server, string) {
	t.Helper()
	h, notes := mcpHandler(t, token)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts, notes
}

// mcpHandler is httpServer's handler.
func mcpHandler(t *testing.T, token string) (http.Handler, string) {
	notes := filepath.Join(t.TempDir(), "notes")
	srv := testserver.New(notes)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), notes
}

func TestHTTPServer(t *testing.T) {
	ts, notes := httpServer(t, "s3cret")
	cfg := fmt.Sprintf(`{"servers": [{"id": "crm", "url": %q, "headers_env": {"Authorization": "CRM_AUTH"}}], "trust_annotations": ["crm"]}`, ts.URL)
	getenv := func(name string) string {
		if name == "CRM_AUTH" {
			return "Bearer s3cret"
		}
		return ""
	}
	c, err := Parse([]byte(cfg), t.TempDir(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServers(c, zerolog.Nop())[0]
	defer s.Close()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := classify(find(t, s, "crm__note"), `{"text": "x"}`); c.Tier != agentd.TierConfirm {
		t.Errorf("note: %s", c.Tier)
	}
	if c := classify(find(t, s, "crm__lookup"), `{"q": "x"}`); c.Tier != agentd.TierAuto {
		t.Errorf("lookup: %s", c.Tier)
	}
	if got, err := call(s, context.Background(), "crm__note", `{"text": "over http"}`); err != nil || got != "noted over http" {
		t.Fatalf("note = %q, %v", got, err)
	}
	if l := lines(t, notes); !slices.Equal(l, []string{"over http"}) {
		t.Errorf("notes = %q", l)
	}
	if _, err := call(s, context.Background(), "crm__grow", `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "list_changed over HTTP", func() bool { return slices.Contains(s.Status().Tools, "crm__extra") })
	if st := s.Status(); st.Transport != "http" || st.State != StateReady {
		t.Errorf("status = %+v", st)
	}
}

// startedHTTP is the server "crm" of mcp.json at the MCP endpoint u of
// mcptest.StartHTTP's server, started; it is closed when the test ends.
func startedHTTP(t *testing.T, u string) *Server {
	t.Helper()
	cfg := fmt.Sprintf(`{"servers": [{"id": "crm", "url": %q, "headers_env": {"Authorization": "CRM_AUTH"}}]}`, u)
	c, err := Parse([]byte(cfg), t.TempDir(), func(string) string { return "Bearer " + mcptest.Token })
	if err != nil {
		t.Fatal(err)
	}
	s := NewServers(c, zerolog.Nop())[0]
	t.Cleanup(s.Close)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// An HTTP server (a real subprocess) killed with -9: a call fails with the
// HTTP error, the ping that follows fails too and ends the session (Status
// says so at once, not after the SDK's own retries of its SSE stream), and
// the server started again on the same port is reached again.
func TestHTTPRestart(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes")
	u, proc := mcptest.StartHTTP(t, "127.0.0.1:0", notes)
	s := startedHTTP(t, u)
	if got, err := call(s, context.Background(), "crm__lookup", `{"q": "a"}`); err != nil || got != fmt.Sprintf("found a (pid %d)", proc.Pid) {
		t.Fatalf("lookup = %q, %v", got, err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = proc.Wait()
	if _, err := call(s, context.Background(), "crm__lookup", `{"q": "b"}`); err == nil || !strings.Contains(err.Error(), `MCP server "crm": calling tool "crm__lookup" failed`) {
		t.Errorf("a call to a killed server: %v", err)
	}
	eventually(t, "the killed server is seen down", func() bool { return s.Status().State != StateReady })
	if st := s.Status(); !strings.Contains(st.Error, "does not answer") || len(st.Tools) == 0 {
		t.Errorf("status of a killed server: %+v", st)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	_, again := mcptest.StartHTTP(t, parsed.Host, notes)
	eventually(t, "the server is reached again", func() bool { return s.Status().State == StateReady })
	if st := s.Status(); st.Restarts != 1 || st.Error != "" {
		t.Errorf("after the server came back: %+v", st)
	}
	if got, err := call(s, context.Background(), "crm__lookup", `{"q": "c"}`); err != nil || got != fmt.Sprintf("found c (pid %d)", again.Pid) {
		t.Errorf("lookup after the server came back = %q, %v", got, err)
	}
}

// An idle HTTP server that goes away is seen by the keepalive ping, not
// only when the SDK's standalone SSE stream gives up reconnecting.
func TestHTTPKeepAlive(t *testing.T) {
	keepAlive = 100 * time.Millisecond
	t.Cleanup(func() { keepAlive = agentd.DefaultMCPKeepAlive })
	u, proc := mcptest.StartHTTP(t, "127.0.0.1:0", filepath.Join(t.TempDir(), "notes"))
	s := startedHTTP(t, u)
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle killed server is seen down", func() bool { return s.Status().State != StateReady })
	if st := s.Status(); strings.Contains(st.Error, "standalone SSE") {
		t.Errorf("seen down by the SSE stream's retries, not the keepalive: %+v", st)
	}
}

func TestHTTPServerWithoutTheHeader(t *testing.T) {
	ts, _ := httpServer(t, "s3cret")
	c, err := Parse([]byte(fmt.Sprintf(`{"servers": [{"id": "crm", "url": %q}]}`, ts.URL)), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServers(c, zerolog.Nop())[0]
	defer s.Close()
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("a server that answers 401 started")
	}
	if st := s.Status(); st.State == StateReady || !strings.Contains(st.Error, "Unauthorized") {
		t.Errorf("status = %+v", st)
	}
}

// mcp.json "approval" is the rule of the tool it names, on its
// classification; the server's other tools have none.
func TestApprovalRule(t *testing.T) {
	s, _ := stdioServer(t, `{"servers": [{"id": "notes", "command": ["SERVER"]}], "approval": {"notes__note": {"approvers": ["admin"], "quorum": 2}}}`)
	if c := classify(find(t, s, "notes__note"), `{"text": "a"}`); c.Approval == nil || c.Approval.Quorum != 2 || !slices.Equal(c.Approval.Approvers, []string{"admin"}) {
		t.Errorf("note's rule: %+v", c.Approval)
	}
	if c := classify(find(t, s, "notes__lookup"), `{"q": "a"}`); c.Approval != nil {
		t.Errorf("lookup has a rule: %+v", c.Approval)
	}
}

// Trust and tiers are per server: trust_annotations of one server lower
// only its own readOnlyHint tools, and a tier names one server's tool;
// another server running the very same tools keeps confirm.
func TestTrustPerServer(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes")
	t.Setenv("NOTES_FILE", notes)
	cfg := strings.ReplaceAll(`{"servers": [{"id": "trusted", "command": ["SERVER"]}, {"id": "other", "command": ["SERVER"]}],
		"trust_annotations": ["trusted"], "tiers": {"trusted__note": "auto", "other__lookup": "confirm"}}`, "SERVER", serverBin)
	c, err := Parse([]byte(cfg), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	servers := NewServers(c, zerolog.Nop())
	for _, s := range servers {
		t.Cleanup(s.Close)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]agentd.Tier{
		"trusted__lookup": agentd.TierAuto, "trusted__big": agentd.TierAuto, "trusted__note": agentd.TierAuto,
		"other__lookup": agentd.TierConfirm, "other__big": agentd.TierConfirm, "other__note": agentd.TierConfirm,
	}
	for _, s := range servers {
		for tool, args := range map[string]string{"lookup": `{"q": "a"}`, "big": `{"n": 1}`, "note": `{"text": "a"}`} {
			name := s.ID() + "__" + tool
			if c := classify(find(t, s, name), args); c.Tier != want[name] {
				t.Errorf("%s: %s, want %s", name, c.Tier, want[name])
			}
		}
	}
}
