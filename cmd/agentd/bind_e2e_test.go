package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// protocolFrames are the data frames of a protocol response body.
func protocolFrames(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("frame %q: %v", d, err)
		}
		out = append(out, m)
	}
	return out
}

// aguiFrame is the first frame of typ in an AG-UI response body (nil if none).
func aguiFrame(t *testing.T, body []byte, typ string) map[string]any {
	t.Helper()
	for _, f := range protocolFrames(t, body) {
		if f["type"] == typ {
			return f
		}
	}
	return nil
}

// aiSDKApproval is an AI SDK request answering approvalID of callID on the
// chat (thread) conv.
func aiSDKApproval(conv, callID, approvalID string) string {
	return fmt.Sprintf(`{"id":%q,"messages":[{"id":"m","role":"assistant","parts":[{"type":"tool-write_file","toolCallId":%q,"state":"approval-responded","input":{},"approval":{"id":%q,"approved":true}}]}]}`,
		conv, callID, approvalID)
}

// Issue 17 finding 1, on the real binary: write_file parks; the file
// changes; the approval parks the call again with a new diff (card 2).
// The first approval sent again — native with the digest, bulk, AG-UI with
// argumentsSha256, the AI SDK's approval response — is stale on every door
// and writes nothing over the other writer's change; card 2, named (its
// card_revision, the interrupt id <call>.2), is what is decided.
func TestRepeatedApprovalOfAReparkedCall(t *testing.T) {
	dir, ws, _ := filesProject(t)
	base, _ := startServer(t, dir, t.TempDir(), nil)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "write notes")
	cr := st.waitFor("confirmation_required", nil)
	callID, digest := str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256")
	if _, ok := cr.Data["card_revision"]; ok {
		t.Fatalf("a first card has card_revision: %s", cr.Raw)
	}
	notes := filepath.Join(ws, "notes.md")
	changed := "one\ntwo\nthree\nfour\n"
	must(t, os.WriteFile(notes, []byte(changed), 0o644))
	approval := fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, digest)
	if status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", approval); status != 200 {
		t.Fatalf("first approval: %d %v", status, m)
	}
	cr2 := st.waitFor("confirmation_required", nil)
	if cr2.Data["card_revision"] != float64(2) || str(cr2.Data, "arguments_sha256") != digest {
		t.Fatalf("second card: %s", cr2.Raw)
	}
	if got := getCall(t, base, "", callID); got["card_revision"] != float64(2) {
		t.Fatalf("the tool call object: %v", got)
	}

	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", approval)
	if status != http.StatusConflict || errCode(m) != "stale" {
		t.Errorf("native repeat: %d %v", status, m)
	}
	_, m = call(t, http.MethodPost, base+"/v1/approvals", "", fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":true,"arguments_sha256":%q}]}`, callID, digest))
	if res, _ := m["results"].([]any); len(res) != 1 || !strings.Contains(fmt.Sprint(res[0]), "stale") {
		t.Errorf("bulk repeat: %v", m)
	}
	_, body := callRaw(t, http.MethodPost, base+"/v1/ag-ui", "", fmt.Sprintf(
		`{"threadId":%q,"runId":"r1","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true,"argumentsSha256":%q}}]}`, conv, callID, digest))
	if e := aguiFrame(t, body, "RUN_ERROR"); e == nil || e["code"] != "stale" {
		t.Errorf("AG-UI repeat: %s", body)
	}
	status, m = call(t, http.MethodPost, base+"/v1/ai-sdk/chat", "", aiSDKApproval(conv, callID, callID))
	if status != http.StatusConflict || errCode(m) != "stale" {
		t.Errorf("AI SDK repeat: %d %v", status, m)
	}
	if b, _ := os.ReadFile(notes); string(b) != changed {
		t.Fatalf("a repeat wrote over the change: %q", b)
	}
	if got := getCall(t, base, "", callID); got["status"] != "requires_confirmation" || len(got["decisions"].([]any)) != 1 {
		t.Fatalf("after the repeats: %v", got)
	}

	// The AG-UI interrupt of card 2 has its own id; answering it decides card 2.
	_, body = callRaw(t, http.MethodPost, base+"/v1/ag-ui", "", fmt.Sprintf(`{"threadId":%q,"runId":"r2","messages":[]}`, conv))
	fin := aguiFrame(t, body, "RUN_FINISHED")
	ins, _ := fin["outcome"].(map[string]any)["interrupts"].([]any)
	if len(ins) != 1 || ins[0].(map[string]any)["id"] != callID+".2" || ins[0].(map[string]any)["toolCallId"] != callID {
		t.Fatalf("the interrupt of card 2: %s", body)
	}
	_, body = callRaw(t, http.MethodPost, base+"/v1/ag-ui", "", fmt.Sprintf(
		`{"threadId":%q,"runId":"r3","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true,"argumentsSha256":%q}}]}`, conv, callID+".2", digest))
	if e := aguiFrame(t, body, "RUN_ERROR"); e != nil || aguiFrame(t, body, "TOOL_CALL_RESULT") == nil {
		t.Fatalf("AG-UI answer to card 2: %s", body)
	}
	if b, _ := os.ReadFile(notes); string(b) != "one\nTWO\nthree\n" {
		t.Fatalf("written %q, want card 2's content", b)
	}
	// Card 2's answer again is an idempotent repeat; card 1's still stale.
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve","card_revision":2}`)
	if status != 200 || m["decision"] != "approved" {
		t.Errorf("repeat of card 2: %d %v", status, m)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", approval)
	if status != http.StatusConflict || errCode(m) != "stale" {
		t.Errorf("card 1 after card 2: %d %v", status, m)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve","card_revision":0}`)
	if status != http.StatusBadRequest || errCode(m) != "invalid" {
		t.Errorf("card_revision 0: %d %v", status, m)
	}
}

// Issue 17 finding 1, for a hook that rewrites the arguments only at
// execution: the repeated AI SDK approval response (no digest, the call's
// id as approval id) answers the first card and runs nothing; the new
// card's approval id decides the rewritten call.
func TestRepeatedAISDKApprovalAfterAHookRewrite(t *testing.T) {
	base, execLog := hookServer(t, func(dir string) {
		writeHook(t, dir, "late", prePay,
			`in=$(cat); case "$in" in *'"amount":5'*'"phase":"execute"'*) echo '{"decision":"allow","updated_arguments":{"amount":6}}';; esac`)
	})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	approve := func(approvalID string) (int, []byte) {
		return callRaw(t, http.MethodPost, base+"/v1/ai-sdk/chat", "", strings.Replace(aiSDKApproval(conv, callID, approvalID), "tool-write_file", "tool-pay", 1))
	}
	if status, body := approve(callID); status != 200 {
		t.Fatalf("first approval: %d %s", status, body)
	}
	cr2 := st.waitFor("confirmation_required", nil)
	if p, _ := cr2.Data["params"].(map[string]any); p["amount"] != float64(6) || cr2.Data["card_revision"] != float64(2) {
		t.Fatalf("second card: %s", cr2.Raw)
	}
	if status, body := approve(callID); status != http.StatusConflict || !strings.Contains(string(body), `"stale"`) {
		t.Errorf("repeated approval response: %d %s", status, body)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times on the repeat", n)
	}
	status, body := approve(callID + ".2")
	if status != 200 || !strings.Contains(string(body), `"tool-output-available"`) {
		t.Fatalf("approval of card 2: %d %s", status, body)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
}
