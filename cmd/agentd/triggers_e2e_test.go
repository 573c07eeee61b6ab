package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// Issue 21 acceptance 5, on the real binary: the invoke trigger and direct
// eval work with operator keys (and the trigger with delegate keys), are
// refused (403) for client keys, and every eval is in the audit log.
func TestInvokeAndEvalE2E(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{
		"k-ops": {"t1", "operator"}, "k-bot": {"t1", "delegate"}, "k-web": {"t1", "client"}}})
	rec := `input=$(cat); echo "$1" >> "$AGENTD_TEST_LOG"; printf '{"ok":true,"request":%s}' "$input"`
	ctxTool(t, dir, "report", rec+" #", map[string]any{"command": []string{"/bin/sh", "./run.sh", "report"},
		"triggers": map[string]any{"invoke": true}})
	ctxTool(t, dir, "refund", rec, map[string]any{"command": []string{"/bin/sh", "./run.sh", "refund"},
		"exposure":   map[string]string{"kind": "requires-confirmation"},
		"parameters": json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
		"triggers":   map[string]any{"invoke": true}})
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog)
	run := func(key, tool, body string) (int, map[string]any) {
		t.Helper()
		return call(t, http.MethodPost, base+"/v1/tools/"+tool+"/run", key, body)
	}
	eval := func(key, tool, body string) (int, map[string]any) {
		t.Helper()
		return call(t, http.MethodPost, base+"/v1/tools/"+tool+"/eval", key, body)
	}

	// The invoke trigger.
	for _, key := range []string{"k-ops", "k-bot"} {
		if st, m := run(key, "report", `{"arguments":{}}`); st != 200 || m["status"] != "completed" {
			t.Fatalf("run report with %s: %d %v", key, st, m)
		}
	}
	if st, m := run("k-web", "report", `{"arguments":{}}`); st != 403 || errCode(m) != "forbidden" {
		t.Fatalf("run report with a client key: %d %v", st, m)
	}
	if st, m := run("k-ops", "record", `{}`); st != 403 || !strings.Contains(fmt.Sprint(m), "no invoke trigger") {
		t.Fatalf("run of a tool without the trigger: %d %v", st, m)
	}
	st, m := run("k-ops", "refund", `{"arguments":{"amount":5}}`)
	if p, _ := m["preview"].(map[string]any); st != 200 || p["tier"] != "confirm" || p["tool"] != "refund" {
		t.Fatalf("run refund without confirmed_write: %d %v", st, m)
	}
	if n := execCount(t, execLog, "refund"); n != 0 {
		t.Fatalf("the preview ran refund %d times", n)
	}
	if st, m := run("k-ops", "refund", `{"arguments":{"amount":5},"intent":"confirmed_write"}`); st != 200 || m["status"] != "completed" {
		t.Fatalf("confirmed run of refund: %d %v", st, m)
	}
	if st, m := run("k-ops", "report", `{"arguments":{},"surprise":1}`); st != 400 || errCode(m) != "invalid" {
		t.Fatalf("a body with an unknown field: %d %v", st, m)
	}

	// Direct eval: pay requires confirmation in the loop and runs at once.
	if st, m := eval("k-ops", "pay", `{"arguments":{"amount":7}}`); st != 200 || m["status"] != "completed" {
		t.Fatalf("eval pay with an operator key: %d %v", st, m)
	}
	for _, key := range []string{"k-web", "k-bot"} {
		if st, m := eval(key, "pay", `{"arguments":{"amount":7}}`); st != 403 || errCode(m) != "forbidden" {
			t.Fatalf("eval pay with %s: %d %v", key, st, m)
		}
	}
	if st, m := eval("k-ops", "pay", `{"arguments":{"amount":"lots"}}`); st != 400 || !strings.Contains(fmt.Sprint(m), "invalid arguments") {
		t.Fatalf("eval pay with bad arguments: %d %v", st, m)
	}
	if st, m := eval("k-ops", "fail", `{}`); st != 200 || m["status"] != "failed" || !strings.Contains(fmt.Sprint(m["error"]), "disk on fire") {
		t.Fatalf("eval of a failing tool: %d %v", st, m)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
	if n := execCount(t, execLog, "report"); n != 2 {
		t.Fatalf("report ran %d times, want 2", n)
	}

	// Every eval is in the audit log, the refused ones too.
	st, m = call(t, http.MethodGet, base+"/v1/audit?kind=tool_eval", "k-ops", "")
	entries, _ := m["entries"].([]any)
	if st != 200 || len(entries) != 5 {
		t.Fatalf("tool_eval entries: %d, %d of 5: %v", st, len(entries), m)
	}
	var outcomes []string
	for _, e := range entries {
		e := e.(map[string]any)
		outcomes = append(outcomes, fmt.Sprint(e["outcome"]))
		if e["tool_call_id"] == "" || e["tool_name"] == "" {
			t.Errorf("entry without call or tool: %v", e)
		}
	}
	if want := "completed forbidden forbidden invalid failed"; strings.Join(outcomes, " ") != want {
		t.Errorf("outcomes %v, want %s", outcomes, want)
	}
	// Every run too, but the body the API refused before it reached the
	// path (an unknown field): 6 of the 7 requests.
	st, m = call(t, http.MethodGet, base+"/v1/audit?kind=tool_run", "k-ops", "")
	if entries, _ := m["entries"].([]any); st != 200 || len(entries) != 6 {
		t.Fatalf("tool_run entries: %d %v", st, m)
	}
}

