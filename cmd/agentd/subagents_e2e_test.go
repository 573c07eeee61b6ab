package main

import (
	"strings"
	"testing"
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
