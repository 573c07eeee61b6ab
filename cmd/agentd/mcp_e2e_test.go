package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/mcptest"
)

// mcpTestServer is the MCP test server (mcp/testdata/server), built once
// per test process.
func mcpTestServer(t *testing.T) string { return mcptest.Server(t) }

const mcpRules = `[
 {"when":{"user":"^note"},"reply":{"tool_calls":[{"name":"notes__note","arguments":{"text":"hello"}}]}},
 {"when":{"user":"^wait"},"reply":{"tool_calls":[{"name":"notes__wait","arguments":{}}]}},
 {"when":{"user":"^grow"},"reply":{"tool_calls":[{"name":"notes__grow","arguments":{}}]}},
 {"when":{"user":"^extra"},"reply":{"tool_calls":[{"name":"notes__extra","arguments":{}}]}},
 {"when":{"tool_result":"notes__wait"},"reply":{"text":"wait {{status}}: {{reason}}"}},
 {"when":{"tool_result":"notes__grow"},"reply":{"text":"grow {{status}}"}},
 {"when":{"tool_result":"notes__extra"},"reply":{"text":"extra {{status}}: {{result}}{{reason}}"}},
 {"when":{"user":"^look"},"reply":{"tool_calls":[{"name":"notes__lookup","arguments":{"q":"tea"}}]}},
 {"when":{"tool_result":"notes__note","status":"completed"},"reply":{"text":"note: {{result}}"}},
 {"when":{"tool_result":"notes__lookup","status":"completed"},"reply":{"text":"lookup: {{result}}"}},
 {"when":{"tool_result":"notes__note"},"reply":{"text":"note {{status}}: {{reason}}"}}
]`

// mcpVariant is one way of reaching the notes server in the end-to-end
// test: its mcp.json entries, agentd's environment, what /readyz says of
// the entries that cannot work, and how its process is brought back after
// kill -9.
type mcpVariant struct {
	servers []map[string]any // "notes" first, then the ones that cannot work
	env     []string
	notes   string // the server's NOTES_FILE
	// broken maps each entry that cannot work to a part of its /readyz error.
	broken map[string]string
	// restart starts the killed server again; nil when agentd does (stdio).
	restart func(t *testing.T)
}

// SPEC §4.2 through the real binary: an MCP stdio server (a real
// subprocess) gives the agent its tools; the unannotated one parks and
// runs once on approval; the read-only one of a trusted server runs at
// once; a tool the server adds is the model's after list_changed; a
// cancelled run cancels the MCP request; a server that cannot start is
// reported in /readyz while the rest works.
func TestMCPEndToEnd(t *testing.T) {
	testMCPEndToEnd(t, stdioVariant(t, []string{mcpTestServer(t)}))
}

// The same with a server written without the SDK, in Python
// (mcp/testdata/pyserver): MCP as another author implements it.
func TestMCPEndToEndPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is missing; scripts/test.sh installs it")
		}
		t.Skip("python3 is not installed")
	}
	server, err := filepath.Abs("../../mcp/testdata/pyserver/server.py")
	must(t, err)
	testMCPEndToEnd(t, stdioVariant(t, []string{py, server}))
}

// stdioVariant is a stdio server agentd starts, and one it cannot.
func stdioVariant(t *testing.T, server []string) mcpVariant {
	return mcpVariant{
		notes: filepath.Join(t.TempDir(), "notes"),
		servers: []map[string]any{
			{"id": "notes", "command": server, "env": []string{"NOTES_FILE"}},
			{"id": "broken", "command": []string{filepath.Join(t.TempDir(), "no-such-server")}},
		},
		broken: map[string]string{"broken": "no-such-server"},
	}
}