// Issue 21 acceptance 6, on the real binary: a schedule of @every 1s runs
// once per tick (each run's call id names its tick) across a restart, and
// after 3 s of downtime the missed ticks are reported, not run in a burst.
func TestScheduleAcrossRestartE2E(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{"k-ops": {"default", "operator", "default"}}})
	ticks := execLog + ".ticks"
	ctxTool(t, dir, "tick", `input=$(cat); echo "$input" >> "$AGENTD_TEST_LOG.ticks"; printf '{"ok":true}'`,
		map[string]any{"triggers": map[string]any{"schedule": "@every 1s"}, "llm_callable": false})
	data := t.TempDir()
	env := "AGENTD_TEST_LOG=" + execLog
	runs := func() []string { return tickIDs(t, ticks) }
	waitRuns := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); len(runs()) < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d scheduled runs, waited for %d", len(runs()), n)
			}
		}
	}

	_, proc := startProcess(t, bin, dir, data, env)
	waitRuns(3)
	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGTERM))
	_ = proc.Wait()
	before := len(runs())
	time.Sleep(3 * time.Second) // the downtime

	base, _ := startProcess(t, bin, dir, data, env)
	time.Sleep(1500 * time.Millisecond)
	// Generous bound: at most the ticks of 1.5 s, none of the 3 missed.
	if burst := len(runs()) - before; burst > 2 {
		t.Fatalf("%d runs in the 1.5 s after the restart: the missed ticks were replayed", burst)
	}
	t.Logf("%d runs before the shutdown, %d in the 1.5 s after the restart", before, len(runs())-before)
	waitRuns(before + 2)
	seen := map[string]bool{}
	for _, id := range runs() {
		if seen[id] {
			t.Fatalf("tick %s ran twice: %v", id, runs())
		}
		seen[id] = true
	}
	st, m := call(t, http.MethodGet, base+"/v1/audit?kind=schedule_missed", "k-ops", "")
	entries, _ := m["entries"].([]any)
	if st != 200 || len(entries) != 1 || !strings.Contains(fmt.Sprint(entries[0]), "ticks missed between") {
		t.Fatalf("schedule_missed entries: %d %v", st, m)
	}
	t.Logf("reported: %v", entries[0].(map[string]any)["reason"])
	// A run's audit entry is appended after its tool has finished (and
	// written its tick): wait for the entries, not only for the ticks.
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
		st, m = call(t, http.MethodGet, base+"/v1/audit?kind=schedule_run", "k-ops", "")
		entries, _ := m["entries"].([]any)
		if st == 200 && len(entries) >= before+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule_run entries: %d, %d, want at least %d", st, len(entries), before+2)
		}
	}
}

// A schedule of @every 1s on three replicas sharing one PostgreSQL
// database runs once per tick: each tick's run (its call id names the
// tick) happens once, on whichever replica claimed it.
func TestScheduleOncePerTickOnReplicasE2E(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog := writeProject(t, projectOpts{})
	ctxTool(t, dir, "tick", `input=$(cat); echo "$input" >> "$AGENTD_TEST_LOG.ticks"; printf '{"ok":true}'`,
		map[string]any{"triggers": map[string]any{"schedule": "@every 1s"}, "llm_callable": false})
	replicas.Start(t, replicas.Options{N: 3, Project: dir, DatabaseURL: u, Env: []string{"AGENTD_TEST_LOG=" + execLog}})
	ids := func() []string { return tickIDs(t, execLog+".ticks") }
	for deadline := time.Now().Add(waitLimit); len(ids()) < 5; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d scheduled runs on 3 replicas, waited for 5", len(ids()))
		}
	}
	seen := map[string]bool{}
	for _, id := range ids() {
		if seen[id] {
			t.Fatalf("a tick ran twice (%s): %v", id, ids())
		}
		seen[id] = true
	}
}

