package project

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/model/script"
	"github.com/agentd-dev/agentd/tools"
)

// The demo project is what `agentd serve` uses by default: it must load
// cleanly, its script must only make calls its tools accept, and its tool
// scripts must work with nothing but /bin/sh, cat, printf, sed and date.

func loadDemo(t *testing.T) (*Project, *script.Model) {
	t.Helper()
	p, err := Load("../demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := script.New(p.Agent.Model, p.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return p, m
}

func TestDemoLoads(t *testing.T) {
	p, _ := loadDemo(t)
	if len(p.Warnings) != 0 {
		t.Errorf("warnings: %q", p.Warnings)
	}
	a := p.Agent
	if a.Name != "demo" || a.Provider != "script" || a.ApprovalTimeout != 15*time.Minute || a.MaxTurns != 10 || a.SystemPrompt == "" {
		t.Errorf("agent = %+v", a)
	}
	if len(p.Server.APIKeys) != 0 {
		t.Errorf("the demo must run in loopback dev mode, without keys")
	}
	want := map[string]struct {
		exposure string
		callable bool
	}{
		"lookup_order":   {tools.ExposureOpen, true},
		"refund_payment": {tools.ExposureRequiresConfirmation, true},
		"rotate_keys":    {tools.ExposureOperatorGated, true},
		"wipe_database":  {tools.ExposureOpen, false},
	}
	if len(p.Tools) != len(want) {
		t.Errorf("tools = %d, want %d", len(p.Tools), len(want))
	}
	for name, w := range want {
		tool := p.Tools[name]
		if tool == nil {
			t.Errorf("tool %s missing", name)
			continue
		}
		if tool.Exposure.Kind != w.exposure || tool.LLMCallable != w.callable {
			t.Errorf("%s: exposure %q callable %v, want %q %v", name, tool.Exposure.Kind, tool.LLMCallable, w.exposure, w.callable)
		}
	}
}

func TestDemoScript(t *testing.T) {
	p, m := loadDemo(t)
	tests := []struct {
		user  string
		calls []string
		args  []string
	}{
		{"Where is my order?", []string{"lookup_order"}, []string{`{"order_id":"A-1001"}`}},
		{"Please refund my order", []string{"refund_payment"}, []string{`{"order_id":"A-1001","amount":42.5}`}},
		{"check my order and refund both", []string{"lookup_order", "refund_payment"}, []string{`{"order_id":"A-1001"}`, `{"order_id":"A-1001","amount":42.5}`}},
		{"refund A-9999", []string{"refund_payment"}, []string{`{"order_id":"A-9999","amount":10}`}},
		{"rotate the keys", []string{"rotate_keys"}, []string{`{"scope":"api"}`}},
		{"wipe the database", []string{"wipe_database"}, []string{`{}`}},
		{"hello", nil, nil},
		{"what is the meaning of life", nil, nil},
	}
	for _, tt := range tests {
		resp, err := m.Generate(context.Background(), agentd.ModelRequest{System: p.Agent.SystemPrompt,
			Messages: []agentd.ModelMessage{{Role: agentd.ModelRoleUser, Content: tt.user}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var calls, args []string
		for _, c := range resp.ToolCalls {
			calls = append(calls, c.Name)
			args = append(args, string(c.Arguments))
			tool := p.Tools[c.Name]
			if tool == nil {
				t.Errorf("%q: call to unknown tool %s", tt.user, c.Name)
				continue
			}
			if !tool.LLMCallable {
				continue // refused as unknown by the loop; that is the point
			}
			if _, err := tool.ValidateArguments(c.Arguments); err != nil {
				t.Errorf("%q: the script's arguments fail the tool's schema: %v", tt.user, err)
			}
		}
		if !reflect.DeepEqual(calls, tt.calls) || !reflect.DeepEqual(args, tt.args) {
			t.Errorf("%q: calls %v %v, want %v %v", tt.user, calls, args, tt.calls, tt.args)
		}
		if resp.Text == "" {
			t.Errorf("%q: no text", tt.user)
		}
	}
}

func TestDemoScriptAnswersEveryToolResult(t *testing.T) {
	p, m := loadDemo(t)
	statuses := []agentd.CallStatus{agentd.StatusCompleted, agentd.StatusFailed, agentd.StatusDenied,
		agentd.StatusExpired, agentd.StatusRefused, agentd.StatusCancelled}
	for name := range p.Tools {
		for _, status := range statuses {
			msg := agentd.ModelMessage{Role: agentd.ModelRoleTool, ToolCallID: "c", ToolName: name, ToolStatus: status,
				ToolResult: json.RawMessage(`{"ok":true}`), ToolReason: "because"}
			resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: []agentd.ModelMessage{msg}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text == script.FallbackText || len(resp.ToolCalls) != 0 || strings.Contains(resp.Text, "{{") {
				t.Errorf("%s %s: reply %q with %d calls", name, status, resp.Text, len(resp.ToolCalls))
			}
		}
	}
	// Spot-check the texts the brief fixes.
	for status, want := range map[agentd.CallStatus]string{
		agentd.StatusDenied:  "OK, I did not refund: not today",
		agentd.StatusExpired: "The approval expired, nothing was refunded.",
	} {
		msg := agentd.ModelMessage{Role: agentd.ModelRoleTool, ToolName: "refund_payment", ToolStatus: status, ToolReason: "not today"}
		resp, _ := m.Generate(context.Background(), agentd.ModelRequest{Messages: []agentd.ModelMessage{msg}}, nil)
		if resp.Text != want {
			t.Errorf("refund_payment %s: %q, want %q", status, resp.Text, want)
		}
	}
}

func TestDemoToolsRun(t *testing.T) {
	p, _ := loadDemo(t)
	ctx := context.Background()
	tests := []struct {
		tool, args string
		want       map[string]any // fields the result must have
		wantErr    string
	}{
		{"lookup_order", `{"order_id":"A-1001"}`, map[string]any{"order_id": "A-1001", "status": "shipped"}, ""},
		{"refund_payment", `{"order_id":"A-1001","amount":42.5}`, map[string]any{"order_id": "A-1001", "amount": 42.5, "status": "refunded"}, ""},
		{"refund_payment", `{"amount":3,"order_id":"B-7"}`, map[string]any{"order_id": "B-7", "amount": 3.0}, ""},
		{"refund_payment", `{"order_id":"A-9999","amount":10}`, nil, "order A-9999 was never paid"},
		{"rotate_keys", `{"scope":"database"}`, map[string]any{"rotated": true, "scope": "database"}, ""},
		{"rotate_keys", `{}`, map[string]any{"rotated": true, "scope": "api"}, ""},
		{"wipe_database", `{}`, map[string]any{"wiped": false}, ""},
	}
	for _, tt := range tests {
		tool := p.Tools[tt.tool]
		args, err := tool.ValidateArguments(json.RawMessage(tt.args))
		if err != nil {
			t.Fatalf("%s %s: %v", tt.tool, tt.args, err)
		}
		out, err := tool.Run(ctx, "call_demo", args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s %s: err = %v, want %q", tt.tool, tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", tt.tool, tt.args, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: result %s is not a JSON object: %v", tt.tool, out, err)
		}
		for k, v := range tt.want {
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("%s %s: %s = %v, want %v (result %s)", tt.tool, tt.args, k, got[k], v, out)
			}
		}
	}
}
