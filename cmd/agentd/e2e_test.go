package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Acceptance 1: message → confirmation_required with every SPEC §6 field →
// approval → tool_call_result for the same call → run_finished; the command
// ran exactly once and the model was not called in between.
func TestApprovalEndToEnd(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})

	conv, st := newConversation(t, base, "")
	sent := send(t, base, "", conv, "pay the invoice")
	runID := str(sent, "run_id")

	started := st.waitFor("run_started", nil)
	if str(started.Data, "run_id") != runID || str(started.Data, "correlation_id") != str(sent, "correlation_id") {
		t.Fatalf("run_started %v does not match %v", started.Data, sent)
	}
	cr := st.waitFor("confirmation_required", nil)
	for _, f := range []string{"type", "conversation_id", "timestamp", "endpoint", "method", "reason", "escalated", "params",
		"connection_name", "correlation_id", "tool_call_id", "tool_name", "server_id", "run_id", "arguments_sha256",
		"requires_approval_at", "allowed_decisions", "card"} {
		if _, ok := cr.Data[f]; !ok {
			t.Errorf("confirmation_required lacks %q: %s", f, cr.Raw)
		}
	}
	if cr.Data["method"] != "TOOL" || cr.Data["endpoint"] != "pay" || cr.Data["tool_name"] != "pay" ||
		cr.Data["reason"] != `Tool "pay" requires user confirmation` || cr.Data["escalated"] != false ||
		cr.Data["conversation_id"] != conv || cr.Data["run_id"] != runID || cr.Data["type"] != "confirmation_required" ||
		cr.Data["correlation_id"] != str(sent, "correlation_id") {
		t.Errorf("card fields wrong: %s", cr.Raw)
	}
	if p, _ := cr.Data["params"].(map[string]any); p["amount"] != float64(5) {
		t.Errorf("params %v", cr.Data["params"])
	}
	deadline, err := time.Parse(time.RFC3339Nano, str(cr.Data, "requires_approval_at"))
	if err != nil || deadline.Before(time.Now().Add(14*time.Minute)) {
		t.Errorf("deadline %q (want ~15m from now): %v", cr.Data["requires_approval_at"], err)
	}
	card, _ := cr.Data["card"].(map[string]any)
	if str(card, "title") == "" {
		t.Errorf("card without title: %v", card)
	}
	callID := str(cr.Data, "tool_call_id")
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("parked call ran %d times before approval", n)
	}

	// The parked call is visible through the API.
	status, got := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	if status != 200 || got["status"] != "requires_confirmation" || got["arguments_sha256"] != cr.Data["arguments_sha256"] {
		t.Fatalf("GET call: %d %v", status, got)
	}

	if w := st.waitFor("run_waiting", nil); w.Data["run_id"] != runID {
		t.Fatalf("run_waiting %s", w.Raw)
	}
	status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "",
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, cr.Data["arguments_sha256"]))
	if status != 200 || dec["decision"] != "approved" || dec["tool_call_id"] != callID {
		t.Fatalf("approve: %d %v", status, dec)
	}

	resolved := st.next()
	if resolved.Type != "confirmation_resolved" || resolved.Data["decision"] != "approved" || resolved.Data["tool_call_id"] != callID ||
		resolved.Data["arguments_sha256"] != cr.Data["arguments_sha256"] || str(resolved.Data, "decided_by") == "" {
		t.Fatalf("after approval expected confirmation_resolved, got %s %s", resolved.Type, resolved.Raw)
	}
	// The same call runs next: no model step (text_delta/message) in between.
	startedCall := st.next()
	if startedCall.Type != "tool_call_started" || startedCall.Data["tool_call_id"] != callID {
		t.Fatalf("expected tool_call_started for %s, got %s %s", callID, startedCall.Type, startedCall.Raw)
	}
	result := st.next()
	if result.Type != "tool_call_result" || result.Data["tool_call_id"] != callID || result.Data["status"] != "completed" {
		t.Fatalf("expected the call's result, got %s %s", result.Type, result.Raw)
	}
	if r, _ := result.Data["result"].(map[string]any); r["paid"] != true {
		t.Errorf("result %v", result.Data["result"])
	}
	msg := st.waitFor("message", nil)
	if !strings.HasPrefix(str(msg.Data, "content"), "paid: ") {
		t.Errorf("model did not see the result: %q", msg.Data["content"])
	}
	fin := st.waitFor("run_finished", nil)
	if fin.Data["status"] != "completed" || fin.Data["run_id"] != runID {
		t.Errorf("run_finished %s", fin.Raw)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
	// Ids strictly increase, without gaps.
	for i := 1; i < len(st.seen); i++ {
		if st.seen[i].ID != st.seen[i-1].ID+1 {
			t.Fatalf("event ids not consecutive: %s", st.summary())
		}
	}
	status, got = call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	decs, _ := got["decisions"].([]any)
	if status != 200 || got["status"] != "completed" || len(decs) != 1 {
		t.Fatalf("final call: %d %v", status, got)
	}
}

