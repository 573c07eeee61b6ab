//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

var _ toolset.Source = (*Source)(nil)

// The source lists every loaded tool, sorted, with what confirm and the
// registry read, and runs a call as the tool's real subprocess.
func TestSource(t *testing.T) {
	dir := t.TempDir()
	for name, def := range map[string]string{
		"refund": `{"name":"refund","description":"Refund.","parameters":{"type":"object","properties":{"n":{"type":"number","default":1}}},` +
			`"exposure":{"kind":"requires-confirmation","prompt":"Moves money"},"idempotent":true,"command":["./run.sh"]}`,
		"audit": `{"name":"audit","llm_callable":false,"command":["./run.sh"]}`,
	} {
		td := filepath.Join(dir, "tools", name)
		if err := os.MkdirAll(td, 0o755); err != nil {
			t.Fatal(err)
		}
		// The script echoes its request: the call id and the arguments it got.
		if err := os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(td, "tool.json"), []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts, _, err := LoadDir(filepath.Join(dir, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	src := NewSource(ts)
	if src.ID() != "tools" || ServerID != "tools" {
		t.Fatalf("ID = %q", src.ID())
	}
	defs := src.Tools()
	if len(defs) != 2 || defs[0].Spec.Name != "audit" || defs[1].Spec.Name != "refund" {
		t.Fatalf("defs = %+v", defs)
	}
	audit, refund := defs[0], defs[1]
	if audit.LLMCallable || audit.Idempotent || audit.Origin != "tools (tools/audit/tool.json)" || audit.Confirm.Exposure != ExposureOpen {
		t.Errorf("audit = %+v (decision %+v)", audit, audit.Confirm)
	}
	d := refund.Confirm
	if !refund.LLMCallable || !refund.Idempotent || refund.Origin != "tools (tools/refund/tool.json)" || refund.Spec.Description != "Refund." ||
		d.Name != "refund" || d.ServerID != "tools" || d.Exposure != confirm.ExposureRequiresConfirmation || d.Prompt != "Moves money" || d.Kind != confirm.KindCustom {
		t.Errorf("refund = %+v (decision %+v)", refund, d)
	}
	if src.Tools()[1].Confirm != d {
		t.Error("the defs are rebuilt on every call")
	}
	// The decision validates with the tool's schema: defaults filled in.
	dec := confirm.Classify(confirm.Call{Name: "refund", Tool: d, Arguments: json.RawMessage(`{}`)})
	if dec.Tier != agentd.TierConfirm || dec.Reason != "Moves money" || string(dec.Arguments) != `{"n":1}` {
		t.Fatalf("decision = %+v", dec)
	}

	out, err := src.Execute(context.Background(), agentd.ToolCall{ID: "call_7", Name: "refund", Arguments: dec.Arguments})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"tool":"refund","call_id":"call_7","input":{"n":1}}` {
		t.Errorf("result = %s", out)
	}
	if _, err := src.Execute(context.Background(), agentd.ToolCall{ID: "call_8", Name: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown tool: %v", err)
	}
}

// tool.json "approval" is the tool's rule in what the source hands to
// confirm; a tool without one has none.
func TestSourceApprovalRule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tools")
	writeTool(t, dir, "refund", `{"name": "refund", "command": ["./run.sh"], "exposure": {"kind": "requires-confirmation"}, "approval": {"quorum": 2}}`)
	writeTool(t, dir, "lookup", `{"name": "lookup", "command": ["./run.sh"]}`)
	ts, _, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defs := NewSource(ts).Tools()
	if len(defs) != 2 {
		t.Fatalf("%d tools, want 2", len(defs))
	}
	for _, tool := range defs {
		r := tool.Confirm.Approval
		switch tool.Spec.Name {
		case "refund":
			if r == nil || r.Quorum != 2 || len(r.Approvers) != 3 {
				t.Errorf("refund's rule: %+v", r)
			}
		case "lookup":
			if r != nil {
				t.Errorf("lookup has a rule: %+v", r)
			}
		}
	}
}
