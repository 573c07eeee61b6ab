package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// registryProject is a test project (writeProject's tools) plus a
// connection "billing" with the demo's OpenAPI document, whose operation
// tools are billing__<operationId>, agent.json listing tools (nil: all),
// and extra command tools by name.
func registryProject(t *testing.T, agentTools []string, extraTools ...string) string {
	t.Helper()
	dir, _ := writeProject(t, projectOpts{})
	cdir := filepath.Join(dir, "connections", "billing")
	must(t, os.MkdirAll(cdir, 0o755))
	doc, err := fsRead("connections/billing/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, "openapi.json"), doc, 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(`{"base_url": "http://127.0.0.1:1/api", "openapi": "openapi.json"}`), 0o644))
	for _, name := range extraTools {
		td := filepath.Join(dir, "tools", name)
		must(t, os.MkdirAll(td, 0o755))
		must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(fmt.Sprintf(`{"name": %q, "command": ["/bin/true"]}`, name)), 0o644))
	}
	list := ""
	if agentTools != nil {
		b, _ := json.Marshal(agentTools)
		list = `, "tools": ` + string(b)
	}
	agent := `{"name": "test", "model": {"provider": "script", "script": {"rules": []}}` + list + `}`
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	return dir
}

// A tool name two sources define, and an agent.json tool no source has
// (or the model may not see), refuse to start, naming both definitions or
// the entry.
func TestServeRefusesToolRegistryErrors(t *testing.T) {
	tests := []struct {
		name       string
		agentTools []string
		extra      []string
		want       string
	}{
		{"a command tool and an operation", nil, []string{"billing__getOrder"},
			`load project: tool "billing__getOrder" is defined by tools (tools/billing__getOrder/tool.json) and connection "billing"`},
		{"a command tool and the request tool", nil, []string{"request"},
			`load project: tool "request" is defined by tools (tools/request/tool.json) and connections (the request tool)`},
		{"an unknown tool", []string{"pay", "nope"}, nil,
			`load project: agent.json: field "tools[1]": unknown tool "nope": no tool source defines it (sources: tools, connections, billing)`},
		{"a tool listed twice", []string{"request", "request"}, nil,
			`load project: agent.json: field "tools[1]": tool "request" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := registryProject(t, tt.agentTools, tt.extra...)
			err := run(context.Background(), []string{"serve", "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir()},
				os.Getenv, io.Discard, io.Discard)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("serve: %v\nwant %s", err, tt.want)
			}
		})
	}
}

// The model sees what the registry gives it: agent.json's tools from every
// source, or every llm_callable tool, sorted by name.
func TestServeListsTheRegistrysTools(t *testing.T) {
	for _, tt := range []struct {
		agentTools []string
		want       []string
	}{
		{[]string{"request", "pay", "billing__getOrder"}, []string{"billing__getOrder", "pay", "request"}},
		{nil, []string{"big", "billing__createRefund", "billing__deleteInvoice", "billing__getInvoice", "billing__getOrder",
			"billing__listInvoices", "billing__runReport", "billing__updateInvoice", "fail", "garbage", "hang", "pay", "record", "request"}},
	} {
		base, stop := startServer(t, registryProject(t, tt.agentTools), t.TempDir(), nil)
		status, body := call(t, http.MethodGet, base+"/v1/tools", "", "")
		stop()
		if status != 200 {
			t.Fatalf("tools: %d", status)
		}
		var got []string
		servers := map[string]string{}
		list, _ := body["tools"].([]any)
		for _, x := range list {
			m, _ := x.(map[string]any)
			got = append(got, str(m, "name"))
			servers[str(m, "name")] = str(m, "server_id")
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("agent.json tools %v: the model sees %v, want %v", tt.agentTools, got, tt.want)
		}
		if servers["pay"] != "tools" || servers["request"] != "connections" || servers["billing__getOrder"] != "billing" {
			t.Errorf("server ids %v", servers)
		}
	}
}
