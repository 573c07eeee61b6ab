package loop_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/hooks"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// phaseHook is a real preToolUse hook (a shell script run by package
// hooks) that allows at classification and denies at execution.
func phaseHook(t *testing.T) toolset.Hooks {
	t.Helper()
	dir := t.TempDir()
	script := `in=$(cat); case "$in" in *'"phase":"execute"'*) echo '{"decision":"deny","reason":"payments closed since the card was shown"}';; esac` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return hooks.New([]*hooks.Hook{{Name: "gate", Pre: true, Command: []string{"/bin/sh", "./run.sh"}, Dir: dir, Timeout: 5 * time.Second}}, zerolog.Nop())
}

// A hook that allows a call at classification and denies it at execution
// wins over the approval given in between: the approved call is refused
// with the hook's reason (tool_call_refused, status refused) and the tool
// never runs.
func TestHookDenyAtExecutionRefusesApprovedCall(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	pay := &goTool{name: "pay", exposure: "requires-confirmation"}
	model := &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{"amount":3}`)}}}}}
	rec := newRecorder()
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, pay), Hooks: phaseHook(t), ApprovalTimeout: 10 * time.Minute, MaxTurns: 5},
		loop.Options{ExpireEvery: -1})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	f := &rulesFixture{store: st, rec: rec, engine: e, p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	f.send(t, "pay")
	c := f.parked(t, 1)
	if _, err := e.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "approve", ArgumentsSHA256: c.ArgumentsSHA256}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, agentd.EventRunFinished, 1) // the run ends either way: check what happened, no timeout
	if n := pay.count(); n != 0 || rec.count(agentd.EventToolCallStarted) != 0 || rec.count(agentd.EventToolCallRefused) != 1 {
		t.Fatalf("the tool ran %d times (%d tool_call_started, %d tool_call_refused), want a refusal and no run",
			n, rec.count(agentd.EventToolCallStarted), rec.count(agentd.EventToolCallRefused))
	}
	ref := rec.wait(t, agentd.EventToolCallRefused, 1)
	if !strings.Contains(string(ref.Data), `hook \"gate\" denied it: payments closed since the card was shown`) {
		t.Fatalf("refusal %s", ref.Data)
	}
	got, err := e.ToolCall(context.Background(), f.p, c.ID)
	if err != nil || got.Status != agentd.StatusRefused || !strings.Contains(got.Error, "payments closed since the card was shown") {
		t.Fatalf("call %+v (%v), want refused with the hook's reason", got, err)
	}
}
