package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeTool creates toolsDir/<name>/tool.json with body and an executable
// run.sh next to it.
func writeTool(t *testing.T, toolsDir, name, body string) {
	t.Helper()
	dir := filepath.Join(toolsDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDirFull(t *testing.T) {
	toolsDir := filepath.Join(t.TempDir(), "tools")
	writeTool(t, toolsDir, "refund_payment", `{
		"name": "refund_payment",
		"description": "Refund a payment",
		"parameters": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
		"exposure": {"kind": "requires-confirmation", "prompt": "Refunds move money"},
		"llm_callable": true,
		"confirm": "review",
		"command": ["./run.sh", "--live"],
		"env": ["BILLING_TOKEN"],
		"timeout_ms": 5000,
		"idempotent": true,
		"execution": "durable"
	}`)
	writeTool(t, toolsDir, "minimal", `{"name": "minimal", "command": ["./run.sh"]}`)
	writeTool(t, toolsDir, "inline", `{"name": "inline", "command": ["./run.sh"], "execution": "inline"}`)

	got, warnings, err := LoadDir(toolsDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q", warnings)
	}
	if len(got) != 3 {
		t.Fatalf("loaded %d tools, want 3", len(got))
	}
	r := got["refund_payment"]
	wantDir, _ := filepath.Abs(filepath.Join(toolsDir, "refund_payment"))
	want := Tool{
		Name:        "refund_payment",
		Description: "Refund a payment",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
		Exposure:    Exposure{Kind: ExposureRequiresConfirmation, Prompt: "Refunds move money"},
		LLMCallable: true,
		Confirm:     "review",
		Command:     []string{"./run.sh", "--live"},
		Env:         []string{"BILLING_TOKEN"},
		Timeout:     5 * time.Second,
		Idempotent:  true,
		Durable:     true,
		Dir:         wantDir,
	}
	if r.schema == nil {
		t.Error("schema not compiled")
	}
	r2 := *r
	r2.schema = nil
	if !reflect.DeepEqual(r2, want) {
		t.Errorf("tool = %+v\nwant   %+v", r2, want)
	}

	m := got["minimal"]
	if m.Exposure.Kind != ExposureOpen || !m.LLMCallable || m.Confirm != "" || m.Timeout != 30*time.Second ||
		m.Idempotent || m.Durable || got["inline"].Durable || string(m.Parameters) != `{"type":"object"}` {
		t.Errorf("defaults wrong: %+v", m)
	}
	spec := m.Spec()
	if spec.Name != "minimal" || string(spec.Parameters) != `{"type":"object"}` {
		t.Errorf("Spec() = %+v", spec)
	}
}

func TestLoadDirMissing(t *testing.T) {
	got, warnings, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
	if err != nil || len(warnings) != 0 || got == nil || len(got) != 0 {
		t.Errorf("LoadDir(missing) = %v, %q, %v; want an empty map", got, warnings, err)
	}
}

func TestLoadDirWarnings(t *testing.T) {
	toolsDir := filepath.Join(t.TempDir(), "tools")
	writeTool(t, toolsDir, "danger", `{"name": "danger", "confirm": "never", "command": ["./run.sh"]}`)
	writeTool(t, toolsDir, "ok", `{"name": "ok", "command": ["./run.sh"]}`)
	writeTool(t, toolsDir, "later", `{"name": "later", "command": ["agentd-no-such-program-xyz"]}`)
	if err := os.MkdirAll(filepath.Join(toolsDir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(toolsDir, "README.md"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}

	got, warnings, err := LoadDir(toolsDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["danger"]; ok {
		t.Error(`a confirm "never" tool was registered`)
	}
	if _, ok := got["ok"]; !ok {
		t.Error("ok was not loaded")
	}
	if _, ok := got["later"]; !ok {
		t.Error("a tool whose program is not in PATH yet was not loaded")
	}
	want := []string{
		`tools/danger/tool.json: confirm is "never": the tool is not registered`,
		`tools/later/tool.json: command "agentd-no-such-program-xyz" not found in PATH`,
		`tools/lib: no tool.json, folder ignored`,
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings =\n%q\nwant\n%q", warnings, want)
	}
}

func TestLoadDirErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"syntax", "{\n  \"name\": \"x\",\n  \"command\": [\"./run.sh\"\n}", `tools/x/tool.json: line 4, column 1: invalid character '}' after array element`},
		{"truncated", `{"name": "x"`, `tools/x/tool.json: line 1, column 13: unexpected end of JSON`},
		{"empty file", ``, `tools/x/tool.json: empty file, expected a JSON object`},
		{"not an object", `["x"]`, `tools/x/tool.json: must be a JSON object`},
		{"trailing data", `{"name": "x", "command": ["./run.sh"]} {}`, `tools/x/tool.json: line 1, column 41: unexpected data after the JSON object`},
		{"unknown field", `{"name": "x", "command": ["./run.sh"], "runtime": "durable"}`, `tools/x/tool.json: field "runtime": unknown field`},
		{"execution value", `{"name": "x", "command": ["./run.sh"], "execution": "eventually"}`, `tools/x/tool.json: field "execution": tool "x": must be "inline" or "durable", got "eventually"`},
		{"execution type", `{"name": "x", "command": ["./run.sh"], "execution": true}`, `tools/x/tool.json: field "execution": must be a string, got bool`},
		{"missing name", `{"command": ["./run.sh"]}`, `tools/x/tool.json: field "name": required (the folder name, "x")`},
		{"name differs", `{"name": "y", "command": ["./run.sh"]}`, `tools/x/tool.json: field "name": must equal the folder name "x", got "y"`},
		{"name type", `{"name": 7, "command": ["./run.sh"]}`, `tools/x/tool.json: field "name": must be a string, got number`},
		{"description type", `{"name": "x", "description": true, "command": ["./run.sh"]}`, `tools/x/tool.json: field "description": must be a string, got bool`},
		{"parameters not object", `{"name": "x", "parameters": [1], "command": ["./run.sh"]}`, `tools/x/tool.json: field "parameters": must be a JSON Schema object`},
		{"parameters wrong type", `{"name": "x", "parameters": {"type": "string"}, "command": ["./run.sh"]}`, `tools/x/tool.json: field "parameters": "type" must be "object": arguments are always a JSON object`},
		{"parameters invalid schema", `{"name": "x", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}, "command": ["./run.sh"]}`, `tools/x/tool.json: field "parameters": not a valid JSON Schema: at '/properties/a/type': value must be one of`},
		{"parameters external ref", `{"name": "x", "parameters": {"$ref": "https://example.com/s.json"}, "command": ["./run.sh"]}`, `tools/x/tool.json: field "parameters": failing loading "https://example.com/s.json"`},
		{"exposure kind", `{"name": "x", "exposure": {"kind": "secret"}, "command": ["./run.sh"]}`, `tools/x/tool.json: field "exposure.kind": must be one of open, requires-confirmation, operator-gated`},
		{"exposure unknown", `{"name": "x", "exposure": {"kind": "open", "label": "a"}, "command": ["./run.sh"]}`, `tools/x/tool.json: field "exposure.label": unknown field`},
		{"exposure not object", `{"name": "x", "exposure": "open", "command": ["./run.sh"]}`, `tools/x/tool.json: field "exposure": must be an object`},
		{"exposure prompt type", `{"name": "x", "exposure": {"prompt": 1}, "command": ["./run.sh"]}`, `tools/x/tool.json: field "exposure.prompt": must be a string, got number`},
		{"llm_callable type", `{"name": "x", "llm_callable": "yes", "command": ["./run.sh"]}`, `tools/x/tool.json: field "llm_callable": must be a boolean, got string`},
		{"confirm value", `{"name": "x", "confirm": "always", "command": ["./run.sh"]}`, `tools/x/tool.json: field "confirm": must be false, true, "review" or "never", got "always"`},
		{"confirm number", `{"name": "x", "confirm": 1, "command": ["./run.sh"]}`, `tools/x/tool.json: field "confirm": must be false, true, "review" or "never", got 1`},
		{"command missing", `{"name": "x"}`, `tools/x/tool.json: field "command": required`},
		{"command empty", `{"name": "x", "command": []}`, `tools/x/tool.json: field "command": required`},
		{"command string", `{"name": "x", "command": "./run.sh"}`, `tools/x/tool.json: field "command": must be an array of strings, got string`},
		{"command program missing", `{"name": "x", "command": ["./nope.sh"]}`, `tools/x/tool.json: field "command": program "./nope.sh" not found`},
		{"command program not executable", `{"name": "x", "command": ["./tool.json"]}`, `tools/x/tool.json: field "command": program "./tool.json" is not executable (chmod +x it)`},
		{"env name", `{"name": "x", "command": ["./run.sh"], "env": ["BAD-NAME"]}`, `tools/x/tool.json: field "env[0]": not a valid environment variable name: "BAD-NAME"`},
		{"env twice", `{"name": "x", "command": ["./run.sh"], "env": ["A", "A"]}`, `tools/x/tool.json: field "env[1]": "A" is listed twice`},
		{"timeout zero", `{"name": "x", "command": ["./run.sh"], "timeout_ms": 0}`, `tools/x/tool.json: field "timeout_ms": must be between 1 and 600000 (10m0s), got 0`},
		{"timeout too long", `{"name": "x", "command": ["./run.sh"], "timeout_ms": 600001}`, `tools/x/tool.json: field "timeout_ms": must be between 1 and 600000`},
		{"timeout fraction", `{"name": "x", "command": ["./run.sh"], "timeout_ms": 1.5}`, `tools/x/tool.json: field "timeout_ms": must be an integer, got number 1.5`},
		{"idempotent type", `{"name": "x", "command": ["./run.sh"], "idempotent": "true"}`, `tools/x/tool.json: field "idempotent": must be a boolean, got string`},
		{"uses not object", `{"name": "x", "command": ["./run.sh"], "uses": ["a"]}`, `tools/x/tool.json: field "uses": must be an object`},
		{"uses unknown", `{"name": "x", "command": ["./run.sh"], "uses": {"connections": ["a"]}}`, `tools/x/tool.json: field "uses.connections": unknown field`},
		{"uses empty", `{"name": "x", "command": ["./run.sh"], "uses": {"tools": []}}`, `tools/x/tool.json: field "uses.tools": must list the tools the command calls`},
		{"uses bad name", `{"name": "x", "command": ["./run.sh"], "uses": {"tools": ["a b"]}}`, `tools/x/tool.json: field "uses.tools[0]": must be a tool name, got "a b"`},
		{"uses itself", `{"name": "x", "command": ["./run.sh"], "uses": {"tools": ["a", "x"]}}`, `tools/x/tool.json: field "uses.tools[1]": a tool cannot use itself`},
		{"uses twice", `{"name": "x", "command": ["./run.sh"], "uses": {"tools": ["a", "a"]}}`, `tools/x/tool.json: field "uses.tools[1]": "a" is listed twice`},
		{"triggers not object", `{"name": "x", "command": ["./run.sh"], "triggers": true}`, `tools/x/tool.json: field "triggers": must be an object`},
		{"triggers unknown", `{"name": "x", "command": ["./run.sh"], "triggers": {"webhook": true}}`, `tools/x/tool.json: field "triggers.webhook": unknown field`},
		{"triggers invoke type", `{"name": "x", "command": ["./run.sh"], "triggers": {"invoke": "yes"}}`, `tools/x/tool.json: field "triggers.invoke": must be a boolean, got string`},
		{"schedule bad cron", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": "61 * * * *"}}`, `tools/x/tool.json: field "triggers.schedule": schedule "61 * * * *": end of range (61) above maximum (59)`},
		{"schedule six fields", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": "0 0 * * * *"}}`, `tools/x/tool.json: field "triggers.schedule": schedule "0 0 * * * *": expected exactly 5 fields`},
		{"schedule empty", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": " "}}`, `tools/x/tool.json: field "triggers.schedule": empty schedule`},
		{"schedule every bad", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": "@every soon"}}`, `tools/x/tool.json: field "triggers.schedule": schedule "@every soon": time: invalid duration`},
		{"schedule every short", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": "@every 500ms"}}`, `tools/x/tool.json: field "triggers.schedule": schedule "@every 500ms": the period must be whole seconds, at least 1s`},
		{"schedule time zone", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": "TZ=Europe/Paris 0 * * * *"}}`, `tools/x/tool.json: field "triggers.schedule": schedule "TZ=Europe/Paris 0 * * * *": time zones are not supported`},
		{"schedule needs confirmation", `{"name": "x", "command": ["./run.sh"], "exposure": {"kind": "requires-confirmation"}, "triggers": {"schedule": "@hourly"}}`, `tools/x/tool.json: field "triggers.schedule": a tool whose exposure is "requires-confirmation" cannot be scheduled`},
		{"tenant without schedule", `{"name": "x", "command": ["./run.sh"], "triggers": {"invoke": true, "tenant_id": "acme"}}`, `tools/x/tool.json: field "triggers": tenant_id and project_id name whom a scheduled run acts for: they need a schedule`},
		{"schedule bad tenant", `{"name": "x", "command": ["./run.sh"], "triggers": {"schedule": "@hourly", "tenant_id": "a b"}}`, `tools/x/tool.json: field "triggers.tenant_id": must be 1 to 128`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toolsDir := filepath.Join(t.TempDir(), "tools")
			writeTool(t, toolsDir, "x", tt.body)
			got, _, err := LoadDir(toolsDir)
			if err == nil {
				t.Fatalf("LoadDir succeeded (%d tools), want error %q", len(got), tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant prefix %q", err, tt.want)
			}
		})
	}
}

func TestLoadDirBadFolderName(t *testing.T) {
	toolsDir := filepath.Join(t.TempDir(), "tools")
	writeTool(t, toolsDir, "has space", `{"name": "has space", "command": ["./run.sh"]}`)
	_, _, err := LoadDir(toolsDir)
	want := `tools/has space/tool.json: field "name": must be 1 to 64 letters, digits, '_' or '-', got "has space"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestLoadTriggers(t *testing.T) {
	toolsDir := filepath.Join(t.TempDir(), "tools")
	writeTool(t, toolsDir, "report", `{"name": "report", "command": ["./run.sh"],
		"triggers": {"invoke": true, "schedule": "*/15 * * * *", "tenant_id": "acme", "project_id": "shop"}}`)
	writeTool(t, toolsDir, "tick", `{"name": "tick", "command": ["./run.sh"], "triggers": {"schedule": "@every 1s"}}`)
	writeTool(t, toolsDir, "plain", `{"name": "plain", "command": ["./run.sh"]}`)
	got, _, err := LoadDir(toolsDir)
	if err != nil {
		t.Fatal(err)
	}
	r := got["report"].Triggers
	if !r.Invoke || r.Schedule == nil || r.Schedule.String() != "*/15 * * * *" || r.TenantID != "acme" || r.ProjectID != "shop" {
		t.Errorf("report's triggers = %+v", r)
	}
	at := time.Date(2026, 12, 2, 10, 7, 0, 0, time.UTC)
	if next := r.Schedule.Next(at); !next.Equal(time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC)) {
		t.Errorf("next tick after %v = %v", at, next)
	}
	if tr := got["tick"].Triggers; tr.Invoke || tr.Schedule == nil || tr.TenantID != "default" || tr.ProjectID != "default" {
		t.Errorf("tick's triggers = %+v", tr)
	}
	if tr := got["plain"].Triggers; tr.Invoke || tr.Schedule != nil {
		t.Errorf("plain's triggers = %+v", tr)
	}
	src := NewSource(got)
	for _, def := range src.Tools() {
		if want := def.Spec.Name == "report"; def.Invoke != want {
			t.Errorf("%s: toolset.Tool.Invoke = %v, want %v", def.Spec.Name, def.Invoke, want)
		}
	}
}