// Acceptance 2: deny feeds the reason to the model; expiry says expired, never denied.
func TestDenyAndExpiry(t *testing.T) {
	t.Run("deny", func(t *testing.T) {
		dir, execLog := writeProject(t, projectOpts{})
		base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "pay now")
		cr := st.waitFor("confirmation_required", nil)
		id := str(cr.Data, "tool_call_id")
		status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"deny","reason":"budget is frozen"}`)
		if status != 200 || dec["decision"] != "denied" {
			t.Fatalf("deny: %d %v", status, dec)
		}
		res := st.waitFor("confirmation_resolved", nil)
		if res.Data["decision"] != "denied" || res.Data["reason"] != "budget is frozen" {
			t.Fatalf("resolved %s", res.Raw)
		}
		msg := st.waitFor("message", nil)
		if got := str(msg.Data, "content"); got != "not paid, reason: budget is frozen" {
			t.Fatalf("model saw %q", got)
		}
		st.waitFor("run_finished", nil)
		if n := execCount(t, execLog, "pay"); n != 0 {
			t.Fatalf("denied call ran %d times", n)
		}
		// A different decision after that is 409.
		status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
		if status != 409 || errCode(m) != "conflict" {
			t.Fatalf("approve after deny: %d %v", status, m)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		dir, execLog := writeProject(t, projectOpts{approvalTimeout: "1s"})
		base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "pay later")
		cr := st.waitFor("confirmation_required", nil)
		id := str(cr.Data, "tool_call_id")
		res := st.waitFor("confirmation_resolved", nil)
		if res.Data["decision"] != "expired" || res.Data["tool_call_id"] != id {
			t.Fatalf("resolved %s", res.Raw)
		}
		msg := st.waitFor("message", nil)
		content := str(msg.Data, "content")
		if !strings.Contains(content, "expired") || strings.Contains(content, "denied") {
			t.Fatalf("model saw %q: must say expired, never denied", content)
		}
		st.waitFor("run_finished", nil)
		status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
		if status != 409 || errCode(m) != "expired" {
			t.Fatalf("approve after expiry: %d %v", status, m)
		}
		if n := execCount(t, execLog, "pay"); n != 0 {
			t.Fatalf("expired call ran")
		}
	})
}

// Acceptance 3: an auto call completes while a confirm call of the same
// step is still parked; the model is called again only after both.
func TestParallelCalls(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "both please")

	var parkedID, autoID string
	autoDone, waiting := false, false
	for !(autoDone && waiting) {
		ev := st.next()
		switch ev.Type {
		case "confirmation_required":
			parkedID = str(ev.Data, "tool_call_id")
		case "tool_call_started":
			autoID = str(ev.Data, "tool_call_id")
		case "tool_call_result":
			if ev.Data["tool_call_id"] != autoID || ev.Data["status"] != "completed" {
				t.Fatalf("unexpected result %s", ev.Raw)
			}
			autoDone = true
		case "run_waiting":
			p, _ := ev.Data["pending"].([]any)
			if len(p) != 1 || p[0] != parkedID {
				t.Fatalf("run_waiting pending %v, want [%s]", p, parkedID)
			}
			waiting = true
		case "message", "text_delta", "run_finished":
			t.Fatalf("model called or run ended while a call is parked: %s", ev.Raw)
		}
	}
	if status, c := call(t, http.MethodGet, base+"/v1/tool-calls/"+parkedID, "", ""); status != 200 || c["status"] != "requires_confirmation" {
		t.Fatalf("parked call: %v", c)
	}
	if execCount(t, execLog, "record") != 1 || execCount(t, execLog, "pay") != 0 {
		t.Fatalf("executions: record=%d pay=%d", execCount(t, execLog, "record"), execCount(t, execLog, "pay"))
	}
	status, _ := call(t, http.MethodPost, base+"/v1/tool-calls/"+parkedID+"/approval", "", `{"decision":"approve"}`)
	if status != 200 {
		t.Fatalf("approve: %d", status)
	}
	msg := st.waitFor("message", nil)
	if !strings.HasPrefix(str(msg.Data, "content"), "paid: ") {
		t.Fatalf("continuation %q", msg.Data["content"])
	}
	st.waitFor("run_finished", nil)
}

// Acceptance 4: 20 concurrent approvals → one execution, every response 200
// with the same body; a different decision afterwards → 409.
func TestConcurrentApprovals(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay")
	id := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")

	var wg sync.WaitGroup
	bodies := make([]string, 20)
	statuses := make([]int, 20)
	start := make(chan struct{})
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], bodies[i] = func() (int, string) {
				s, b := callRaw(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
				return s, string(b)
			}()
		}()
	}
	close(start)
	wg.Wait()
	for i := range 20 {
		if statuses[i] != 200 || bodies[i] != bodies[0] {
			t.Fatalf("response %d: %d %s (first: %s)", i, statuses[i], bodies[i], bodies[0])
		}
	}
	st.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want exactly 1", n)
	}
	resolved := 0
	for _, ev := range st.seen {
		if ev.Type == "confirmation_resolved" {
			resolved++
		}
	}
	if resolved != 1 {
		t.Fatalf("%d confirmation_resolved events, want 1", resolved)
	}
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"deny"}`)
	if status != 409 || errCode(m) != "conflict" {
		t.Fatalf("deny after approve: %d %v", status, m)
	}
	// Repeating the approval is still idempotent.
	s, b := callRaw(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
	if s != 200 || string(b) != bodies[0] {
		t.Fatalf("repeat: %d %s", s, b)
	}
}

