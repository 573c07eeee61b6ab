package project

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

const okKey = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" // sha256 of "secret"

// writeProject creates a project folder from a map of relative path to
// content. Files named run.sh are executable.
func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if filepath.Base(name) == "run.sh" {
			mode = 0o755
		}
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func withTool(files map[string]string, name string, extra string) map[string]string {
	files["tools/"+name+"/tool.json"] = `{"name": "` + name + `", "command": ["./run.sh"]` + extra + `}`
	files["tools/"+name+"/run.sh"] = "#!/bin/sh\necho '{}'\n"
	return files
}

func TestLoadFull(t *testing.T) {
	files := map[string]string{
		"agent.json": `{
			"name": "support",
			"system_prompt": "Be brief.",
			"model": {"provider": "openai", "model": "gpt-x", "api_key_env": "OPENAI_API_KEY"},
			"tools": ["refund", "lookup"],
			"approval_timeout": "2h30m",
			"max_turns": 7,
			"workspace": "ws",
			"subagents": [{"name": "researcher"}]
		}`,
		"agentd.json": `{
			"api_keys": [
				{"id": "web", "sha256": "` + okKey + `", "tenant_id": "acme", "project_id": "shop", "role": "client"},
				{"id": "ops", "sha256": "` + strings.Repeat("ab", 32) + `", "tenant_id": "acme", "project_id": "shop", "role": "operator"}
			],
			"webhooks": [{"id": "ops", "url": "https://ops.example.com/hooks", "secret_env": "PROJECT_TEST_WEBHOOK_SECRET"}],
			"limits": {"max_body_bytes": 4096, "max_streams_per_key": 12},
			"cors_origins": ["https://Chat.Example.com:443", "http://localhost:5173", "https://chat.example.com/"]
		}`,
	}
	withTool(files, "refund", `, "exposure": {"kind": "requires-confirmation"}`)
	withTool(files, "lookup", ``)
	withTool(files, "hidden", `, "llm_callable": false`)
	dir := writeProject(t, files)
	t.Setenv("PROJECT_TEST_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")

	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Dir != dir {
		t.Errorf("Dir = %q, want %q", p.Dir, dir)
	}
	want := Agent{
		Name:            "support",
		SystemPrompt:    "Be brief.",
		Model:           json.RawMessage(`{"provider":"openai","model":"gpt-x","api_key_env":"OPENAI_API_KEY"}`),
		Provider:        "openai",
		Tools:           []string{"refund", "lookup"},
		ApprovalTimeout: 150 * time.Minute,
		MaxTurns:        7,
		Workspace:       filepath.Join(dir, "ws"),
		Subagents:       []Subagent{{Name: "researcher", MaxTurns: DefaultSubagentMaxTurns}},
	}
	if !reflect.DeepEqual(p.Agent, want) {
		t.Errorf("Agent = %+v\nwant    %+v", p.Agent, want)
	}
	wantServer := Server{
		APIKeys: []agentd.APIKey{
			{ID: "web", SHA256: okKey, TenantID: "acme", ProjectID: "shop", Role: "client"},
			{ID: "ops", SHA256: strings.Repeat("ab", 32), TenantID: "acme", ProjectID: "shop", Role: "operator"},
		},
		MaxBodyBytes:     4096,
		MaxStreamsPerKey: 12,
		CORSOrigins:      []string{"https://chat.example.com", "http://localhost:5173"},
	}
	if len(p.Server.Webhooks) != 1 || p.Server.Webhooks[0].ID != "ops" || p.Server.Webhooks[0].URL != "https://ops.example.com/hooks" {
		t.Errorf("Webhooks = %+v", p.Server.Webhooks)
	}
	p.Server.Webhooks = nil // webhook.ParseConfig's own tests check the rest
	if !reflect.DeepEqual(p.Server, wantServer) {
		t.Errorf("Server = %+v\nwant     %+v", p.Server, wantServer)
	}
	if len(p.Tools) != 3 || p.Tools["hidden"] == nil || p.Tools["hidden"].LLMCallable {
		t.Errorf("Tools = %v", p.Tools)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("Warnings = %q", p.Warnings)
	}
}

