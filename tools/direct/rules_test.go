package direct_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/tools/direct"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// fakeTools is a registry of tools given as definitions; Execute records
// the calls it runs and answers {"ok":true}.
type fakeTools struct {
	mu    sync.Mutex
	defs  map[string]toolset.Tool
	calls []agentd.ToolCall
}

func (f *fakeTools) Tool(name string) (toolset.Tool, bool) {
	d, ok := f.defs[name]
	return d, ok
}

func (f *fakeTools) Execute(_ context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return json.RawMessage(`{"ok":true}`), nil
}

func (f *fakeTools) ran() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// payInvoice is a connection's operation tool with the invoke trigger,
// whose policy asks confirmation for paying and escalates confirm to
// review in a delegated call.
func payInvoice(t *testing.T) toolset.Tool {
	t.Helper()
	policy, err := confirm.ParsePolicy([]byte(`{
		"endpoints": {"POST /invoices/{id}/pay": {"confirm": true, "reason": "Moves money"}},
		"defaults": {"read": "auto", "write": "confirm"},
		"delegations": {"escalateConfirm": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	name := "billing__payInvoice"
	return toolset.Tool{Spec: agentd.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}, Invoke: true,
		Confirm: &confirm.Tool{Name: name, ServerID: "billing", Kind: confirm.KindOperation,
			Connection: &confirm.ConnectionPolicy{Name: "billing", Policy: policy},
			Operation:  &confirm.Operation{Method: "POST", Template: "/invoices/{id}/pay"}}}
}

// On the invoke path a delegate key's call is classified as delegated: a
// confirm-tier operation whose policy escalates delegated calls is refused
// to a delegate (review: no one there can confirm it), even with
// confirmed_write, while an operator gets its preview and runs it with
// confirmed_write.
func TestRunDelegateEscalates(t *testing.T) {
	ft := &fakeTools{defs: map[string]toolset.Tool{"billing__payInvoice": payInvoice(t)}}
	audit := &auditLog{}
	runner := direct.New(ft, audit, zerolog.Nop())
	ctx := context.Background()
	args := json.RawMessage(`{"path":{"id":"in_1"},"body":{"amount":700}}`)

	out, preview, err := runner.Run(ctx, operator, "billing__payInvoice", args, "")
	if p, ok := out.(map[string]direct.Preview); err != nil || !preview || !ok || p["preview"].Tier != agentd.TierConfirm ||
		p["preview"].Reason != "Moves money" {
		t.Fatalf("an operator's run: %+v %v %v, want the confirm preview", out, preview, err)
	}
	if res, _, err := runner.Run(ctx, operator, "billing__payInvoice", args, confirm.IntentConfirmedWrite); err != nil ||
		res.(*direct.Result).Status != agentd.StatusCompleted {
		t.Fatalf("an operator's confirmed run: %+v %v", res, err)
	}
	for _, intent := range []string{"", confirm.IntentConfirmedWrite} {
		out, preview, err := runner.Run(ctx, delegate, "billing__payInvoice", args, intent)
		if agentd.ErrorCode(err) != agentd.EFORBIDDEN || preview || out != nil || !strings.Contains(err.Error(), "tier review") ||
			!strings.Contains(err.Error(), "delegated") {
			t.Errorf("a delegate's run (intent %q): %+v %v %v, want refused at review", intent, out, preview, err)
		}
		if e := audit.last(t); e.Outcome != agentd.EFORBIDDEN || e.Tier != agentd.TierReview {
			t.Errorf("audit entry of the delegate's run = %+v", e)
		}
	}
	if n := ft.ran(); n != 1 {
		t.Fatalf("%d calls ran, want the operator's confirmed one", n)
	}
}

// A tool whose Prepare refuses the call (a file tool's path outside the
// workspace) does not run: the call failed with Prepare's reason, on every
// path, and is audited so.
func TestPrepareRefusalFails(t *testing.T) {
	edit := toolset.Tool{Spec: agentd.ToolSpec{Name: "edit", Parameters: json.RawMessage(`{"type":"object"}`)}, Invoke: true,
		Confirm: &confirm.Tool{Name: "edit", ServerID: "files", Exposure: confirm.ExposureOpen},
		Prepare: func(_ context.Context, args json.RawMessage) (toolset.Preparation, error) {
			if strings.Contains(string(args), "..") {
				return toolset.Preparation{}, errors.New(`path "../etc/passwd" leads outside the workspace`)
			}
			return toolset.Preparation{}, nil
		}}
	ft := &fakeTools{defs: map[string]toolset.Tool{"edit": edit}}
	audit := &auditLog{}
	runner := direct.New(ft, audit, zerolog.Nop())
	ctx := context.Background()
	bad := json.RawMessage(`{"path":"../etc/passwd"}`)
	evalRes, err := runner.Eval(ctx, operator, "edit", bad)
	runOut, _, runErr := runner.Run(ctx, operator, "edit", bad, "")
	for i, got := range []struct {
		res *direct.Result
		err error
	}{{evalRes, err}, {runOut.(*direct.Result), runErr}} {
		if got.err != nil || got.res.Status != agentd.StatusFailed || !strings.Contains(got.res.Error, "leads outside the workspace") {
			t.Errorf("path %d: %+v %v, want failed with Prepare's reason", i, got.res, got.err)
		}
		if e := audit.entries[i]; e.Outcome != direct.OutcomeFailed || !strings.Contains(e.Reason, "leads outside the workspace") {
			t.Errorf("audit entry %d = %+v", i, e)
		}
	}
	if n := ft.ran(); n != 0 {
		t.Fatalf("%d refused calls ran", n)
	}
	if res, err := runner.Eval(ctx, operator, "edit", json.RawMessage(`{"path":"a.txt"}`)); err != nil || res.Status != agentd.StatusCompleted || ft.ran() != 1 {
		t.Fatalf("a prepared call: %+v %v", res, err)
	}
}

// brokenAudit is an audit log that cannot be written.
type brokenAudit struct{}

func (brokenAudit) AppendAudit(context.Context, agentd.AuditEntry) (agentd.AuditEntry, error) {
	return agentd.AuditEntry{}, errors.New("database is locked")
}

// Every direct call is logged with its outcome; one the audit log could
// not record is logged at error level too, naming its kind, tool and
// outcome, and the call's answer stands. A recorded one logs no error.
func TestAuditFailureLogged(t *testing.T) {
	ft := &fakeTools{defs: map[string]toolset.Tool{"lookup": {Spec: agentd.ToolSpec{Name: "lookup"}, Invoke: true,
		Confirm: &confirm.Tool{Name: "lookup", ServerID: "tools", Exposure: confirm.ExposureOpen}}}}
	notRecorded := "direct tool call not recorded in the audit log"
	for _, broken := range []bool{false, true} {
		var buf bytes.Buffer
		var audit direct.AuditLog = &auditLog{}
		if broken {
			audit = brokenAudit{}
		}
		runner := direct.New(ft, audit, zerolog.New(&buf))
		res, err := runner.Eval(context.Background(), operator, "lookup", nil)
		if err != nil || res.Status != agentd.StatusCompleted {
			t.Fatalf("eval (audit broken %v): %+v %v", broken, res, err)
		}
		runner.Scheduled(context.Background(), direct.Tick{Tool: "lookup", At: time.Now(), TenantID: "t1"})
		var errs []map[string]any
		infos := 0
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch m["message"] {
			case notRecorded:
				errs = append(errs, m)
			case "direct tool call":
				infos++
			}
		}
		if infos != 2 {
			t.Errorf("audit broken %v: %d call lines, want 2:\n%s", broken, infos, buf.String())
		}
		if !broken {
			if len(errs) != 0 {
				t.Errorf("a recorded call logged %v", errs)
			}
			continue
		}
		if len(errs) != 2 || errs[0]["level"] != "error" || errs[0]["kind"] != agentd.AuditToolEval || errs[1]["kind"] != agentd.AuditScheduleRun ||
			errs[0]["tool"] != "lookup" || errs[0]["outcome"] != direct.OutcomeCompleted || errs[0]["error"] != "database is locked" {
			t.Errorf("an unrecorded call: error lines %v, want one per call naming kind, tool and outcome", errs)
		}
	}
}
