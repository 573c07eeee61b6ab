package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var subagentRules = `[
 {"when":{"user":"^delegate"},"reply":{"text":"Asking the researcher.","tool_calls":[{"name":"task","arguments":{"subagent":"researcher","prompt":"research the payment"}}]}},
 {"when":{"user":"^research"},"reply":{"text":"Recording and paying.","tool_calls":[{"name":"record","arguments":{}},{"name":"pay","arguments":{"amount":5}}]}},
 {"when":{"tool_result":"task","status":"completed"},"reply":{"text":"research: {{result}}"}},` + defaultRules[1:]

// Acceptance 4: a subagent's confirm-tier call is denied without a card and
// the reason reaches the parent model; its auto call runs; its events
// appear in the parent stream as subagent_event and replay after a
// reconnect.
func TestSubagentEndToEnd(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	writeAgent(t, dir, subagentRules, map[string]any{"subagents": []map[string]any{
		{"name": "researcher", "description": "looks things up", "system_prompt": "You research.", "tools": []string{"record", "pay"}},
	}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "delegate this")

	started := st.waitFor("tool_call_started", func(ev sseEvent) bool { return ev.Data["tool_name"] == "task" })
	if started.Data["server_id"] != "subagents" {
		t.Fatalf("task call: %s", started.Raw)
	}
	taskID := str(started.Data, "tool_call_id")
	res := st.waitFor("tool_call_result", func(ev sseEvent) bool { return ev.Data["tool_call_id"] == taskID })
	const reason = `"pay" needs a person's approval, and a subagent cannot ask for it`
	if res.Data["status"] != "completed" || !strings.Contains(res.Raw, "not paid, reason: "+strings.ReplaceAll(reason, `"`, `\"`)) {
		t.Fatalf("task result: %s", res.Raw)
	}
	msg := st.waitFor("message", func(ev sseEvent) bool { return strings.HasPrefix(str(ev.Data, "content"), "research: ") })
	if !strings.Contains(str(msg.Data, "content"), `needs a person's approval, and a subagent cannot ask for it`) {
		t.Fatalf("the parent model did not read the reason: %q", msg.Data["content"])
	}
	st.waitFor("run_finished", nil)

	inner := map[string]int{}
	var relayed []sseEvent
	for _, ev := range st.seen {
		if ev.Type == "confirmation_required" {
			t.Fatalf("a subagent call got a card: %s", ev.Raw)
		}
		if ev.Type != "subagent_event" {
			continue
		}
		relayed = append(relayed, ev)
		in, _ := ev.Data["event"].(map[string]any)
		if ev.Data["tool_call_id"] != taskID || ev.Data["subagent"] != "researcher" || in["conversation_id"] != conv {
			t.Fatalf("subagent_event: %s", ev.Raw)
		}
		inner[str(in, "type")+":"+str(in, "tool_name")]++
		if in["type"] == "tool_call_refused" && (in["tier"] != "confirm" || in["reason"] != reason) {
			t.Fatalf("denial: %s", ev.Raw)
		}
		if in["type"] == "tool_call_result" && in["tool_name"] == "record" && in["status"] != "completed" {
			t.Fatalf("record: %s", ev.Raw)
		}
	}
	if inner["tool_call_refused:pay"] != 1 || inner["tool_call_started:record"] != 1 || inner["tool_call_result:record"] != 1 || inner["message:"] != 2 {
		t.Fatalf("inner events: %v", inner)
	}
	if execCount(t, execLog, "record") != 1 || execCount(t, execLog, "pay") != 0 {
		t.Fatalf("record ran %d, pay %d times", execCount(t, execLog, "record"), execCount(t, execLog, "pay"))
	}
	// A reconnect replays them from the durable log, the same events.
	replay := openStream(t, base, "", conv, 0)
	var again []sseEvent
	for len(again) < len(relayed) {
		if ev := replay.next(); ev.Type == "subagent_event" {
			again = append(again, ev)
		}
	}
	for i := range relayed {
		if again[i].ID != relayed[i].ID || again[i].Raw != relayed[i].Raw {
			t.Fatalf("replayed %d: %s, live %s", i, again[i].Raw, relayed[i].Raw)
		}
	}
}

// blockingRules: the parent gives the worker a task; the worker calls
// block (a command tool that sleeps until it is killed) and, should it
// ever read block's result, record; the parent reports the task's outcome.
var blockingRules = `[
 {"when":{"user":"^delegate block"},"reply":{"text":"Asking the worker.","tool_calls":[{"name":"task","arguments":{"subagent":"worker","prompt":"block now"}}]}},
 {"when":{"user":"^block now"},"reply":{"tool_calls":[{"name":"block","arguments":{}}]}},
 {"when":{"tool_result":"block"},"reply":{"tool_calls":[{"name":"record","arguments":{}}]}},
 {"when":{"tool_result":"task"},"reply":{"text":"task {{status}}: {{reason}}"}},
 {"when":{"user":"^record"},"reply":{"tool_calls":[{"name":"record","arguments":{}}]}},` + defaultRules[1:]

// blockingProject is a test project whose subagent "worker" runs block:
// block writes its pid to pidFile, logs "block", sleeps, and would log
// "block-done" if it ever finished.
func blockingProject(t *testing.T) (dir, execLog, pidFile string) {
	t.Helper()
	dir, execLog = writeProject(t, projectOpts{})
	pidFile = filepath.Join(dir, "block.pid")
	td := filepath.Join(dir, "tools", "block")
	must(t, os.MkdirAll(td, 0o755))
	must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null; echo $$ > '"+pidFile+
		"'; echo block >> \"$AGENTD_TEST_LOG\"; sleep 1000; echo block-done >> \"$AGENTD_TEST_LOG\"\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"block","description":"blocks","command":["/bin/sh","./run.sh"],"env":["AGENTD_TEST_LOG"],"timeout_ms":600000}`), 0o644))
	writeAgent(t, dir, blockingRules, map[string]any{"subagents": []map[string]any{
		{"name": "worker", "description": "blocks", "system_prompt": "You work.", "tools": []string{"block", "record"}},
	}})
	return dir, execLog, pidFile
}

// waitForExec waits until name is in the execution log.
func waitForExec(t *testing.T, execLog, name string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for execCount(t, execLog, name) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// innerEvent is the inner event of a subagent_event ("" type otherwise).
func innerEvent(ev sseEvent) (typ, tool string, in map[string]any) {
	if ev.Type != "subagent_event" {
		return "", "", nil
	}
	in, _ = ev.Data["event"].(map[string]any)
	return str(in, "type"), str(in, "tool_name"), in
}

// Cancelling the parent run while its subagent's tool runs kills that tool
// (its process is gone and never finished), ends the task call failed
// with "outcome is unknown", finishes the run cancelled, and nothing of the
// subagent runs afterwards.
func TestSubagentCancelKillsItsTool(t *testing.T) {
	dir, execLog, pidFile := blockingProject(t)
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	runID := str(send(t, base, "", conv, "delegate block"), "run_id")
	taskID := str(st.waitFor("tool_call_started", func(ev sseEvent) bool { return ev.Data["tool_name"] == "task" }).Data, "tool_call_id")
	st.waitFor("subagent_event", func(ev sseEvent) bool {
		typ, tool, _ := innerEvent(ev)
		return typ == "tool_call_started" && tool == "block"
	})
	waitForExec(t, execLog, "block")

	if status, run := call(t, http.MethodPost, base+"/v1/runs/"+runID+"/cancel", "", ""); status != 200 || run["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, run)
	}
	fin := st.waitFor("run_finished", nil)
	if fin.Data["status"] != "cancelled" {
		t.Fatalf("run_finished: %s", fin.Raw)
	}
	res := st.waitFor("tool_call_result", func(ev sseEvent) bool { return ev.Data["tool_call_id"] == taskID })
	if res.Data["status"] != "failed" || !strings.Contains(str(res.Data, "error"), "cancelled while the tool was running") {
		t.Fatalf("task result: %s", res.Raw)
	}
	assertProcessGone(t, pidFile)

	// A later run of the same conversation is the barrier: whatever the
	// cancelled subagent could still do would come before its end.
	send(t, base, "", conv, "record")
	st.waitFor("run_finished", func(ev sseEvent) bool { return ev.Data["run_id"] != runID })
	after, blockResult := false, 0
	for _, ev := range st.seen {
		if ev.ID == fin.ID {
			after = true
			continue
		}
		typ, tool, in := innerEvent(ev)
		switch {
		case !after:
		case typ == "tool_call_result" && tool == "block":
			if in["status"] != "failed" || !strings.Contains(str(in, "error"), "outcome is unknown") {
				t.Fatalf("block's result: %s", ev.Raw)
			}
			blockResult++
		case typ != "":
			t.Fatalf("the subagent went on after the cancel: %s (%s)", ev.Raw, st.summary())
		}
	}
	if blockResult != 1 {
		t.Fatalf("block's tool_call_started is followed by %d results after the cancel, want 1: %s", blockResult, st.summary())
	}
	if n, done, rec := execCount(t, execLog, "block"), execCount(t, execLog, "block-done"), execCount(t, execLog, "record"); n != 1 || done != 0 || rec != 1 {
		t.Fatalf("block ran %d times, finished %d times; record ran %d times (want 1, 0, 1: the later run's)", n, done, rec)
	}
	_, task := call(t, http.MethodGet, base+"/v1/tool-calls/"+taskID, "", "")
	if task["status"] != "failed" {
		t.Fatalf("task call: %v", task)
	}
}

// kill -9 of the real server while a subagent's tool runs: the tool dies
// with the server; after the restart the task call is failed with
// "outcome is unknown" (task is not idempotent), nothing the subagent did
// runs again, and the parent run goes on with that result and finishes.
func TestKill9MidSubagent(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog, pidFile := blockingProject(t)
	data := t.TempDir()
	env := "AGENTD_TEST_LOG=" + execLog
	base, proc := startProcess(t, bin, dir, data, env)
	conv, st := newConversation(t, base, "")
	runID := str(send(t, base, "", conv, "delegate block"), "run_id")
	taskID := str(st.waitFor("tool_call_started", func(ev sseEvent) bool { return ev.Data["tool_name"] == "task" }).Data, "tool_call_id")
	st.waitFor("subagent_event", func(ev sseEvent) bool {
		typ, tool, _ := innerEvent(ev)
		return typ == "tool_call_started" && tool == "block"
	})
	waitForExec(t, execLog, "block")
	lastSeen := st.seen[len(st.seen)-1].ID
	var relayed []sseEvent
	for _, ev := range st.seen {
		if ev.Type == "subagent_event" {
			relayed = append(relayed, ev)
		}
	}

	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()
	assertProcessGone(t, pidFile)

	base2, _ := startProcess(t, bin, dir, data, env)
	st2 := openStream(t, base2, "", conv, lastSeen)
	res := st2.waitFor("tool_call_result", nil)
	if res.Data["tool_call_id"] != taskID || res.Data["status"] != "failed" || !strings.Contains(str(res.Data, "error"), "outcome is unknown") {
		t.Fatalf("first result after the restart: %s (%s)", res.Raw, st2.summary())
	}
	msg := st2.waitFor("message", nil)
	if !strings.HasPrefix(str(msg.Data, "content"), "task failed: ") || !strings.Contains(str(msg.Data, "content"), "outcome is unknown") {
		t.Fatalf("the parent model read %q", msg.Data["content"])
	}
	fin := st2.waitFor("run_finished", nil)
	if fin.Data["run_id"] != runID || fin.Data["status"] != "completed" {
		t.Fatalf("run_finished: %s", fin.Raw)
	}
	for _, ev := range st2.seen {
		if typ, _, _ := innerEvent(ev); typ != "" {
			t.Fatalf("the subagent went on after the restart: %s (%s)", ev.Raw, st2.summary())
		}
	}
	if n, done, rec := execCount(t, execLog, "block"), execCount(t, execLog, "block-done"), execCount(t, execLog, "record"); n != 1 || done != 0 || rec != 0 {
		t.Fatalf("block ran %d times, finished %d times; record ran %d times (want 1, 0, 0)", n, done, rec)
	}
	_, task := call(t, http.MethodGet, base2+"/v1/tool-calls/"+taskID, "", "")
	if task["status"] != "failed" {
		t.Fatalf("task call after the restart: %v", task)
	}
	// The whole log again: the subagent's events from before the crash,
	// each exactly once, byte for byte, and none after.
	all := openStream(t, base2, "", conv, 0)
	all.waitFor("run_finished", nil)
	var again []sseEvent
	for _, ev := range all.seen {
		if ev.Type == "subagent_event" {
			again = append(again, ev)
		}
	}
	if len(again) != len(relayed) {
		t.Fatalf("%d subagent events replayed, %d seen live: %s", len(again), len(relayed), all.summary())
	}
	for i := range relayed {
		if again[i].ID != relayed[i].ID || again[i].Raw != relayed[i].Raw {
			t.Fatalf("replayed %s, live %s", again[i].Raw, relayed[i].Raw)
		}
	}
}

// A subagent cannot start a subagent: with its default tools (every
// llm_callable tool but task) its model's call to task is refused as a
// tool it does not have, nothing is started, and its answer is the parent's
// task result.
func TestSubagentCannotCallTask(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	writeAgent(t, dir, `[
 {"when":{"user":"^nest"},"reply":{"tool_calls":[{"name":"task","arguments":{"subagent":"nester","prompt":"again nest"}}]}},
 {"when":{"user":"^again nest"},"reply":{"tool_calls":[{"name":"task","arguments":{"subagent":"nester","prompt":"nest deeper"}}]}},
 {"when":{"tool_result":"task"},"reply":{"text":"task {{status}}: {{reason}}{{result}}"}}]`,
		map[string]any{"subagents": []map[string]any{{"name": "nester", "description": "tries to nest", "system_prompt": "You nest."}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "nest")
	res := st.waitFor("tool_call_result", nil)
	if res.Data["tool_name"] != "task" || res.Data["status"] != "completed" || !strings.Contains(res.Raw, "task refused") || !strings.Contains(res.Raw, "not available") {
		t.Fatalf("task result: %s", res.Raw)
	}
	st.waitFor("run_finished", nil)
	refused, tasks := 0, 0
	for _, ev := range st.seen {
		typ, tool, in := innerEvent(ev)
		if typ == "tool_call_refused" && tool == "task" && in["tier"] == "never" {
			refused++
		}
		if ev.Type == "tool_call_started" && ev.Data["tool_name"] == "task" {
			tasks++
		}
		if typ == "tool_call_started" {
			t.Fatalf("the subagent started a call: %s", ev.Raw)
		}
	}
	if refused != 1 || tasks != 1 {
		t.Fatalf("inner task refusals %d, task calls %d (want 1, 1): %s", refused, tasks, st.summary())
	}
}
