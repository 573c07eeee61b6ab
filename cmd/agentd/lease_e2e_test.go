package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// gatedProject is writeProject's project with one more tool, "slow", which
// logs "slow-start", waits until the file $AGENTD_TEST_GATE exists, logs
// "slow" and succeeds; "slow …" makes the model call it. It returns the
// project, its execution log and the gate's path.
func gatedProject(t *testing.T) (dir, execLog, gate string) {
	t.Helper()
	dir, execLog = writeProject(t, projectOpts{})
	gate = filepath.Join(t.TempDir(), "gate")
	td := filepath.Join(dir, "tools", "slow")
	must(t, os.MkdirAll(td, 0o755))
	must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte(`#!/bin/sh
cat >/dev/null; echo "slow-start" >> "$AGENTD_TEST_LOG"
while [ ! -f "$AGENTD_TEST_GATE" ]; do sleep 0.05; done
echo "slow" >> "$AGENTD_TEST_LOG"; printf '{"ok":true}'
`), 0o755))
	must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"slow","description":"test tool slow","command":["/bin/sh","./run.sh"],
		"env":["AGENTD_TEST_LOG","AGENTD_TEST_GATE"],"timeout_ms":120000}`), 0o644))
	agent, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	must(t, err)
	rules := `"rules":[{"when":{"user":"(?i)^slow"},"reply":{"tool_calls":[{"name":"slow","arguments":{}}]}},` +
		`{"when":{"tool_result":"slow"},"reply":{"text":"slow {{status}}: {{reason}}"}},`
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(strings.Replace(string(agent), `"rules":[`, rules, 1)), 0o644))
	return dir, execLog, gate
}

// waitLogged waits until the execution log has line n times.
func waitLogged(t *testing.T, execLog, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for execCount(t, execLog, line) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged %d times in time", line, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A replica that starts while another runs a tool leaves that call alone:
// the run's lease is live, so its recovery does not fail the call as
// "outcome unknown" (as a lone process's restart does); the call finishes
// on the replica that started it and the run completes.
func TestReplicaStartLeavesLiveCalls(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog, gate := gatedProject(t)
	o := replicas.Options{Project: dir, DatabaseURL: u, Env: []string{"AGENTD_TEST_LOG=" + execLog, "AGENTD_TEST_GATE=" + gate}}
	a := replicas.Add(t, "A", o)
	conv, st := newConversation(t, a.Base, "")
	send(t, a.Base, "", conv, "slow please")
	waitLogged(t, execLog, "slow-start", 1)

	d := replicas.Add(t, "D", o) // listening: its recovery is done
	must(t, os.WriteFile(gate, nil, 0o644))
	res := st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" {
		t.Fatalf("the running call, after replica D started: %s\nD's log:\n%s", res.Raw, d.Logs())
	}
	if fin := st.waitFor("run_finished", nil); fin.Data["status"] != "completed" {
		t.Fatalf("run_finished %s", fin.Raw)
	}
	if n := execCount(t, execLog, "slow-start"); n != 1 {
		t.Fatalf("slow started %d times, want 1", n)
	}
}

// Issue 20, acceptance 4 (the executing part): kill -9 the replica that
// runs a call; once its lease (--run-lease 2s here) expires another
// replica takes the run over: the call, which may or may not have done its
// work, fails as "outcome unknown" — never runs twice — and the run goes
// on to its end, seen on a stream from a surviving replica.
func TestReplicaKilledRunTakenOver(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog, gate := gatedProject(t)
	rs := replicas.Start(t, replicas.Options{N: 3, Project: dir, DatabaseURL: u, Args: []string{"--run-lease", "2s"},
		Env: []string{"AGENTD_TEST_LOG=" + execLog, "AGENTD_TEST_GATE=" + gate}})
	a, b := rs[0], rs[1]
	conv, _ := newConversation(t, a.Base, "")
	st := openStream(t, b.Base, "", conv, 0)
	send(t, a.Base, "", conv, "slow please")
	waitLogged(t, execLog, "slow-start", 1)
	st.waitFor("tool_call_started", nil)
	a.Kill()
	must(t, os.WriteFile(gate, nil, 0o644)) // a second run of the tool would finish now

	res := st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "failed" || !strings.Contains(str(res.Data, "error"), "outcome is unknown") {
		t.Fatalf("the killed replica's call: %s", res.Raw)
	}
	if fin := st.waitFor("run_finished", nil); fin.Data["status"] != "completed" {
		t.Fatalf("run_finished %s", fin.Raw)
	}
	if n := execCount(t, execLog, "slow-start"); n != 1 {
		t.Fatalf("slow started %d times, want 1", n)
	}
}

// Issue 20, acceptance 4: kill -9 replica A while it drives a run with a
// parked call (pay, its deadline 8 s away) and an approved-but-unstarted
// call (record, held approved by a preToolUse hook's execute phase, which
// runs between the approval and the claim). Once A's lease (2 s here)
// expired another replica runs the unstarted call once; the parked one
// stays pending with its deadline, then its expiry, due while A is dead,
// fires once; the run goes on to its end.
func TestReplicaKilledWithParkedAndApproved(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog := writeProject(t, projectOpts{approvalTimeout: "8s"})
	gate := filepath.Join(t.TempDir(), "gate")
	hd := filepath.Join(dir, "hooks", "gate")
	must(t, os.MkdirAll(hd, 0o755))
	must(t, os.WriteFile(filepath.Join(hd, "gate.sh"), []byte(`#!/bin/sh
input=$(cat)
case "$input" in *'"phase":"execute"'*)
  echo "hook-execute" >> "$AGENTD_TEST_LOG"
  while [ ! -f "$AGENTD_TEST_GATE" ]; do sleep 0.05; done;;
esac
`), 0o755))
	must(t, os.WriteFile(filepath.Join(hd, "hook.json"), []byte(`{"points":["preToolUse"],"matcher":"record","command":["/bin/sh","./gate.sh"],
		"env":["AGENTD_TEST_LOG","AGENTD_TEST_GATE"],"timeout_ms":120000}`), 0o644))
	rs := replicas.Start(t, replicas.Options{N: 3, Project: dir, DatabaseURL: u, Args: []string{"--run-lease", "2s"},
		Env: []string{"AGENTD_TEST_LOG=" + execLog, "AGENTD_TEST_GATE=" + gate}})
	a, b := rs[0], rs[1]
	conv, _ := newConversation(t, a.Base, "")
	st := openStream(t, b.Base, "", conv, 0)
	send(t, a.Base, "", conv, "both please")
	cr := st.waitFor("confirmation_required", nil)
	payID := str(cr.Data, "tool_call_id")
	waitLogged(t, execLog, "hook-execute", 1) // record is approved, its hook holds it before the claim
	_, before := call(t, http.MethodGet, b.Base+"/v1/tool-calls/"+payID, "", "")
	a.Kill()
	must(t, os.WriteFile(gate, nil, 0o644))

	res := st.waitFor("tool_call_result", nil)
	if res.Data["tool_name"] != "record" || res.Data["status"] != "completed" {
		t.Fatalf("first result after A died: %s", res.Raw)
	}
	status, after := call(t, http.MethodGet, b.Base+"/v1/tool-calls/"+payID, "", "")
	if status != 200 || after["status"] != "requires_confirmation" || after["requires_approval_at"] != before["requires_approval_at"] {
		t.Fatalf("the parked call after the takeover: %d %v (before: %v)", status, after, before)
	}
	exp := st.waitFor("confirmation_resolved", nil)
	if str(exp.Data, "tool_call_id") != payID || exp.Data["decision"] != "expired" {
		t.Fatalf("the parked call's end: %s", exp.Raw)
	}
	st.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "record"); n != 1 {
		t.Fatalf("record ran %d times, want 1", n)
	}
	resolved := 0
	for _, ev := range st.seen {
		if ev.Type == "confirmation_resolved" && str(ev.Data, "tool_call_id") == payID {
			resolved++
		}
	}
	if resolved != 1 || execCount(t, execLog, "pay") != 0 {
		t.Fatalf("pay: %d confirmation_resolved, ran %d times; want 1 and 0: %v", resolved, execCount(t, execLog, "pay"), types(st.seen))
	}
}