// Acceptance 7: a second tenant's key gets 404 on the first tenant's
// conversation, stream, call and approval; no key or a bad key gets 401.
func TestTenantIsolation(t *testing.T) {
	keyA, keyB, keyC := "key-tenant-a-0123456789", "key-tenant-b-9876543210", "key-tenant-a-other-project"
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{
		keyA: {"tenant-a", "client", "p1"}, keyB: {"tenant-b", "client", "p1"}, keyC: {"tenant-a", "operator", "p2"}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})

	conv, st := newConversation(t, base, keyA)
	sent := send(t, base, keyA, conv, "pay")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	runID := str(sent, "run_id")

	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/conversations/" + conv, ""},
		{"GET", "/v1/conversations/" + conv + "/events", ""},
		{"POST", "/v1/conversations/" + conv + "/messages", `{"content":"pay"}`},
		{"GET", "/v1/tool-calls/" + callID, ""},
		{"POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"approve"}`},
		{"GET", "/v1/runs/" + runID, ""},
		{"POST", "/v1/runs/" + runID + "/cancel", ""},
	} {
		for name, key := range map[string]string{"tenant B": keyB, "tenant A, other project": keyC} {
			status, m := call(t, tc.method, base+tc.path, key, tc.body)
			if status != 404 || errCode(m) != "not_found" {
				t.Errorf("%s %s %s: %d %v, want 404", name, tc.method, tc.path, status, m)
			}
		}
		if status, _ := call(t, tc.method, base+tc.path, "", tc.body); status != 401 {
			t.Errorf("no key %s %s: %d, want 401", tc.method, tc.path, status)
		}
		if status, _ := call(t, tc.method, base+tc.path, "wrong-key", tc.body); status != 401 {
			t.Errorf("bad key %s %s: %d, want 401", tc.method, tc.path, status)
		}
	}
	// Tenant B's attempts changed nothing: the call is still pending for A.
	status, c := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, keyA, "")
	if status != 200 || c["status"] != "requires_confirmation" {
		t.Fatalf("tenant A's call after B's attempts: %d %v", status, c)
	}
	if execCount(t, execLog, "pay") != 0 {
		t.Fatal("tenant B ran tenant A's call")
	}
	// The stream accepts ?access_token= for EventSource clients.
	status, _ = callRaw(t, http.MethodGet, base+"/v1/conversations/"+conv+"/events?access_token=wrong", "", "")
	if status != 401 {
		t.Fatalf("stream with bad access_token: %d", status)
	}
}