func testMCPEndToEnd(t *testing.T, v mcpVariant) {
	bin := agentdBinary(t)
	dir, _ := writeProject(t, projectOpts{})
	writeAgent(t, dir, mcpRules, nil)
	notes := v.notes
	cfg := map[string]any{"servers": v.servers, "trust_annotations": []string{"notes"}}
	b, err := json.Marshal(cfg)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "mcp.json"), b, 0o644))
	base, _ := startProcess(t, bin, dir, t.TempDir(), append([]string{"NOTES_FILE=" + notes}, v.env...)...)

	servers := readyServers(t, base)
	if len(servers) != len(v.servers) {
		t.Fatalf("/readyz lists %d servers, want %d: %v", len(servers), len(v.servers), servers)
	}
	if good := servers["notes"]; good["state"] != "ready" || !strings.Contains(fmt.Sprint(good["tools"]), "notes__note") {
		t.Errorf("the notes server in /readyz: %v", good)
	}
	for id, reason := range v.broken {
		if bad := servers[id]; bad["state"] != "starting" || !strings.Contains(str(bad, "error"), reason) {
			t.Errorf("the server %s in /readyz: %v, want its error to say %q", id, bad, reason)
		}
		if s := toolList(t, base); strings.Contains(s, id+"__") {
			t.Errorf("GET /v1/tools lists tools of %s: %v", id, s)
		}
	}
	if s := toolList(t, base); !strings.Contains(s, "notes__lookup") {
		t.Errorf("GET /v1/tools: %v", s)
	}

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "look it up")
	res := st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" || !strings.Contains(res.Raw, "found tea") {
		t.Fatalf("lookup: %s", res.Raw)
	}
	st.waitFor("run_finished", nil)
	if strings.Contains(st.summary(), "confirmation_required") {
		t.Fatalf("the trusted read-only tool parked: %s", st.summary())
	}

	// Killing the server's process: the call in flight fails (no hang),
	// its tools fail cleanly (a failed call the model reads, nothing else
	// breaks) until it is started again, and then they work (its lookup
	// answers with a new pid).
	pid := lookupPID(t, res.Raw)
	send(t, base, "", conv, "wait")
	waitNotes(t, notes, "waiting\n")
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	res = st.waitFor("tool_call_result", nil)
	st.waitFor("run_finished", nil)
	if res.Data["status"] != "failed" || res.Data["tool_name"] != "notes__wait" || !strings.Contains(str(res.Data, "error"), `MCP server "notes"`) {
		t.Fatalf("the call in flight when the server was killed: %s", res.Raw)
	}
	if v.restart != nil {
		// Nobody starts it again yet: a call fails, and /readyz says so.
		lookupFails(t, base, conv, st)
		waitServerDown(t, base, "notes")
		v.restart(t)
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back after kill -9 of pid %d", pid)
		}
		send(t, base, "", conv, "look it up")
		res = st.waitFor("tool_call_result", nil)
		st.waitFor("run_finished", nil)
		if res.Data["status"] == "failed" {
			if reason := str(res.Data, "error"); !strings.Contains(reason, "notes") {
				t.Fatalf("a call while the server is down failed with %q, want it to name the server", reason)
			}
			continue
		}
		if res.Data["status"] != "completed" {
			t.Fatalf("a lookup after the kill: %s", res.Raw)
		}
		if lookupPID(t, res.Raw) != pid {
			break
		}
	}
	if good := readyServers(t, base)["notes"]; good["state"] != "ready" || good["restarts"] != float64(1) {
		t.Errorf("the notes server in /readyz after it came back: %v", good)
	}

	send(t, base, "", conv, "note this")
	cr := st.waitFor("confirmation_required", nil)
	if cr.Data["tool_name"] != "notes__note" || cr.Data["server_id"] != "notes" {
		t.Fatalf("card: %s", cr.Raw)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "waiting\n" {
		t.Fatalf("notes = %q, %v: the note ran before approval", b, err)
	}
	approveCall(t, base, str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256"))
	res = st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" || !strings.Contains(res.Raw, "noted hello") {
		t.Fatalf("note: %s", res.Raw)
	}
	msg := st.waitFor("message", nil)
	if !strings.Contains(msg.Raw, `note: \"noted hello\"`) { // the result is a JSON string
		t.Errorf("the model read: %s", msg.Raw)
	}
	st.waitFor("run_finished", nil)
	if b, err := os.ReadFile(notes); err != nil || string(b) != "waiting\nhello\n" {
		t.Errorf("notes = %q, %v: want one run", b, err)
	}

	// The server adds a tool (notifications/tools/list_changed): the model
	// sees it and its call runs.
	if s := toolList(t, base); strings.Contains(s, "notes__extra") {
		t.Fatalf("extra before grow: %s", s)
	}
	send(t, base, "", conv, "grow")
	st.waitFor("run_finished", nil)
	for deadline := time.Now().Add(waitLimit); !strings.Contains(toolList(t, base), "notes__extra"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("notes__extra never listed: %s", toolList(t, base))
		}
	}
	send(t, base, "", conv, "extra")
	res = st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" || res.Data["tool_name"] != "notes__extra" || !strings.Contains(res.Raw, `"extra"`) {
		t.Fatalf("extra: %s", res.Raw)
	}
	st.waitFor("run_finished", nil)

	// Cancelling the run cancels the MCP request: the server's handler
	// sees its context done (notifications/cancelled) and says so.
	sent := send(t, base, "", conv, "wait")
	waitNotes(t, notes, "waiting\nhello\nwaiting\n")
	if status, run := call(t, http.MethodPost, base+"/v1/runs/"+str(sent, "run_id")+"/cancel", "", ""); status != 200 {
		t.Fatalf("cancel: %d %v", status, run)
	}
	waitNotes(t, notes, "waiting\nhello\nwaiting\ncancelled\n")
}

