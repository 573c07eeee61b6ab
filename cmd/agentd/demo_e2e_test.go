package main

import (
	"strings"
	"testing"
)

// The demo project's examples of docs/hooks.md, docs/files.md and
// docs/subagents.md work: the hook blocks the announcements channel, the
// notes edit parks with its diff, the researcher's refund is denied
// without a card while its lookup runs.
func TestDemoHookFilesSubagent(t *testing.T) {
	base, _, _ := serveWithLog(t, "--addr", "127.0.0.1:0", "--data", t.TempDir())

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "post to the announcements channel")
	ref := st.waitFor("tool_call_refused", nil)
	if !strings.Contains(str(ref.Data, "reason"), `hook "block-channel" denied it: the announcements channel is closed`) {
		t.Fatalf("hook: %s", ref.Raw)
	}

	conv, st = newConversation(t, base, "")
	send(t, base, "", conv, "update the notes")
	cr := st.waitFor("confirmation_required", nil)
	card, _ := cr.Data["card"].(map[string]any)
	if !strings.Contains(str(card, "diff"), "-Support hours: 9:00 to 17:00.\n+Support hours: 8:00 to 18:00.\n") {
		t.Fatalf("notes card: %s", cr.Raw)
	}

	conv, st = newConversation(t, base, "")
	send(t, base, "", conv, "ask the researcher about my order")
	msg := st.waitFor("message", func(ev sseEvent) bool { return strings.HasPrefix(str(ev.Data, "content"), "The researcher says") })
	if !strings.Contains(str(msg.Data, "content"), "needs a person's approval, and a subagent cannot ask for it") {
		t.Fatalf("researcher: %q", msg.Data["content"])
	}
	for _, ev := range st.seen {
		if ev.Type == "confirmation_required" {
			t.Fatalf("the researcher got a card: %s", ev.Raw)
		}
	}
	// The researcher's refused refund is in the conversation's audit log,
	// marked as the subagent's (docs/subagents.md).
	_, page := call(t, "GET", base+"/v1/audit?kind=refusal&conversation_id="+conv, "", "")
	entries, _ := page["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("audit of the researcher's conversation: %v", page)
	}
	if e, _ := entries[0].(map[string]any); str(e, "subagent") != "researcher" || str(e, "tool_name") != "refund_payment" ||
		str(e, "tier") != "confirm" || !strings.HasPrefix(str(e, "task_tool_call_id"), "call_") || !strings.HasPrefix(str(e, "tool_call_id"), "call_") {
		t.Fatalf("the researcher's refusal in the audit log: %v", e)
	}
}
