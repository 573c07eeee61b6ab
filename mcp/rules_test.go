package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/toolset"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// Load reads the project's mcp.json: none is no servers; one that cannot
// be read or is wrong is an error that names the file (and the field).
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if c, err := Load(dir, nil); c != nil || err != nil {
		t.Fatalf("no mcp.json: %+v %v, want no servers", c, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, File), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"servers": [{"id": "notes", "command": ["./notes"]}]}`)
	if c, err := Load(dir, nil); err != nil || len(c.Servers) != 1 || c.Servers[0].Dir != dir {
		t.Fatalf("an mcp.json: %+v %v", c, err)
	}
	write(`{"servers": [{"id": "notes"}]}`)
	if c, err := Load(dir, nil); c != nil || err == nil || !strings.HasPrefix(err.Error(), `mcp.json: field "servers[0]": needs "command"`) {
		t.Fatalf("a wrong mcp.json: %+v %v, want the file and field named", c, err)
	}
	unreadable := t.TempDir()
	if err := os.Mkdir(filepath.Join(unreadable, File), 0o755); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(unreadable, nil); c != nil || err == nil || !strings.HasPrefix(err.Error(), "mcp.json: ") {
		t.Fatalf("an mcp.json that cannot be read: %+v %v, want an error naming it", c, err)
	}
}

// Two servers may not have one id: <id>__<tool> would name two tools.
func TestServerIDTwice(t *testing.T) {
	c, err := Parse([]byte(`{"servers": [{"id": "notes", "command": ["x"]}, {"id": "crm", "url": "http://h/"}, {"id": "notes", "command": ["y"]}]}`), t.TempDir(), nil)
	if c != nil || err == nil || !strings.Contains(err.Error(), `field "servers[2].id": server id "notes" is used twice`) {
		t.Fatalf("a server id used twice: %+v %v", c, err)
	}
}

// What the model reads of a tool's result: text content as written,
// other content summarised, the structured content as JSON only when
// there is no content, and a result longer than the limit cut to it with a
// note (a result of exactly the limit is whole).
func TestResultText(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *sdk.CallToolResult
		want string
	}{
		{"structured only", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, `{"n":1}`},
		{"content and structured", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "two"}},
			StructuredContent: map[string]any{"n": 2}}, "two"},
		{"nothing", &sdk.CallToolResult{}, ""},
		{"resources", &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.txt", Text: "the text"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.png", MIMEType: "image/png", Blob: []byte("png")}},
			&sdk.EmbeddedResource{},
			&sdk.ResourceLink{URI: "file:///b"},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("wav!")},
		}}, "the text\n[resource file:///a.png image/png, 3 bytes]\n[resource]\n[resource link file:///b]\n[audio audio/wav, 4 bytes]"},
	} {
		if got := resultText(tc.res, 1000); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	text := func(n int) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", n)}}}
	}
	if got := resultText(text(200), 200); got != strings.Repeat("x", 200) {
		t.Errorf("a result of the limit was changed: %q", got)
	}
	got := resultText(text(201), 200)
	if len(got) > 200 || !strings.HasSuffix(got, "\n[cut: the result was 201 bytes; the first 200 are shown]") || !strings.HasPrefix(got, "xxx") {
		t.Errorf("a result over the limit: %d bytes %q", len(got), got)
	}
}

// A tool whose input schema does not compile is left out (not offered,
// listed in Status with the reason); the server's other tools are offered.
func TestBadSchemaLeftOut(t *testing.T) {
	s := newServer(ServerConfig{ID: "notes"}, &Config{}, zerolog.Nop())
	defer s.Close()
	s.mu.Lock()
	s.rebuild([]*sdk.Tool{
		{Name: "good", InputSchema: json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}}`)},
		{Name: "bad", InputSchema: json.RawMessage(`{"type": "object", "properties": {"q": {"type": 12}}}`)},
	})
	s.mu.Unlock()
	if got := names(s.Tools()); !slices.Equal(got, []string{"notes__good"}) {
		t.Fatalf("tools = %v, want notes__good only", got)
	}
	left := s.Status().LeftOut
	if len(left) != 1 || left[0].Tool != "notes__bad" || !strings.HasPrefix(left[0].Reason, badSchema+": ") {
		t.Fatalf("left out = %+v, want notes__bad for its schema", left)
	}
}

// A server that is not running answers each call with why: not started
// yet or failed (agentd starts it again), or stopped (closed).
func TestExecuteNotRunning(t *testing.T) {
	s := newServer(ServerConfig{ID: "notes", Command: []string{"x"}}, &Config{}, zerolog.Nop())
	if _, err := call(s, context.Background(), "notes__lookup", `{}`); err == nil ||
		!strings.Contains(err.Error(), `MCP server "notes" is not running (agentd is starting it again)`) {
		t.Fatalf("a server not started: %v", err)
	}
	s.Close()
	if _, err := call(s, context.Background(), "notes__lookup", `{}`); err == nil || err.Error() != `MCP server "notes" is stopped` {
		t.Fatalf("a closed server: %v", err)
	}
}