// Acceptance 8: bad input gets a clear error and loses nothing.
func TestBadInput(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")

	big := `{"content":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"malformed JSON", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":`, 400, "invalid", "malformed JSON"},
		{"unknown field", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"approve","extra":1}`, 400, "invalid", `unknown field "extra"`},
		{"wrong type", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":1}`, 400, "invalid", `"decision"`},
		{"bad decision", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"maybe"}`, 400, "invalid", "approve"},
		{"trailing data", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"approve"} {}`, 400, "invalid", "after the JSON"},
		{"empty body", "POST", "/v1/tool-calls/" + callID + "/approval", ``, 400, "invalid", "JSON object"},
		{"stale digest", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"approve","arguments_sha256":"` + strings.Repeat("0", 64) + `"}`, 409, "stale", "does not match"},
		{"bad digest", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"approve","arguments_sha256":"xyz"}`, 400, "invalid", "hex"},
		{"edit not allowed", "POST", "/v1/tool-calls/" + callID + "/approval", `{"decision":"approve","arguments":{"amount":1}}`, 400, "invalid", "editing"},
		{"oversized body", "POST", "/v1/conversations/" + conv + "/messages", big, 413, "too_large", "larger"},
		{"invalid call id", "GET", "/v1/tool-calls/not-an-id", "", 400, "invalid", "invalid tool call id"},
		{"invalid conversation id", "POST", "/v1/conversations/conv_123/messages", `{"content":"x"}`, 400, "invalid", "invalid conversation id"},
		{"unknown call", "GET", "/v1/tool-calls/call_01900000-0000-7000-8000-000000000000", "", 404, "not_found", "not found"},
		{"empty message", "POST", "/v1/conversations/" + conv + "/messages", `{"content":"  "}`, 400, "invalid", "empty"},
		{"run active", "POST", "/v1/conversations/" + conv + "/messages", `{"content":"pay"}`, 409, "run_active", ""},
		{"bad metadata", "POST", "/v1/conversations", `{"metadata":[1]}`, 400, "invalid", "metadata"},
		{"no route", "GET", "/v1/nothing", "", 404, "not_found", ""},
		{"bad last-event-id", "GET", "/v1/conversations/" + conv + "/events?last_event_id=-4", "", 400, "invalid", ""},
	} {
		status, m := call(t, tc.method, base+tc.path, "", tc.body)
		e, _ := m["error"].(map[string]any)
		if status != tc.status || errCode(m) != tc.code || !strings.Contains(str(e, "message"), tc.msg) {
			t.Errorf("%s: %d %v, want %d %s containing %q", tc.name, status, m, tc.status, tc.code, tc.msg)
		}
	}
	// Nothing was lost: the call is still pending and approving it works once.
	status, c := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	if status != 200 || c["status"] != "requires_confirmation" {
		t.Fatalf("call after bad input: %v", c)
	}
	if s, _ := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve"}`); s != 200 {
		t.Fatalf("approve after bad input: %d", s)
	}
	st.waitFor("run_finished", nil)
	if execCount(t, execLog, "pay") != 1 {
		t.Fatal("pay did not run exactly once")
	}

	// Model-side bad input: each case is a tool result the model reads, and the run goes on.
	for _, tc := range []struct{ msg, want string }{
		{"bad args", "pay refused: The call was not performed: invalid arguments for tool \"pay\""},
		{"unknown", "nope refused: Tool \"nope\" is not available"},
		{"garbage", "garbage completed: \"this is {{{ not json\""},
		{"hang", "hang failed: "},
		{"fail", "fail failed: "},
	} {
		send(t, base, "", conv, tc.msg)
		msg := st.waitFor("message", nil)
		if got := str(msg.Data, "content"); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: model saw %q, want prefix %q", tc.msg, got, tc.want)
		}
		fin := st.waitFor("run_finished", nil)
		if fin.Data["status"] != "completed" {
			t.Errorf("%s: run %s", tc.msg, fin.Raw)
		}
		switch tc.msg {
		case "hang":
			if !strings.Contains(lastResultError(st), "timed out") {
				t.Errorf("hang: error %q", lastResultError(st))
			}
		case "fail":
			if !strings.Contains(lastResultError(st), "boom: disk on fire") {
				t.Errorf("fail: error %q", lastResultError(st))
			}
		case "bad args", "unknown":
			if !hasEvent(st, "tool_call_refused") {
				t.Errorf("%s: no tool_call_refused", tc.msg)
			}
		}
	}
	// Refusals never announce a card.
	n := 0
	for _, ev := range st.seen {
		if ev.Type == "confirmation_required" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d confirmation_required events, want 1", n)
	}
}

