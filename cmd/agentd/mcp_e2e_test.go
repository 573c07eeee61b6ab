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
 {"when":{"tool_result":"notes__grow"},"reply":{"text":"grow {{status}}"}},
 {"when":{"tool_result":"notes__extra"},"reply":{"text":"extra {{status}}: {{result}}{{reason}}"}},
 {"when":{"user":"^look"},"reply":{"tool_calls":[{"name":"notes__lookup","arguments":{"q":"tea"}}]}},
 {"when":{"tool_result":"notes__note","status":"completed"},"reply":{"text":"note: {{result}}"}},
 {"when":{"tool_result":"notes__lookup","status":"completed"},"reply":{"text":"lookup: {{result}}"}},
 {"when":{"tool_result":"notes__note"},"reply":{"text":"note {{status}}: {{reason}}"}}
]`

// SPEC §4.2 through the real binary: an MCP stdio server (a real
// subprocess) gives the agent its tools; the unannotated one parks and
// runs once on approval; the read-only one of a trusted server runs at
// once; a tool the server adds is the model's after list_changed; a
// cancelled run cancels the MCP request; a server that cannot start is
// reported in /readyz while the rest works.
func TestMCPEndToEnd(t *testing.T) {
	testMCPEndToEnd(t, []string{mcpTestServer(t)})
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
	testMCPEndToEnd(t, []string{py, server})
}

func testMCPEndToEnd(t *testing.T, server []string) {
	bin := agentdBinary(t)
	dir, _ := writeProject(t, projectOpts{})
	writeAgent(t, dir, mcpRules, nil)
	notes := filepath.Join(t.TempDir(), "notes")
	cfg := map[string]any{"servers": []map[string]any{
		{"id": "notes", "command": server, "env": []string{"NOTES_FILE"}},
		{"id": "broken", "command": []string{filepath.Join(dir, "no-such-server")}},
	}, "trust_annotations": []string{"notes"}}
	b, err := json.Marshal(cfg)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "mcp.json"), b, 0o644))
	base, _ := startProcess(t, bin, dir, t.TempDir(), "NOTES_FILE="+notes)

	status, ready := call(t, http.MethodGet, base+"/readyz", "", "")
	servers, _ := ready["mcp_servers"].([]any)
	if status != 200 || ready["status"] != "ready" || len(servers) != 2 {
		t.Fatalf("/readyz: %d %v", status, ready)
	}
	good, _ := servers[0].(map[string]any)
	bad, _ := servers[1].(map[string]any)
	if good["id"] != "notes" || good["state"] != "ready" || !strings.Contains(fmt.Sprint(good["tools"]), "notes__note") {
		t.Errorf("the notes server in /readyz: %v", good)
	}
	if bad["id"] != "broken" || bad["state"] != "starting" || !strings.Contains(str(bad, "error"), "no-such-server") {
		t.Errorf("the broken server in /readyz: %v", bad)
	}
	if s := toolList(t, base); !strings.Contains(s, "notes__lookup") || strings.Contains(s, "broken__") {
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

	// Killing the server's process: its tools fail cleanly (a failed call
	// the model reads, nothing else breaks) until it is started again, and
	// then they work (its lookup answers with a new pid).
	pid := lookupPID(t, res.Raw)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
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

	send(t, base, "", conv, "note this")
	cr := st.waitFor("confirmation_required", nil)
	if cr.Data["tool_name"] != "notes__note" || cr.Data["server_id"] != "notes" {
		t.Fatalf("card: %s", cr.Raw)
	}
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("the note ran before approval: %v", err)
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
	if b, err := os.ReadFile(notes); err != nil || string(b) != "hello\n" {
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
	waitNotes(t, notes, "hello\nwaiting\n")
	if status, run := call(t, http.MethodPost, base+"/v1/runs/"+str(sent, "run_id")+"/cancel", "", ""); status != 200 {
		t.Fatalf("cancel: %d %v", status, run)
	}
	waitNotes(t, notes, "hello\nwaiting\ncancelled\n")
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
