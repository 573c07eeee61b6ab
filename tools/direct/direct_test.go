package direct_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/tools"
	"github.com/agentd-dev/agentd/tools/direct"
	"github.com/agentd-dev/agentd/tools/registry"
	"github.com/rs/zerolog"
)

// auditLog records the entries appended.
type auditLog struct {
	mu      sync.Mutex
	entries []agentd.AuditEntry
}

func (a *auditLog) AppendAudit(_ context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e.ID = int64(len(a.entries) + 1)
	a.entries = append(a.entries, e)
	return e, nil
}

func (a *auditLog) last(t *testing.T) agentd.AuditEntry {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.entries) == 0 {
		t.Fatal("no audit entry")
	}
	return a.entries[len(a.entries)-1]
}

// fixture is a project's real command tools behind the registry; each
// run appends its stdin request to the log.
type fixture struct {
	reg    *registry.Registry
	runner *direct.Runner
	audit  *auditLog
	log    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tools")
	log := filepath.Join(t.TempDir(), "runs.log")
	write := func(name, toolJSON, script string) {
		must(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, name, "tool.json"), []byte(toolJSON), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, name, "run.sh"), []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	}
	record := `input=$(cat); echo "$input" >> ` + log + `; printf '{"ran":true}'`
	amount := `"parameters": {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"], "additionalProperties": false}`
	write("lookup", `{"name": "lookup", "command": ["./run.sh"], "triggers": {"invoke": true}}`, record)
	write("refund", `{"name": "refund", "command": ["./run.sh"], `+amount+`, "exposure": {"kind": "requires-confirmation"}, "triggers": {"invoke": true}}`, record)
	write("hidden", `{"name": "hidden", "command": ["./run.sh"], "llm_callable": false, "exposure": {"kind": "requires-confirmation"}}`, record)
	write("broken", `{"name": "broken", "command": ["./run.sh"], "triggers": {"invoke": true}}`, `cat >/dev/null; echo "disk on fire" >&2; exit 3`)
	loaded, _, err := tools.LoadDir(dir)
	must(t, err)
	reg, err := registry.New(tools.NewSource(loaded))
	must(t, err)
	a := &auditLog{}
	return &fixture{reg: reg, runner: direct.New(reg, a, zerolog.Nop()), audit: a, log: log}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runs are the requests the tools received.
func (f *fixture) runs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if os.IsNotExist(err) {
		return nil
	}
	must(t, err)
	return strings.Fields(strings.TrimSpace(string(b)))
}

var (
	operator = agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: "ops", Role: agentd.RoleOperator}
	delegate = agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: "bot", Role: agentd.RoleDelegate}
	client   = agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: "web", Role: agentd.RoleClient}
)

// Eval runs any tool with every gate bypassed — a requires-confirmation
// tool that the model may not call runs at once — but the schema still
// refuses; every eval is audited, refused ones too.
func TestEval(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	res, err := f.runner.Eval(ctx, operator, "hidden", json.RawMessage(`{"x":1}`))
	if err != nil || res.Status != agentd.StatusCompleted || string(res.Result) != `{"ran":true}` {
		t.Fatalf("eval of hidden = %+v, %v", res, err)
	}
	e := f.audit.last(t)
	if e.Kind != agentd.AuditToolEval || e.ToolName != "hidden" || e.KeyID != "ops" || e.Role != agentd.RoleOperator ||
		e.Outcome != direct.OutcomeCompleted || e.Tier != agentd.TierConfirm || len(e.ArgumentsSHA256) != 64 || e.ToolCallID == "" {
		t.Errorf("audit entry = %+v", e)
	}
	if runs := f.runs(t); len(runs) != 1 || !strings.Contains(runs[0], e.ToolCallID) {
		t.Errorf("runs = %q, want one with call id %s", runs, e.ToolCallID)
	}

	res, err = f.runner.Eval(ctx, operator, "broken", nil)
	if err != nil || res.Status != agentd.StatusFailed || !strings.Contains(res.Error, "disk on fire") {
		t.Fatalf("eval of broken = %+v, %v", res, err)
	}
	if e := f.audit.last(t); e.Outcome != direct.OutcomeFailed || !strings.Contains(e.Reason, "disk on fire") {
		t.Errorf("audit entry of a failed eval = %+v", e)
	}

	for _, tt := range []struct {
		p          agentd.Principal
		name, args string
		code, msg  string
	}{
		{client, "lookup", `{}`, agentd.EFORBIDDEN, "direct eval needs an operator or admin key"},
		{delegate, "lookup", `{}`, agentd.EFORBIDDEN, "direct eval needs an operator or admin key"},
		{operator, "nope", `{}`, agentd.ENOTFOUND, `tool "nope" not found`},
		{operator, "refund", `{"amount":"lots"}`, agentd.EINVALID, `invalid arguments for tool "refund"`},
		{operator, "refund", `[1]`, agentd.EINVALID, "must be a JSON object"},
	} {
		before := len(f.runs(t))
		_, err := f.runner.Eval(ctx, tt.p, tt.name, json.RawMessage(tt.args))
		if agentd.ErrorCode(err) != tt.code || !strings.Contains(agentd.ErrorMessage(err), tt.msg) {
			t.Errorf("eval %s as %s: %v, want %s %q", tt.name, tt.p.Role, err, tt.code, tt.msg)
		}
		if e := f.audit.last(t); e.Kind != agentd.AuditToolEval || e.Outcome != tt.code || e.KeyID != tt.p.KeyID || e.ToolName != tt.name {
			t.Errorf("audit entry of a refused eval = %+v", e)
		}
		if len(f.runs(t)) != before {
			t.Errorf("eval %s as %s ran the tool", tt.name, tt.p.Role)
		}
	}
	if n := len(f.audit.entries); n != 7 {
		t.Errorf("%d audit entries for 7 evals", n)
	}
}