func lastResultError(st *eventStream) string {
	for i := len(st.seen) - 1; i >= 0; i-- {
		if st.seen[i].Type == "tool_call_result" {
			return str(st.seen[i].Data, "error")
		}
	}
	return ""
}

func hasEvent(st *eventStream, typ string) bool {
	for _, ev := range st.seen {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

// Cancel: parked calls become cancelled and run_finished says cancelled.
func TestCancelRun(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	sent := send(t, base, "", conv, "pay")
	id := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	status, run := call(t, http.MethodPost, base+"/v1/runs/"+str(sent, "run_id")+"/cancel", "", "")
	if status != 200 || run["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, run)
	}
	res := st.waitFor("confirmation_resolved", nil)
	if res.Data["decision"] != "cancelled" {
		t.Fatalf("resolved %s", res.Raw)
	}
	fin := st.waitFor("run_finished", nil)
	if fin.Data["status"] != "cancelled" {
		t.Fatalf("finished %s", fin.Raw)
	}
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
	if status != 409 {
		t.Fatalf("approve after cancel: %d %v", status, m)
	}
	// The conversation takes a new message once the run is over.
	send(t, base, "", conv, "both")
	st.waitFor("confirmation_required", nil)
	var c map[string]any
	_, c = call(t, http.MethodGet, base+"/v1/conversations/"+conv, "", "")
	calls, _ := c["tool_calls"].([]any)
	if len(calls) != 3 {
		t.Fatalf("conversation has %d calls, want 3", len(calls))
	}
	b, _ := json.Marshal(c["messages"])
	if !strings.Contains(string(b), `"role":"user"`) {
		t.Fatalf("messages %s", b)
	}
	if execCount(t, execLog, "pay") != 0 {
		t.Fatal("cancelled call ran")
	}
}

// The client subcommands work against a real server: `agentd approve`
// decides a parked call and `agentd events` prints the stream as JSON lines.
func TestClientSubcommands(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay")
	id := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	env := func(k string) string {
		if k == "AGENTD_URL" {
			return base
		}
		return ""
	}
	var out strings.Builder
	if err := run(t.Context(), []string{"approve", id, "--reason", "ok by me"}, env, &out, io.Discard); err != nil {
		t.Fatalf("approve: %v", err)
	}
	var dec map[string]any
	if err := json.Unmarshal([]byte(out.String()), &dec); err != nil || dec["decision"] != "approved" || dec["reason"] != "ok by me" {
		t.Fatalf("approve printed %q (%v)", out.String(), err)
	}
	if err := run(t.Context(), []string{"approve", id, "--deny"}, env, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("deny after approve: %v", err)
	}
	st.waitFor("run_finished", nil)

	// events: follow until the run_finished line, then stop it.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"events", "--conversation", conv, "--last-event-id", "1"}, env, pw, io.Discard)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	sc.Buffer(nil, 1<<20)
	want := int64(2)
	for sc.Scan() {
		var l struct {
			ID   int64          `json:"id"`
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.ID != want || l.Data["type"] != l.Type {
			t.Fatalf("events line %q (want id %d): %v", sc.Text(), want, err)
		}
		want++
		if l.Type == "run_finished" {
			cancel()
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := <-done; err != nil {
		t.Fatalf("events: %v", err)
	}
	if want-1 != st.seen[len(st.seen)-1].ID {
		t.Fatalf("events printed up to %d, stream has %d", want-1, st.seen[len(st.seen)-1].ID)
	}
}

// GET /v1/approvals?status=pending is the reconcile list: the caller's
// tenant's parked calls with deadlines, paged by cursor.
func TestPendingApprovals(t *testing.T) {
	keyA, keyB := "key-a-pending-0123456789", "key-b-pending-0123456789"
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{keyA: {"ta", "operator", ""}, keyB: {"tb", "operator", ""}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	var ids []string
	for range 3 {
		conv, st := newConversation(t, base, keyA)
		send(t, base, keyA, conv, "pay")
		ids = append(ids, str(st.waitFor("confirmation_required", nil).Data, "tool_call_id"))
	}
	var got []string
	cursor := ""
	for page := 0; page < 3; page++ {
		status, m := call(t, http.MethodGet, base+"/v1/approvals?status=pending&limit=2&cursor="+cursor, keyA, "")
		if status != 200 {
			t.Fatalf("page %d: %d %v", page, status, m)
		}
		list, _ := m["approvals"].([]any)
		for _, x := range list {
			a, _ := x.(map[string]any)
			if a["status"] != "requires_confirmation" || str(a, "requires_approval_at") == "" || str(a, "arguments_sha256") == "" {
				t.Fatalf("approval %v", a)
			}
			got = append(got, str(a, "id"))
		}
		cursor = str(m, "next_cursor")
		if cursor == "" {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("pending %v, want %v", got, ids)
	}
	if _, m := call(t, http.MethodGet, base+"/v1/approvals?status=pending", keyB, ""); len(m["approvals"].([]any)) != 0 {
		t.Fatalf("tenant B sees %v", m["approvals"])
	}
	// Decided calls leave the list.
	call(t, http.MethodPost, base+"/v1/tool-calls/"+ids[0]+"/approval", keyA, `{"decision":"deny"}`)
	if _, m := call(t, http.MethodGet, base+"/v1/approvals", keyA, ""); len(m["approvals"].([]any)) != 2 {
		t.Fatalf("after a denial: %v", m["approvals"])
	}
	for _, q := range []string{"status=approved", "limit=0", "limit=101", "limit=x", "cursor=nope"} {
		if status, m := call(t, http.MethodGet, base+"/v1/approvals?"+q, keyA, ""); status != 400 || errCode(m) != "invalid" {
			t.Errorf("%s: %d %v", q, status, m)
		}
	}
}