// tickIDs are the call ids of the scheduled runs a tick tool appended to
// path (its stdin requests, a line each), complete lines only: a run may
// be writing its own.
func tickIDs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	must(t, err)
	end := strings.LastIndexByte(string(b), '\n')
	if end < 0 {
		return nil
	}
	var ids []string
	for _, line := range strings.Split(string(b[:end]), "\n") {
		var req struct {
			CallID string `json:"call_id"`
		}
		must(t, json.Unmarshal([]byte(line), &req))
		ids = append(ids, req.CallID)
	}
	return ids
}

// Issue 21, on the real binary: each scheduled run is a delegated
// conversation of the tool's tenant and project, created by the schedule
// principal and named in the run's audit entry; its events (the SSE
// stream) show the call and its result or failure. An operator of that
// tenant reads it; a client key of the tenant and another tenant's
// operator see none of it (404, and no audit entries).
func TestScheduledRunConversationE2E(t *testing.T) {
	bin := agentdBinary(t)
	dir, _ := writeProject(t, projectOpts{keys: map[string][3]string{
		"k-ops": {"t1", "operator"}, "k-web": {"t1", "client"}, "k-other": {"t2", "operator"}}})
	sched := map[string]any{"schedule": "@every 1s", "tenant_id": "t1", "project_id": "p1"}
	ctxTool(t, dir, "tick", `cat >/dev/null; printf '{"ok":true}'`, map[string]any{"triggers": sched, "llm_callable": false})
	ctxTool(t, dir, "boom", `cat >/dev/null; echo 'disk on fire' >&2; exit 3`, map[string]any{"triggers": sched, "llm_callable": false})
	base, _ := startProcess(t, bin, dir, t.TempDir())

	runs := map[string]map[string]any{} // tool -> its first schedule_run entry
	for deadline := time.Now().Add(waitLimit); len(runs) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("scheduled runs of %d tools, waited for 2", len(runs))
		}
		st, m := call(t, http.MethodGet, base+"/v1/audit?kind=schedule_run", "k-ops", "")
		entries, _ := m["entries"].([]any)
		if st != 200 {
			t.Fatalf("audit: %d %v", st, m)
		}
		for _, e := range entries {
			e := e.(map[string]any)
			if tool := str(e, "tool_name"); runs[tool] == nil {
				runs[tool] = e
			}
		}
	}
	for tool, want := range map[string]struct{ status, field, value string }{
		"tick": {"completed", "result", `map[ok:true]`}, "boom": {"failed", "error", "disk on fire"},
	} {
		e := runs[tool]
		conv := str(e, "conversation_id")
		if !strings.HasPrefix(conv, "conv_") || !strings.HasPrefix(str(e, "run_id"), "run_") {
			t.Fatalf("%s: audit entry without its conversation and run: %v", tool, e)
		}
		st, c := call(t, http.MethodGet, base+"/v1/conversations/"+conv, "k-ops", "")
		meta, _ := c["metadata"].(map[string]any)
		if st != 200 || c["delegated"] != true || c["created_by"] != "schedule" || c["tenant_id"] != "t1" ||
			!strings.HasPrefix(str(meta, "title"), "schedule: "+tool+" @ ") {
			t.Fatalf("%s: the run's conversation: %d %v", tool, st, c)
		}
		s := openStream(t, base, "k-ops", conv, 0)
		started, ended := s.next(), s.next()
		s.close()
		if started.Type != "tool_call_started" || ended.Type != "tool_call_result" ||
			started.Data["tool_call_id"] != e["tool_call_id"] || ended.Data["tool_call_id"] != e["tool_call_id"] ||
			started.Data["run_id"] != e["run_id"] || started.Data["tool_name"] != tool {
			t.Fatalf("%s: events %s %v, %s %v; audit %v", tool, started.Type, started.Data, ended.Type, ended.Data, e)
		}
		if ended.Data["status"] != want.status || !strings.Contains(fmt.Sprint(ended.Data[want.field]), want.value) {
			t.Errorf("%s: tool_call_result %v, want %s with %s %q", tool, ended.Data, want.status, want.field, want.value)
		}
		for _, key := range []string{"k-web", "k-other"} {
			if st, m := call(t, http.MethodGet, base+"/v1/conversations/"+conv, key, ""); st != 404 {
				t.Errorf("%s: %s read the run's conversation: %d %v", tool, key, st, m)
			}
			if st, _ := callRaw(t, http.MethodGet, base+"/v1/conversations/"+conv+"/events", key, ""); st != 404 {
				t.Errorf("%s: %s streamed the run's conversation: %d", tool, key, st)
			}
		}
	}
	st, m := call(t, http.MethodGet, base+"/v1/audit?kind=schedule_run", "k-other", "")
	if entries, _ := m["entries"].([]any); st != 200 || len(entries) != 0 {
		t.Errorf("another tenant's audit of schedule_run: %d %v", st, m)
	}
}