// A server's tools are seen by the tenants of its tenant_ids; without
// tenant_ids, by every tenant.
func TestForTenant(t *testing.T) {
	every := &Server{cfg: ServerConfig{ID: "notes"}}
	some := &Server{cfg: ServerConfig{ID: "crm", TenantIDs: []string{"acme"}}}
	if !every.ForTenant("acme") || !every.ForTenant("") || !some.ForTenant("acme") || some.ForTenant("globex") || some.ForTenant("") {
		t.Fatal("tenant_ids not applied")
	}
}

// A stdio server that keeps dying is started again ever more slowly: the
// wait doubles after each run shorter than healthyRun (minBackoff, then
// twice, then four times it), and meanwhile its status says why it stopped.
func TestStdioRestartBackoff(t *testing.T) {
	minBackoff = 300 * time.Millisecond
	t.Cleanup(func() { minBackoff = 250 * time.Millisecond })
	s, _ := stdioServer(t, stdioConfig)
	restart := func() time.Duration {
		t.Helper()
		pid := s.Status().PID
		if pid <= 0 {
			t.Fatalf("status %+v: no process to kill", s.Status()) // kill(0) would signal the test's own process group
		}
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var down Status
		eventually(t, "the server is seen down", func() bool {
			down = s.Status()
			return down.State != StateReady
		})
		if down.Error != `the server stopped: signal: killed` {
			t.Errorf("status of a dead server: %+v", down)
		}
		eventually(t, "the server comes back", func() bool {
			st := s.Status()
			return st.State == StateReady && st.PID != pid
		})
		return time.Since(killed)
	}
	var waits []time.Duration
	for _, least := range []time.Duration{minBackoff, 2 * minBackoff, 4 * minBackoff} {
		w := restart()
		waits = append(waits, w)
		if w < least {
			t.Errorf("restarts after %v, want each at least twice the last (%v)", waits, least)
		}
	}
	if st := s.Status(); st.Restarts != 3 {
		t.Errorf("status after three restarts: %+v", st)
	}
}

// Closing a stdio server closes its stdin and gives it time to exit by
// itself (2 s before SIGTERM): a server that cleans up for a moment after
// its stdin closes is not killed meanwhile.
func TestStdioCloseGrace(t *testing.T) {
	s, notes := stdioServer(t, `{"servers": [{"id": "notes", "command": ["SERVER", "-linger", "100ms"], "env": ["NOTES_FILE"]}]}`)
	s.Close()
	if got := lines(t, notes); !slices.Contains(got, "exited after stdin closed") {
		t.Fatalf("notes %q: the server was killed before it exited by itself", got)
	}
}

// A server that lists the same tools again (after list_changed, or after a
// restart) keeps its tools: the same slice and the same version, so the
// registry rebuilds nothing; other tools move the version.
func TestRebuildUnchanged(t *testing.T) {
	s := newServer(ServerConfig{ID: "notes"}, &Config{}, zerolog.Nop())
	defer s.Close()
	tools := func(names ...string) []*sdk.Tool {
		var out []*sdk.Tool
		for _, n := range names {
			out = append(out, &sdk.Tool{Name: n, InputSchema: json.RawMessage(`{"type": "object"}`)})
		}
		return out
	}
	rebuild := func(ts []*sdk.Tool) ([]toolset.Tool, uint64) {
		s.mu.Lock()
		s.rebuild(ts)
		s.mu.Unlock()
		return s.Tools(), s.Version()
	}
	first, v1 := rebuild(tools("a", "b"))
	again, v2 := rebuild(tools("a", "b"))
	if v2 != v1 || len(again) != 2 || &again[0] != &first[0] {
		t.Fatalf("the same tools listed again: version %d → %d, tools %v → %v", v1, v2, names(first), names(again))
	}
	if other, v3 := rebuild(tools("a")); v3 != v1+1 || !slices.Equal(names(other), []string{"notes__a"}) {
		t.Fatalf("other tools: version %d → %d, tools %v", v1, v3, names(other))
	}
}

// A stdio server that does not exit when its stdin closes is stopped with
// SIGTERM after the grace: Close leaves no server running.
func TestStdioCloseStopsLingering(t *testing.T) {
	s, _ := stdioServer(t, `{"servers": [{"id": "notes", "command": ["SERVER", "-linger", "10s"], "env": ["NOTES_FILE"]}]}`)
	pid := s.Status().PID
	if pid <= 0 {
		t.Fatalf("status %+v: no process", s.Status())
	}
	s.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the server (pid %d) still runs after Close: %v", pid, err)
	}
}