func TestLoadDefaults(t *testing.T) {
	files := map[string]string{
		"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`,
	}
	withTool(files, "zeta", ``)
	withTool(files, "alpha", ``)
	withTool(files, "internal", `, "llm_callable": false`)
	dir := writeProject(t, files)
	p, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := p.Agent
	if a.ApprovalTimeout != 15*time.Minute || a.MaxTurns != 20 || a.Tools != nil || a.SystemPrompt != "" ||
		a.Provider != "script" || a.Workspace != "" || a.Subagents != nil {
		t.Errorf("Agent defaults = %+v", a)
	}
	if p.Server.MaxBodyBytes != 1<<20 || p.Server.MaxStreamsPerKey != agentd.DefaultMaxStreamsPerKey || p.Server.APIKeys != nil || p.Server.Webhooks != nil {
		t.Errorf("Server defaults = %+v", p.Server)
	}
	if len(p.Tools) != 3 || p.Tools["internal"] == nil || p.Tools["internal"].LLMCallable {
		t.Errorf("Tools = %v", p.Tools)
	}
}

func TestLoadEmptyToolList(t *testing.T) {
	files := withTool(map[string]string{
		"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}, "tools": []}`,
	}, "t", ``)
	p, err := Load(writeProject(t, files), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Agent.Tools == nil || len(p.Agent.Tools) != 0 {
		t.Errorf(`"tools": [] must mean no tools, got %v`, p.Agent.Tools)
	}
}

func TestLoadWarnings(t *testing.T) {
	files := map[string]string{
		"agent.json":            `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`,
		"tools/empty/README.md": `nothing here`,
	}
	withTool(files, "never", `, "confirm": "never"`)
	p, err := Load(writeProject(t, files), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`tools/empty: no tool.json, folder ignored`,
		`tools/never/tool.json: confirm is "never": the tool is not registered`,
	}
	if !reflect.DeepEqual(p.Warnings, want) {
		t.Errorf("Warnings =\n%q\nwant\n%q", p.Warnings, want)
	}
	if _, ok := p.Tools["never"]; ok {
		t.Error(`confirm "never" tool registered`)
	}
}

func TestLoadAgentErrors(t *testing.T) {
	const model = `"model": {"provider": "script", "script": {"rules": []}}`
	tests := []struct {
		name, agent, want string
	}{
		{"syntax", "{\n  \"name\": \"a\",\n  \"max_turns\": 5,\n}", `agent.json: line 4, column 1: invalid character '}' looking for beginning of object key string`},
		{"truncated", `{"name": "a"`, `agent.json: line 1, column 13: unexpected end of JSON`},
		{"empty", ``, `agent.json: empty file, expected a JSON object`},
		{"array", `[]`, `agent.json: must be a JSON object`},
		{"unknown field", `{"name": "a", ` + model + `, "temperature": 1}`, `agent.json: field "temperature": unknown field`},
		{"no name", `{` + model + `}`, `agent.json: field "name": required`},
		{"bad name", `{"name": "my agent", ` + model + `}`, `agent.json: field "name": must be 1 to 64 letters, digits, '_' or '-', got "my agent"`},
		{"name type", `{"name": 1, ` + model + `}`, `agent.json: field "name": must be a string, got number`},
		{"prompt type", `{"name": "a", "system_prompt": ["x"], ` + model + `}`, `agent.json: field "system_prompt": must be a string, got array`},
		{"no model", `{"name": "a"}`, `agent.json: field "model": required, e.g. {"provider": "script", "script": "script.json"}`},
		{"null model", `{"name": "a", "model": null}`, `agent.json: field "model": required, e.g. {"provider": "script", "script": "script.json"}`},
		{"model string", `{"name": "a", "model": "gpt"}`, `agent.json: field "model": must be an object`},
		{"no provider", `{"name": "a", "model": {"script": {}}}`, `agent.json: field "model.provider": required: one of script, openai, anthropic`},
		{"provider type", `{"name": "a", "model": {"provider": 1}}`, `agent.json: field "model.provider": must be a string`},
		{"bad provider", `{"name": "a", "model": {"provider": "gemini"}}`, `agent.json: field "model.provider": must be one of script, openai, anthropic, got "gemini"`},
		{"tools type", `{"name": "a", ` + model + `, "tools": "t"}`, `agent.json: field "tools": must be an array of strings, got string`},
		{"bad duration", `{"name": "a", ` + model + `, "approval_timeout": "abc"}`, `agent.json: field "approval_timeout": time: invalid duration "abc"`},
		{"duration number", `{"name": "a", ` + model + `, "approval_timeout": 900}`, `agent.json: field "approval_timeout": must be a string, got number`},
		{"zero duration", `{"name": "a", ` + model + `, "approval_timeout": "0s"}`, `agent.json: field "approval_timeout": must be positive, got "0s"`},
		{"negative duration", `{"name": "a", ` + model + `, "approval_timeout": "-5m"}`, `agent.json: field "approval_timeout": must be positive, got "-5m"`},
		{"zero turns", `{"name": "a", ` + model + `, "max_turns": 0}`, `agent.json: field "max_turns": must be at least 1, got 0`},
		{"fractional turns", `{"name": "a", ` + model + `, "max_turns": 2.5}`, `agent.json: field "max_turns": must be an integer, got number 2.5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := withTool(map[string]string{"agent.json": tt.agent}, "t", ``)
			withTool(files, "hidden", `, "llm_callable": false`)
			_, err := Load(writeProject(t, files), nil)
			if err == nil {
				t.Fatalf("Load succeeded, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q\nwant    %q", err, tt.want)
			}
		})
	}
}

func TestLoadServerErrors(t *testing.T) {
	key := func(fields string) string { return `{"api_keys": [{` + fields + `}]}` }
	const good = `"id": "k", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "client"`
	tests := []struct {
		name, server, want string
	}{
		{"syntax", "{\"api_keys\": [}", `agentd.json: line 1, column 15: invalid character '}' looking for beginning of value`},
		{"unknown field", `{"port": 8080}`, `agentd.json: field "port": unknown field`},
		{"api_keys type", `{"api_keys": {}}`, `agentd.json: field "api_keys": must be an array, got object`},
		{"key not object", `{"api_keys": ["abc"]}`, `agentd.json: field "api_keys[0]": must be an object`},
		{"key unknown field", key(good + `, "key": "secret"`), `agentd.json: field "api_keys[0].key": unknown field`},
		{"no id", key(`"sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].id": required`},
		{"no tenant", key(`"id": "k", "sha256": "` + okKey + `", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].tenant_id": required`},
		{"no project", key(`"id": "k", "sha256": "` + okKey + `", "tenant_id": "t", "role": "client"`), `agentd.json: field "api_keys[0].project_id": required`},
		{"bad tenant", key(`"id": "k", "sha256": "` + okKey + `", "tenant_id": "a:b", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].tenant_id": must be 1 to 128 letters`},
		{"no sha", key(`"id": "k", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].sha256": must be 64 lowercase hex characters, the SHA-256 of the key: printf %s "$KEY" | sha256sum`},
		{"uppercase sha", key(`"id": "k", "sha256": "` + strings.ToUpper(okKey) + `", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].sha256": must be 64 lowercase hex characters`},
		{"short sha", key(`"id": "k", "sha256": "abc", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].sha256": must be 64 lowercase hex characters`},
		{"no role", key(`"id": "k", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p"`), `agentd.json: field "api_keys[0].role": required: one of client, delegate, operator, admin`},
		{"bad role", key(`"id": "k", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "root"`), `agentd.json: field "api_keys[0].role": must be one of client, delegate, operator, admin, got "root"`},
		{"duplicate id", `{"api_keys": [{` + good + `}, {"id": "k", "sha256": "` + strings.Repeat("0", 64) + `", "tenant_id": "t", "project_id": "p", "role": "admin"}]}`, `agentd.json: field "api_keys[1].id": "k" is used by another key`},
		{"reserved id schedule", key(`"id": "schedule", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "admin"`),
			`agentd.json: field "api_keys[0].id": "schedule" is a principal id the server uses itself (dev, schedule, system, anonymous): choose another`},
		{"reserved id dev", key(`"id": "dev", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].id": "dev" is a principal id`},
		{"reserved id system", key(`"id": "system", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].id": "system" is a principal id`},
		{"reserved id anonymous", key(`"id": "anonymous", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "client"`), `agentd.json: field "api_keys[0].id": "anonymous" is a principal id`},
		{"duplicate key", `{"api_keys": [{` + good + `}, {"id": "k2", "sha256": "` + okKey + `", "tenant_id": "t2", "project_id": "p", "role": "admin"}]}`, `agentd.json: field "api_keys[1].sha256": the same key as "k"`},
		{"webhooks type", `{"webhooks": {"id": "x"}}`, `agentd.json: field "webhooks": must be an array`},
		{"limits unknown", `{"limits": {"max_body": 1}}`, `agentd.json: field "limits.max_body": unknown field`},
		{"limits zero", `{"limits": {"max_body_bytes": 0}}`, `agentd.json: field "limits.max_body_bytes": must be at least 1, got 0`},
		{"limits type", `{"limits": {"max_body_bytes": "1MB"}}`, `agentd.json: field "limits.max_body_bytes": must be an integer, got string`},
		{"limits not object", `{"limits": 5}`, `agentd.json: field "limits": must be an object`},
		{"streams zero", `{"limits": {"max_streams_per_key": 0}}`, `agentd.json: field "limits.max_streams_per_key": must be at least 1, got 0`},
		{"streams type", `{"limits": {"max_streams_per_key": 1.5}}`, `agentd.json: field "limits.max_streams_per_key": must be an integer, got number`},
		{"cors wildcard", `{"cors_origins": ["*"]}`, `agentd.json: field "cors_origins[0]": "*": the scheme must be http or https`},
		{"cors path", `{"cors_origins": ["https://ok.example", "https://a.example/app"]}`, `agentd.json: field "cors_origins[1]": "https://a.example/app": an origin is only scheme://host[:port]`},
		{"cors host wildcard", `{"cors_origins": ["https://*.example.com"]}`, `agentd.json: field "cors_origins[0]"`},
		{"cors null", `{"cors_origins": ["null"]}`, `agentd.json: field "cors_origins[0]"`},
		{"cors type", `{"cors_origins": "https://a.example"}`, `agentd.json: field "cors_origins": must be an array`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{
				"agent.json":  `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`,
				"agentd.json": tt.server,
			})
			_, err := Load(dir, nil)
			if err == nil {
				t.Fatalf("Load succeeded, want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant prefix %q", err, tt.want)
			}
		})
	}
}

func TestLoadFolderErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope"), nil); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("missing folder: err = %v", err)
	}
	dir := t.TempDir()
	if _, err := Load(dir, nil); err == nil || !strings.HasPrefix(err.Error(), "agent.json: not found in ") {
		t.Errorf("no agent.json: err = %v", err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file, nil); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as folder: err = %v", err)
	}
	// A tool error stops the load and names the tool file.
	files := withTool(map[string]string{"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`}, "bad", `, "exposure": {"kind": "x"}`)
	_, err := Load(writeProject(t, files), nil)
	if want := `tools/bad/tool.json: field "exposure.kind": must be one of open, requires-confirmation, operator-gated`; err == nil || err.Error() != want {
		t.Errorf("tool error = %v, want %q", err, want)
	}
}

// Hooks load in name order; a broken hook.json is a load error naming the
// file and the field.
func TestLoadHooks(t *testing.T) {
	const agent = `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`
	p, err := Load(writeProject(t, map[string]string{"agent.json": agent,
		"hooks/b/hook.json": `{"points": ["postToolUse"], "command": ["./b.sh"]}`,
		"hooks/a/hook.json": `{"points": ["preToolUse"], "matcher": "pay|refund_.*", "command": ["./a.sh"], "timeout_ms": 100, "fail_policy": "open"}`,
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hooks) != 2 || p.Hooks[0].Name != "a" || !p.Hooks[0].Pre || !p.Hooks[0].FailOpen || p.Hooks[1].Name != "b" || !p.Hooks[1].Post {
		t.Fatalf("hooks = %+v", p.Hooks)
	}
	for body, want := range map[string]string{
		`{}`: `hooks/h/hook.json: field "points": required`,
		`{"points": ["preToolUse"], "command": ["x"], "matcher": "("}`:         `hooks/h/hook.json: field "matcher": not an RE2 expression`,
		`{"points": ["pre"], "command": ["x"]}`:                                `hooks/h/hook.json: field "points[0]": must be "preToolUse" or "postToolUse"`,
		`{"points": ["preToolUse"]}`:                                           `hooks/h/hook.json: field "command": required`,
		`{"points": ["preToolUse"], "command": ["x"], "fail_policy": "maybe"}`: `hooks/h/hook.json: field "fail_policy"`,
		`{"points": ["preToolUse"], "command": ["x"], "timeout_ms": 0}`:        `hooks/h/hook.json: field "timeout_ms"`,
		`{"points": ["preToolUse"], "command": ["x"], "timeout": 5}`:           `hooks/h/hook.json: `,
	} {
		_, err := Load(writeProject(t, map[string]string{"agent.json": agent, "hooks/h/hook.json": body}), nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func TestLoadMCP(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`,
		"mcp.json": `{"servers": [{"id": "notes", "command": ["./notes", "--flag"], "env": ["NOTES_TOKEN"], "timeout_ms": 1500},
			{"id": "crm", "url": "https://crm.example/mcp", "headers_env": {"Authorization": "CRM_MCP_AUTH"}}],
			"tiers": {"notes__search": "auto", "crm__delete": "confirm"}, "trust_annotations": ["notes"]}`,
	})
	getenv := func(name string) string {
		if name == "CRM_MCP_AUTH" {
			return "Bearer x"
		}
		return ""
	}
	p, err := Load(dir, getenv)
	if err != nil {
		t.Fatal(err)
	}
	c := p.MCP
	if c == nil || len(c.Servers) != 2 {
		t.Fatalf("MCP = %+v", c)
	}
	notes, crm := c.Servers[0], c.Servers[1]
	if notes.ID != "notes" || notes.Dir != p.Dir || notes.Command[1] != "--flag" || notes.Env[0] != "NOTES_TOKEN" || notes.Timeout != 1500*time.Millisecond {
		t.Errorf("notes = %+v", notes)
	}
	if crm.URL != "https://crm.example/mcp" || crm.Headers["Authorization"] != "Bearer x" || crm.Timeout != agentd.DefaultMCPCallTimeout {
		t.Errorf("crm = %+v", crm)
	}
	if c.Tiers["notes__search"] != agentd.TierAuto || c.Tiers["crm__delete"] != agentd.TierConfirm || !c.Trust["notes"] || c.Trust["crm"] {
		t.Errorf("tiers %v, trust %v", c.Tiers, c.Trust)
	}
	none := writeProject(t, map[string]string{"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`})
	if p, err := Load(none, nil); err != nil || p.MCP != nil {
		t.Errorf("no mcp.json: %+v, %v", p.MCP, err)
	}
}

func TestLoadMCPErrors(t *testing.T) {
	srv := func(fields string) string { return `{"servers": [{` + fields + `}]}` }
	tests := []struct{ name, mcp, want string }{
		{"syntax", `{"servers": [}`, `mcp.json: line 1, column 14:`},
		{"unknown field", `{"server": []}`, `mcp.json: field "server": unknown field`},
		{"server unknown field", srv(`"id": "a", "command": ["x"], "args": ["y"]`), `mcp.json: field "servers[0].args": unknown field`},
		{"bad id", srv(`"id": "A b", "command": ["x"]`), `mcp.json: field "servers[0].id": must match`},
		{"id with __", srv(`"id": "a__b", "command": ["x"]`), `mcp.json: field "servers[0].id": must match`},
		{"neither", srv(`"id": "a"`), `mcp.json: field "servers[0]": needs "command" (a stdio server) or "url"`},
		{"both", srv(`"id": "a", "command": ["x"], "url": "http://h/mcp"`), `mcp.json: field "servers[0]": has both "command"`},
		{"empty program", srv(`"id": "a", "command": [""]`), `mcp.json: field "servers[0].command[0]": must name a program`},
		{"bad env", srv(`"id": "a", "command": ["x"], "env": ["A-B"]`), `mcp.json: field "servers[0].env[0]": must be an environment variable name`},
		{"headers on stdio", srv(`"id": "a", "command": ["x"], "headers_env": {"X": "Y"}`), `mcp.json: field "servers[0].headers_env": is for HTTP servers`},
		{"bad url", srv(`"id": "a", "url": "ftp://h/mcp"`), `mcp.json: field "servers[0].url": must be an http or https URL, got "ftp://h/mcp"`},
		{"env on http", srv(`"id": "a", "url": "http://h/mcp", "env": ["X"]`), `mcp.json: field "servers[0].env": is for stdio servers`},
		{"header unset", srv(`"id": "a", "url": "http://h/mcp", "headers_env": {"Authorization": "UNSET_VAR"}`), `mcp.json: field "servers[0].headers_env.Authorization": environment variable UNSET_VAR is not set`},
		{"bad header", srv(`"id": "a", "url": "http://h/mcp", "headers_env": {"Bad Header": "X"}`), `mcp.json: field "servers[0].headers_env.Bad Header": must be an HTTP header name`},
		{"timeout", srv(`"id": "a", "command": ["x"], "timeout_ms": 0`), `mcp.json: field "servers[0].timeout_ms": must be between 1 and 3600000, got 0`},
		{"duplicate id", `{"servers": [{"id": "a", "command": ["x"]}, {"id": "a", "command": ["y"]}]}`, `mcp.json: field "servers[1].id": server id "a" is used twice`},
		{"trust unknown", `{"servers": [{"id": "a", "command": ["x"]}], "trust_annotations": ["b"]}`, `mcp.json: field "trust_annotations[0]": no server has id "b"`},
		{"tier name", `{"servers": [{"id": "a", "command": ["x"]}], "tiers": {"search": "auto"}}`, `mcp.json: field "tiers.search": must name a tool as <server id>__<tool>`},
		{"tier server", `{"servers": [{"id": "a", "command": ["x"]}], "tiers": {"b__search": "auto"}}`, `mcp.json: field "tiers.b__search": must name a tool`},
		{"tier value", `{"servers": [{"id": "a", "command": ["x"]}], "tiers": {"a__search": "review"}}`, `mcp.json: field "tiers.a__search": must be "auto" or "confirm", got "review"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeProject(t, map[string]string{
				"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`,
				"mcp.json":   tt.mcp,
			})
			_, err := Load(dir, func(string) string { return "" })
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant prefix %q", err, tt.want)
			}
		})
	}
}

// TestLoadDecisionLinkConfig: public_url is checked and loses its trailing
// slash; a webhook's include_decision_links needs a links_key_id naming a
// key of api_keys, and public_url (SPEC §11.4).
func TestLoadDecisionLinkConfig(t *testing.T) {
	t.Setenv("PROJECT_TEST_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	keys := `"api_keys": [{"id": "ops", "sha256": "` + okKey + `", "tenant_id": "acme", "project_id": "shop", "role": "operator"}]`
	hook := func(extra string) string {
		return `"webhooks": [{"id": "bot", "url": "https://bot.example.com/hooks", "secret_env": "PROJECT_TEST_WEBHOOK_SECRET"` + extra + `}]`
	}
	load := func(server string) (*Project, error) {
		files := map[string]string{"agent.json": `{"name": "a", "system_prompt": "x", "model": {"provider": "script", "script": {"rules": []}}}`,
			"agentd.json": server}
		return Load(writeProject(t, files), nil)
	}
	p, err := load(`{` + keys + `, "public_url": "https://agentd.example.com/", ` + hook(`, "include_decision_links": true, "links_key_id": "ops"`) + `}`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Server.PublicURL != "https://agentd.example.com" || !p.Server.Webhooks[0].IncludeDecisionLinks || p.Server.Webhooks[0].LinksKeyID != "ops" {
		t.Fatalf("server %+v", p.Server)
	}
	for _, tt := range []struct{ name, server, want string }{
		{"unknown key", `{` + keys + `, "public_url": "https://a.example", ` + hook(`, "include_decision_links": true, "links_key_id": "nobody"`) + `}`,
			`agentd.json: field "webhooks[0].links_key_id": "nobody" is not the id of a key of api_keys`},
		{"flag without key", `{` + keys + `, "public_url": "https://a.example", ` + hook(`, "include_decision_links": true`) + `}`,
			`agentd.json: field "webhooks[0].links_key_id": required with include_decision_links`},
		{"key without flag", `{` + keys + `, ` + hook(`, "links_key_id": "ops"`) + `}`,
			`agentd.json: field "webhooks[0].links_key_id": only with include_decision_links`},
		{"no public_url", `{` + keys + `, ` + hook(`, "include_decision_links": true, "links_key_id": "ops"`) + `}`,
			`agentd.json: field "webhooks[0].include_decision_links": needs public_url`},
		{"bad public_url", `{"public_url": "ftp://a.example"}`, `agentd.json: field "public_url": must be an http or https URL`},
		{"public_url with query", `{"public_url": "https://a.example/?x=1"}`, `agentd.json: field "public_url"`},
	} {
		if _, err := load(tt.server); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want prefix %q", tt.name, err, tt.want)
		}
	}
}