// Run is the invoke trigger in the durable execution context: an auto
// tool runs; a confirm-tier tool answers a preview and runs only with
// confirmed_write; tools without the trigger and client keys are refused.
func TestRun(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	out, preview, err := f.runner.Run(ctx, delegate, "lookup", nil, "")
	if res, _ := out.(*direct.Result); err != nil || preview || res == nil || res.Status != agentd.StatusCompleted {
		t.Fatalf("run of lookup = %+v, %v, %v", out, preview, err)
	}
	if e := f.audit.last(t); e.Kind != agentd.AuditToolRun || e.Outcome != direct.OutcomeCompleted || e.KeyID != "bot" {
		t.Errorf("audit entry = %+v", e)
	}

	out, preview, err = f.runner.Run(ctx, operator, "refund", json.RawMessage(`{"amount": 5}`), "write")
	p, _ := out.(map[string]direct.Preview)
	if err != nil || !preview || p["preview"].Tier != agentd.TierConfirm || string(p["preview"].Arguments) != `{"amount":5}` ||
		!strings.Contains(p["preview"].Instruction, `"intent": "confirmed_write"`) {
		t.Fatalf("run of refund without confirmed_write = %+v, %v, %v", out, preview, err)
	}
	if len(f.runs(t)) != 1 {
		t.Fatalf("the preview ran the tool: %q", f.runs(t))
	}
	if e := f.audit.last(t); e.Outcome != direct.OutcomePreview || e.ArgumentsSHA256 != p["preview"].ArgumentsSHA256 {
		t.Errorf("audit entry of the preview = %+v", e)
	}
	out, preview, err = f.runner.Run(ctx, operator, "refund", json.RawMessage(`{"amount": 5}`), "confirmed_write")
	if res, _ := out.(*direct.Result); err != nil || preview || res == nil || res.Status != agentd.StatusCompleted {
		t.Fatalf("confirmed run of refund = %+v, %v, %v", out, preview, err)
	}
	if runs := f.runs(t); len(runs) != 2 || !strings.Contains(runs[1], `"input":{"amount":5}`) {
		t.Fatalf("runs = %q", runs)
	}

	for _, tt := range []struct {
		p                  agentd.Principal
		name, args, intent string
		code, msg          string
	}{
		{client, "lookup", `{}`, "", agentd.EFORBIDDEN, "running a tool needs an operator or delegate key"},
		{operator, "hidden", `{}`, "", agentd.EFORBIDDEN, `tool "hidden" has no invoke trigger`},
		{operator, "nope", `{}`, "", agentd.ENOTFOUND, `tool "nope" not found`},
		{operator, "refund", `{}`, "confirmed_write", agentd.EINVALID, `invalid arguments for tool "refund"`},
		{operator, "lookup", `{}`, "read", agentd.EINVALID, `intent must be "write" or "confirmed_write", got "read"`},
	} {
		before := len(f.runs(t))
		_, _, err := f.runner.Run(ctx, tt.p, tt.name, json.RawMessage(tt.args), tt.intent)
		if agentd.ErrorCode(err) != tt.code || !strings.Contains(agentd.ErrorMessage(err), tt.msg) {
			t.Errorf("run %s as %s: %v, want %s %q", tt.name, tt.p.Role, err, tt.code, tt.msg)
		}
		if e := f.audit.last(t); e.Kind != agentd.AuditToolRun || e.Outcome != tt.code {
			t.Errorf("audit entry of a refused run = %+v", e)
		}
		if len(f.runs(t)) != before {
			t.Errorf("run %s as %s ran the tool", tt.name, tt.p.Role)
		}
	}
}

