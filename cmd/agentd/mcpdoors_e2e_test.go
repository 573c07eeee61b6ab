package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// What MCP servers send agentd, through the real binary: a stdio server (a
// real subprocess) that prints a start-up banner on stdout and offers tools
// with names no model may be offered starts, its other tools work, and the
// odd ones are left out and listed in /readyz; an HTTP server whose URL
// redirects to another origin (another loopback port) is reported down,
// and the other origin never gets a request, so never the header.
func TestMCPEndToEndDoors(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(moved.Close)

	bin := agentdBinary(t)
	dir, _ := writeProject(t, projectOpts{})
	writeAgent(t, dir, `[
 {"when":{"user":"^look"},"reply":{"tool_calls":[{"name":"odd__lookup","arguments":{"q":"tea"}}]}},
 {"when":{"tool_result":"odd__lookup"},"reply":{"text":"lookup {{status}}: {{result}}"}}
]`, nil)
	cfg := map[string]any{"servers": []map[string]any{
		{"id": "odd", "command": []string{mcpTestServer(t), "-odd-names", "-banner", "Starting odd MCP server on stdio"}, "env": []string{"NOTES_FILE"}},
		{"id": "moved", "url": moved.URL + "/mcp", "headers_env": map[string]string{"Authorization": "MOVED_AUTH"}},
	}, "trust_annotations": []string{"odd"}}
	b, err := json.Marshal(cfg)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "mcp.json"), b, 0o644))
	notes := filepath.Join(t.TempDir(), "notes")
	base, _ := startProcess(t, bin, dir, t.TempDir(), "NOTES_FILE="+notes, "MOVED_AUTH=Bearer s3cret")

	servers := readyServers(t, base)
	odd := servers["odd"]
	if odd["state"] != "ready" || str(odd, "error") != "" {
		t.Fatalf("the server with a banner and odd names in /readyz: %v", odd)
	}
	tools, _ := odd["tools"].([]any)
	left, _ := odd["left_out"].([]any)
	if len(tools) != 5 || len(left) != 7 {
		t.Errorf("odd: tools %v, left out %v; want 5 and 7", tools, left)
	}
	for _, l := range left {
		if m, _ := l.(map[string]any); !strings.Contains(str(m, "reason"), "64") || strings.ContainsAny(str(m, "tool"), "\n\x1b\u202e") {
			t.Errorf("left out: %v", m)
		}
	}
	if list := toolList(t, base); !strings.Contains(list, "odd__lookup") || strings.Contains(list, "odd__bad") || strings.Contains(list, "dotted") {
		t.Errorf("GET /v1/tools: %s", list)
	}
	if m := servers["moved"]; m["state"] != "starting" || !strings.Contains(str(m, "error"), "redirect to another origin") {
		t.Errorf("the redirected server in /readyz: %v", m)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "look it up")
	res := st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" || !strings.Contains(res.Raw, "found tea") {
		t.Fatalf("lookup: %s", res.Raw)
	}
	st.waitFor("run_finished", nil)
}