// readyServers is /readyz's mcp_servers by id.
func readyServers(t *testing.T, base string) map[string]map[string]any {
	t.Helper()
	status, ready := call(t, http.MethodGet, base+"/readyz", "", "")
	if status != 200 || ready["status"] != "ready" {
		t.Fatalf("/readyz: %d %v", status, ready)
	}
	list, _ := ready["mcp_servers"].([]any)
	out := map[string]map[string]any{}
	for _, s := range list {
		m, _ := s.(map[string]any)
		out[str(m, "id")] = m
	}
	return out
}

// lookupFails checks that a lookup fails as a call the model reads, naming
// the server.
func lookupFails(t *testing.T, base, conv string, st *eventStream) {
	t.Helper()
	send(t, base, "", conv, "look it up")
	res := st.waitFor("tool_call_result", nil)
	st.waitFor("run_finished", nil)
	if res.Data["status"] != "failed" || !strings.Contains(str(res.Data, "error"), `MCP server "notes"`) {
		t.Fatalf("a lookup while the server is down: %s", res.Raw)
	}
}

// waitServerDown waits until /readyz reports the server not ready, with
// an error.
func waitServerDown(t *testing.T, base, id string) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
		s := readyServers(t, base)[id]
		if s["state"] == "starting" && str(s, "error") != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still reports %s up after its process was killed: %v", id, s)
		}
	}
}

// lookupPID is the pid in a lookup's result ("found tea (pid N)").
func lookupPID(t *testing.T, raw string) int {
	t.Helper()
	m := regexp.MustCompile(`\(pid (\d+)\)`).FindStringSubmatch(raw)
	if m == nil {
		t.Fatalf("no pid in the lookup's result %s", raw)
	}
	pid, err := strconv.Atoi(m[1])
	must(t, err)
	return pid
}

// waitNotes waits until the test server's notes file holds want.
func waitNotes(t *testing.T, file, want string) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("notes = %q, want %q", b, want)
		}
	}
}

// toolList is GET /v1/tools as text.
func toolList(t *testing.T, base string) string {
	t.Helper()
	_, list := call(t, http.MethodGet, base+"/v1/tools", "", "")
	return fmt.Sprint(list)
}