// A scheduled tick runs as a delegate of the tick's tenant and project
// with a call id derived from the tool and the tick (the same on every
// replica), audited with the tick.
func TestScheduled(t *testing.T) {
	f := newFixture(t)
	at := time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC)
	var started []agentd.ToolCall
	tick := direct.Tick{Tool: "lookup", At: at, TenantID: "acme", ProjectID: "shop", ConversationID: "conv_1", RunID: "run_1",
		Started: func(c agentd.ToolCall) { started = append(started, c) }}
	res, returned := f.runner.Scheduled(context.Background(), tick)
	if res.Status != agentd.StatusCompleted {
		t.Fatalf("scheduled run = %+v", res)
	}
	e := f.audit.last(t)
	if e.Kind != agentd.AuditScheduleRun || e.TenantID != "acme" || e.ProjectID != "shop" || e.KeyID != agentd.ScheduleKeyID ||
		e.Role != agentd.RoleDelegate || e.Outcome != direct.OutcomeCompleted || e.Reason != "tick 2026-12-02T10:00:01Z" ||
		e.ConversationID != "conv_1" || e.RunID != "run_1" || returned.ToolCallID != e.ToolCallID {
		t.Errorf("audit entry = %+v (returned %+v)", e, returned)
	}
	if len(started) != 1 || started[0].ID != e.ToolCallID || started[0].ConversationID != "conv_1" || started[0].RunID != "run_1" ||
		started[0].Name != "lookup" || started[0].TenantID != "acme" {
		t.Errorf("started calls = %+v", started)
	}
	f.runner.Scheduled(context.Background(), tick)
	if again := f.audit.last(t); again.ToolCallID != e.ToolCallID || !strings.HasPrefix(e.ToolCallID, "call_") {
		t.Errorf("call ids of one tick: %s and %s, want one", e.ToolCallID, again.ToolCallID)
	}
	started = nil
	tick.Tool = "refund"
	res, returned = f.runner.Scheduled(context.Background(), tick)
	if res.Status != agentd.StatusFailed || !strings.Contains(res.Error, "invalid arguments") || returned.Tier == "" {
		t.Errorf("scheduled run of refund = %+v (audit %+v)", res, returned)
	}
	if len(started) != 0 {
		t.Errorf("a refused scheduled call started: %+v", started)
	}
	if e := f.audit.last(t); e.Outcome != agentd.EINVALID || !strings.HasPrefix(e.Reason, "tick 2026-12-02T10:00:01Z: invalid arguments") {
		t.Errorf("audit entry = %+v", e)
	}
}

// delegatedTools records whether each call it runs is delegated.
type delegatedTools struct {
	direct.Tools
	mu        sync.Mutex
	delegated []bool
}

func (d *delegatedTools) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	d.mu.Lock()
	d.delegated = append(d.delegated, call.Delegated)
	d.mu.Unlock()
	return d.Tools.Execute(ctx, call)
}

// A call a delegate key runs on the invoke path, and a schedule's, runs
// delegated (its context endpoint classifies what it asks as delegated);
// an operator's run and an eval do not.
func TestRunDelegated(t *testing.T) {
	f := newFixture(t)
	rec := &delegatedTools{Tools: f.reg}
	runner := direct.New(rec, f.audit, zerolog.Nop())
	ctx := context.Background()
	for _, p := range []agentd.Principal{delegate, operator} {
		if _, _, err := runner.Run(ctx, p, "lookup", nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := runner.Eval(ctx, operator, "lookup", nil); err != nil {
		t.Fatal(err)
	}
	runner.Scheduled(ctx, direct.Tick{Tool: "lookup", At: time.Now(), TenantID: "t1", ProjectID: "p1"})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []bool{true, false, false, true}; !slices.Equal(rec.delegated, want) {
		t.Fatalf("the calls ran delegated %v, want %v (a delegate's run, an operator's, an eval, a schedule's)", rec.delegated, want)
	}
}
