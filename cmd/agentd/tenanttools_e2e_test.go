package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/demo/billing"
)

const tenantToolRules = `[
 {"when":{"user":"^which tools$"},"reply":{"text":"tools: {{tools}}"}},
 {"when":{"user":"^op valid$"},"reply":{"tool_calls":[{"name":"billing__createRefund","arguments":{"body":{"order_id":"A-1004","amount":70}}}]}},
 {"when":{"user":"^look$"},"reply":{"tool_calls":[{"name":"notes__lookup","arguments":{"q":"tea"}}]}},
 {"when":{"tool_result":"billing__createRefund"},"reply":{"text":"createRefund {{status}}: {{reason}}"}},
 {"when":{"tool_result":"notes__lookup"},"reply":{"text":"lookup {{status}}: {{reason}}{{result}}"}}
]`

// Issue 21, per-tenant tool lists, through the real binary with two
// tenants: the billing connection lists tenant t1, the notes MCP server
// (a real subprocess) tenant t2. Each tenant sees only its own tools in
// GET /v1/tools and in its model's tool list; a call naming the other's
// tool anyway is a call of an unknown tool, refused before any card, and
// nothing reaches the downstream API or the MCP server.
func TestTenantToolLists(t *testing.T) {
	bin, server := agentdBinary(t), mcpTestServer(t)
	const keyA, keyB = "op-key-tenant-a", "op-key-tenant-b"
	api := billing.New()
	downstream := httptest.NewServer(api.Handler())
	t.Cleanup(downstream.Close)
	dir, _ := writeProject(t, projectOpts{keys: map[string][3]string{keyA: {"t1", "operator"}, keyB: {"t2", "operator"}}})
	writeAgent(t, dir, tenantToolRules, nil)
	cdir := filepath.Join(dir, "connections", "billing")
	must(t, os.MkdirAll(cdir, 0o755))
	doc, err := fsRead("connections/billing/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, "openapi.json"), doc, 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(connPolicy), 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(fmt.Sprintf(
		`{"base_url": %q, "openapi": "openapi.json", "tenant_ids": ["t1"]}`, downstream.URL+"/api")), 0o644))
	notes := filepath.Join(t.TempDir(), "notes")
	cfg, err := json.Marshal(map[string]any{"servers": []map[string]any{
		{"id": "notes", "command": []string{server}, "env": []string{"NOTES_FILE"}, "tenant_ids": []string{"t2"}},
	}, "trust_annotations": []string{"notes"}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "mcp.json"), cfg, 0o644))
	base, _ := startProcess(t, bin, dir, t.TempDir(), "NOTES_FILE="+notes)

	listed := func(key string) []string {
		status, got := call(t, http.MethodGet, base+"/v1/tools", key, "")
		if status != 200 {
			t.Fatalf("GET /v1/tools: %d %v", status, got)
		}
		var names []string
		list, _ := got["tools"].([]any)
		for _, x := range list {
			m, _ := x.(map[string]any)
			names = append(names, str(m, "name"))
		}
		return names
	}
	offered := func(key string) []string {
		conv, st := newConversation(t, base, key)
		send(t, base, key, conv, "which tools")
		msg := st.waitFor("message", nil)
		text, ok := strings.CutPrefix(str(msg.Data, "content"), "tools: ")
		if !ok {
			t.Fatalf("message: %s", msg.Raw)
		}
		return strings.Split(text, ",")
	}
	for _, tc := range []struct {
		key, tenant, mine, theirs string
	}{
		{keyA, "t1", "billing__createRefund", "notes__lookup"},
		{keyB, "t2", "notes__lookup", "billing__createRefund"},
	} {
		for what, names := range map[string][]string{"GET /v1/tools": listed(tc.key), "the model's tools": offered(tc.key)} {
			if !slices.Contains(names, tc.mine) || !slices.Contains(names, "record") {
				t.Errorf("tenant %s: %s %v lacks %s or the command tools", tc.tenant, what, names, tc.mine)
			}
			for _, n := range names {
				if strings.HasPrefix(n, strings.Split(tc.theirs, "__")[0]+"__") || (tc.tenant == "t2" && n == "request") {
					t.Errorf("tenant %s: %s lists %s, a tool of a source that is not its", tc.tenant, what, n)
				}
			}
		}
	}

	// A call of the other tenant's tool is refused as unknown.
	for _, tc := range []struct{ key, msg, tool string }{{keyA, "look", "notes__lookup"}, {keyB, "op valid", "billing__createRefund"}} {
		conv, st := newConversation(t, base, tc.key)
		send(t, base, tc.key, conv, tc.msg)
		ref := st.waitFor("tool_call_refused", nil)
		if ref.Data["tier"] != "never" || !strings.Contains(str(ref.Data, "reason"), fmt.Sprintf("%q is not available", tc.tool)) {
			t.Fatalf("%s: %s", tc.msg, ref.Raw)
		}
		st.waitFor("run_finished", nil)
		if hasEvent(st, "confirmation_required") {
			t.Fatalf("%s got a card: %s", tc.msg, st.summary())
		}
	}
	if n := len(api.Requests()); n != 0 {
		t.Errorf("tenant t2 reached the downstream API: %d requests", n)
	}
	if b, _ := os.ReadFile(notes); len(b) != 0 {
		t.Errorf("tenant t1 reached the MCP server: notes %q", b)
	}

	// Tenant t2's own MCP tool runs (trusted read-only: auto).
	conv, st := newConversation(t, base, keyB)
	send(t, base, keyB, conv, "look")
	if msg := st.waitFor("message", nil); !strings.HasPrefix(str(msg.Data, "content"), "lookup completed") {
		t.Fatalf("t2's lookup: %s", msg.Raw)
	}
}
