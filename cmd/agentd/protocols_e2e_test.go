package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/jstest"
)

// These tests drive the real server (run()) with the chat SDKs' own client
// code from npm: @ag-ui/client's HttpAgent and the AI SDK's chat client
// (protocol/testdata/js). The scripts validate every frame with the SDKs'
// schemas and report any field a schema does not name.

const jsDir = "protocol/testdata/js"

// jsRun runs one script of jsDir against base and returns its JSON lines.
func jsRun(t *testing.T, base, key, script string, args ...string) []json.RawMessage {
	t.Helper()
	node, dir := jstest.Node(t), jstest.Packages(t, jsDir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "AGENTD_URL="+base, "AGENTD_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %v: %v\nstdout: %s\nstderr: %s", script, args, err, stdout.String(), stderr.String())
	}
	var out []json.RawMessage
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		out = append(out, json.RawMessage(l))
	}
	return out
}

// aguiRun is one HttpAgent run as agui.mjs reports it.
type aguiRun struct {
	Status       int              `json:"status"`
	Conversation string           `json:"conversation"`
	Frames       []map[string]any `json:"frames"`
	Problems     []string         `json:"problems"`
	Error        string           `json:"error"`
	Interrupts   []struct {
		ID         string `json:"id"`
		ToolCallID string `json:"toolCallId"`
		ExpiresAt  string `json:"expiresAt"`
		Reason     string `json:"reason"`
	} `json:"interrupts"`
	Fatal string `json:"fatal"`
}

func aguiRuns(t *testing.T, lines []json.RawMessage) []aguiRun {
	t.Helper()
	runs := make([]aguiRun, len(lines))
	for i, l := range lines {
		must(t, json.Unmarshal(l, &runs[i]))
		if runs[i].Fatal != "" {
			t.Fatalf("agui.mjs: %s", runs[i].Fatal)
		}
		if len(runs[i].Problems) > 0 {
			t.Errorf("run %d: frames the @ag-ui/core schemas refuse: %v", i, runs[i].Problems)
		}
	}
	return runs
}

// types are the frame types of a run, in order.
func (r aguiRun) types() string {
	var ts []string
	for _, f := range r.Frames {
		ts = append(ts, f["type"].(string))
	}
	return strings.Join(ts, " ")
}

// frame returns the first frame of type typ that has every field of match.
func (r aguiRun) frame(typ string, match map[string]any) map[string]any {
	for _, f := range r.Frames {
		if f["type"] != typ {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && f[k] == v
		}
		if ok {
			return f
		}
	}
	return nil
}

func (r aguiRun) text() string {
	var b strings.Builder
	for _, f := range r.Frames {
		if f["type"] == "TEXT_MESSAGE_CONTENT" {
			b.WriteString(f["delta"].(string))
		}
	}
	return b.String()
}

// protocolServer starts the real server on a test project (skipping, or
// failing under scripts/test.sh, without the SDKs).
func protocolServer(t *testing.T, o projectOpts) (base, execLog string) {
	t.Helper()
	jstest.Node(t)
	jstest.Packages(t, jsDir)
	dir, execLog := writeProject(t, o)
	base, _ = startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	return base, execLog
}

// getCall reads a tool call through the native API.
func getCall(t *testing.T, base, key, id string) map[string]any {
	t.Helper()
	status, c := call(t, http.MethodGet, base+"/v1/tool-calls/"+id, key, "")
	if status != http.StatusOK {
		t.Fatalf("GET tool call %s: %d %v", id, status, c)
	}
	return c
}

// Acceptance 1 and 5: message → TOOL_CALL_START/ARGS/END → RUN_FINISHED with
// one interrupt (expiresAt = the native deadline) → resume approved →
// TOOL_CALL_RESULT for the same toolCallId, the tool ran once → text →
// RUN_FINISHED success; a replayed resume changes nothing.
func TestAGUIApprove(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})
	runs := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "flow", "thread-approve", "pay the invoice", `{"approved":true}`))
	first, second := runs[0], runs[1]
	if first.Error != "" || second.Error != "" {
		t.Fatalf("runs failed: %q / %q", first.Error, second.Error)
	}
	if got := first.types(); !strings.HasPrefix(got, "RUN_STARTED TEXT_MESSAGE_START") || !strings.HasSuffix(got, "TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED") {
		t.Fatalf("first run frames: %s", got)
	}
	if len(first.Interrupts) != 1 {
		t.Fatalf("interrupts: %+v", first.Interrupts)
	}
	in := first.Interrupts[0]
	start := first.frame("TOOL_CALL_START", nil)
	if in.ID != start["toolCallId"] || in.ToolCallID != in.ID || in.Reason != "tool_call" {
		t.Errorf("interrupt %+v does not name the call %v", in, start)
	}
	if args := first.frame("TOOL_CALL_ARGS", nil); args["delta"] != `{"amount":5}` {
		t.Errorf("TOOL_CALL_ARGS = %v", args)
	}
	native := getCall(t, base, "", in.ID)
	if native["requires_approval_at"] != in.ExpiresAt || native["status"] != "approved" && native["status"] != "completed" {
		t.Errorf("expiresAt %q, native call %v", in.ExpiresAt, native)
	}
	if got := second.types(); !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT TEXT_MESSAGE_START") || !strings.HasSuffix(got, "TEXT_MESSAGE_END RUN_FINISHED") || strings.Contains(got, "TOOL_CALL_START") {
		t.Fatalf("resumed run frames: %s", got)
	}
	res := second.frame("TOOL_CALL_RESULT", map[string]any{"toolCallId": in.ID})
	if res == nil || !strings.Contains(res["content"].(string), `"paid":true`) {
		t.Errorf("TOOL_CALL_RESULT = %v", res)
	}
	if fin := second.frame("RUN_FINISHED", nil); fin["outcome"].(map[string]any)["type"] != "success" {
		t.Errorf("RUN_FINISHED = %v", fin)
	}
	if !strings.HasPrefix(second.text(), "paid: ") {
		t.Errorf("text after the approval = %q", second.text())
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}

	// A replayed resume changes nothing: no second execution, no error.
	replay := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "resume", "thread-approve", fmt.Sprintf(`[{"id":%q,"approved":true}]`, in.ID)))[0]
	if replay.Error != "" || replay.types() != "RUN_STARTED RUN_FINISHED" {
		t.Errorf("replayed resume: %s (%s)", replay.types(), replay.Error)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times after the replay, want 1", n)
	}
	// A resume that contradicts the decision is a RUN_ERROR.
	deny := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "resume", "thread-approve", fmt.Sprintf(`[{"id":%q,"approved":false}]`, in.ID)))[0]
	if fr := deny.frame("RUN_ERROR", nil); fr == nil || fr["code"] != "conflict" {
		t.Errorf("contradicting resume: %s %v", deny.types(), fr)
	}
}

// The deny path tells the model the reason; an unknown interrupt and new
// input while interrupts are open are RUN_ERRORs with clear codes.
func TestAGUIDenyAndErrors(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})
	runs := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "flow", "thread-deny", "pay the invoice", `{"approved":false,"reason":"not this month"}`))
	second := runs[1]
	id := runs[0].Interrupts[0].ID
	res := second.frame("TOOL_CALL_RESULT", map[string]any{"toolCallId": id})
	if res == nil || !strings.Contains(res["content"].(string), "not this month") {
		t.Errorf("TOOL_CALL_RESULT of the denied call = %v (%s)", res, second.types())
	}
	if got := second.text(); got != "not paid, reason: not this month" {
		t.Errorf("the model heard %q", got)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times after a denial", n)
	}

	// Park a call, then send a new message on the thread: run_active.
	parked := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "run", "thread-busy", "pay the invoice"))[0]
	if len(parked.Interrupts) != 1 {
		t.Fatalf("no interrupt: %s", parked.types())
	}
	busy := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "run", "thread-busy", "pay again"))[0]
	if fr := busy.frame("RUN_ERROR", nil); fr == nil || fr["code"] != "run_active" || !strings.Contains(fr["message"].(string), parked.Interrupts[0].ID) {
		t.Errorf("new input while an interrupt is open: %s %v", busy.types(), fr)
	}
	// An interrupt that is not of this thread.
	unknown := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "resume", "thread-deny", fmt.Sprintf(`[{"id":%q,"approved":true}]`, parked.Interrupts[0].ID)))[0]
	if fr := unknown.frame("RUN_ERROR", nil); fr == nil || fr["code"] != "not_found" {
		t.Errorf("resume of another thread's interrupt: %s %v", unknown.types(), fr)
	}
	if c := getCall(t, base, "", parked.Interrupts[0].ID); c["status"] != "requires_confirmation" {
		t.Errorf("the other thread's call changed: %v", c["status"])
	}
}

// An expired interrupt's resume is a RUN_ERROR with code expired, and the
// tool never runs.
func TestAGUIExpiredResume(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{approvalTimeout: "1s"})
	parked := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "run", "thread-expire", "pay the invoice"))[0]
	id := parked.Interrupts[0].ID
	deadline := time.Now().Add(waitLimit)
	for getCall(t, base, "", id)["status"] != "expired" {
		if time.Now().After(deadline) {
			t.Fatal("the call did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A fresh client (its own expiry check would refuse to send): the
	// server is the judge.
	late := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "resume", "thread-expire", fmt.Sprintf(`[{"id":%q,"approved":true}]`, id)))[0]
	if fr := late.frame("RUN_ERROR", nil); fr == nil || fr["code"] != "expired" {
		t.Errorf("expired resume: %s %v", late.types(), fr)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times after expiry", n)
	}
}

// aisdkResult is what aisdk.mjs reports.
type aisdkResult struct {
	Requests []struct {
		Status       int              `json:"status"`
		Stream       string           `json:"stream"`
		Conversation string           `json:"conversation"`
		Frames       []map[string]any `json:"frames"`
		Problems     []string         `json:"problems"`
		Last         string           `json:"last"`
	} `json:"requests"`
	Messages []struct {
		ID    string           `json:"id"`
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	} `json:"messages"`
	Error string `json:"error"`
	Fatal string `json:"fatal"`
}

func aisdkRun(t *testing.T, base, key string, args ...string) aisdkResult {
	t.Helper()
	var r aisdkResult
	must(t, json.Unmarshal(jsRun(t, base, key, "aisdk.mjs", args...)[0], &r))
	if r.Fatal != "" {
		t.Fatalf("aisdk.mjs: %s", r.Fatal)
	}
	for i, q := range r.Requests {
		if len(q.Problems) > 0 {
			t.Errorf("request %d: chunks the SDK's schema refuses: %v", i, q.Problems)
		}
		if q.Status == http.StatusOK && (q.Last != "[DONE]" || q.Stream != "v1") {
			t.Errorf("request %d: last frame %q, x-vercel-ai-ui-message-stream %q", i, q.Last, q.Stream)
		}
	}
	return r
}

func chunkTypes(frames []map[string]any) string {
	var ts []string
	for _, f := range frames {
		ts = append(ts, f["type"].(string))
	}
	return strings.Join(ts, " ")
}

// Acceptance 2: the approval round trip through the AI SDK's chat client;
// the continuation's start.messageId is the first response's; approved →
// tool-output-available (the tool ran once), denied → tool-output-denied and
// the model's reply.
func TestAISDKApproval(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})
	for _, tc := range []struct {
		name, decision, output, reply string
		runs                          int
	}{
		{"approve", `{"approved":true}`, "tool-output-available", "paid: ", 1},
		{"deny", `{"approved":false,"reason":"too much"}`, "tool-output-denied", "not paid, reason: too much", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := aisdkRun(t, base, "", "chat", "chat-"+tc.name, "pay the invoice", tc.decision)
			if r.Error != "" || len(r.Requests) != 2 {
				t.Fatalf("chat: error %q, %d requests", r.Error, len(r.Requests))
			}
			first, second := r.Requests[0].Frames, r.Requests[1].Frames
			if got := chunkTypes(first); !strings.HasSuffix(got, "tool-input-start tool-input-available tool-approval-request finish-step finish") {
				t.Fatalf("first response: %s", got)
			}
			req := first[len(first)-3]
			if req["approvalId"] != req["toolCallId"] {
				t.Errorf("tool-approval-request = %v", req)
			}
			if first[0]["messageId"] == nil || second[0]["type"] != "start" || second[0]["messageId"] != first[0]["messageId"] {
				t.Errorf("start of the continuation %v, of the first response %v", second[0], first[0])
			}
			out := second[1]
			if out["type"] != tc.output || out["toolCallId"] != req["toolCallId"] {
				t.Errorf("continuation: %s", chunkTypes(second))
			}
			msgs := r.Messages
			last := msgs[len(msgs)-1]
			if len(msgs) != 2 || last.ID != first[0]["messageId"] {
				t.Fatalf("messages: %+v", msgs)
			}
			text := last.Parts[len(last.Parts)-1]["text"]
			if s, _ := text.(string); !strings.HasPrefix(s, tc.reply) {
				t.Errorf("the model's reply %q, want %q", text, tc.reply)
			}
			if n := execCount(t, execLog, "pay"); tc.name == "approve" && n != tc.runs {
				t.Fatalf("pay ran %d times, want %d", n, tc.runs)
			}
		})
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times in all, want 1 (the approved one)", n)
	}
}

// A repeated approval response (the SDK re-sending the history with the
// part still approval-responded) changes nothing: the tool does not run
// again and the stream just closes the message.
func TestAISDKRepeatedApproval(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})
	r := aisdkRun(t, base, "", "chat", "chat-repeat", "pay the invoice", `{"approved":true}`)
	last := r.Messages[len(r.Messages)-1]
	var part map[string]any
	for _, p := range last.Parts {
		if p["toolCallId"] != nil {
			part = p
		}
	}
	part["state"] = "approval-responded"
	part["approval"] = map[string]any{"id": part["toolCallId"], "approved": true}
	delete(part, "output")
	body, err := json.Marshal(map[string]any{"messages": []any{map[string]any{"id": last.ID, "role": "assistant", "parts": []any{part}}}})
	must(t, err)
	again := aisdkRun(t, base, "", "raw", "chat-repeat", string(body))
	if again.Error != "" || chunkTypes(again.Requests[0].Frames) != "start finish" {
		t.Errorf("repeated approval: %s (%s)", chunkTypes(again.Requests[0].Frames), again.Error)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
}

// Acceptance 3: parallel calls, one auto and one parked, in both protocols:
// the auto call is announced and gets its result in the first response, the
// parked one is the only interrupt / approval request, and after the
// approval each tool has run once.
func TestProtocolsParallelCalls(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})
	t.Run("ag-ui", func(t *testing.T) {
		runs := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "flow", "thread-both", "both please", `{"approved":true}`))
		first, second := runs[0], runs[1]
		if len(first.Interrupts) != 1 {
			t.Fatalf("interrupts %+v (%s)", first.Interrupts, first.types())
		}
		parked := first.Interrupts[0].ID
		var auto string
		for _, f := range first.Frames {
			if f["type"] == "TOOL_CALL_START" && f["toolCallId"] != parked {
				auto = f["toolCallId"].(string)
			}
		}
		if auto == "" || first.frame("TOOL_CALL_START", map[string]any{"toolCallId": parked}) == nil ||
			first.frame("TOOL_CALL_RESULT", map[string]any{"toolCallId": auto}) == nil || first.frame("TOOL_CALL_RESULT", map[string]any{"toolCallId": parked}) != nil {
			t.Fatalf("first run: %s", first.types())
		}
		if second.frame("TOOL_CALL_RESULT", map[string]any{"toolCallId": parked}) == nil || second.frame("TOOL_CALL_START", nil) != nil {
			t.Fatalf("resumed run: %s", second.types())
		}
	})
	t.Run("ai-sdk", func(t *testing.T) {
		r := aisdkRun(t, base, "", "chat", "chat-both", "both please", `{"approved":true}`)
		first := r.Requests[0].Frames
		var approvals, outputs int
		for _, f := range first {
			switch f["type"] {
			case "tool-approval-request":
				approvals++
			case "tool-output-available":
				outputs++
			}
		}
		if approvals != 1 || outputs != 1 || len(r.Requests) != 2 {
			t.Fatalf("first response: %s (%d requests)", chunkTypes(first), len(r.Requests))
		}
		last := r.Messages[len(r.Messages)-1]
		states := map[string]int{}
		for _, p := range last.Parts {
			if s, ok := p["state"].(string); ok && p["toolCallId"] != nil {
				states[s]++
			}
		}
		if states["output-available"] != 2 {
			t.Errorf("tool parts at the end: %v", states)
		}
	})
	if p, r := execCount(t, execLog, "pay"), execCount(t, execLog, "record"); p != 2 || r != 2 {
		t.Fatalf("pay ran %d times, record %d times, want 2 each (one per protocol)", p, r)
	}
}

// Acceptance 4: a conversation started over AG-UI is watched and approved
// through the native API; one started natively is approved over AG-UI and
// the AI SDK (its conversation id as the thread id).
func TestProtocolsAndNativeAPI(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})

	parked := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "run", "thread-native", "pay the invoice"))[0]
	conv := parked.Conversation
	if conv == "" || len(parked.Interrupts) != 1 {
		t.Fatalf("no conversation header or interrupt: %q %s", conv, parked.types())
	}
	st := openStream(t, base, "", conv, 0)
	defer st.close()
	req := st.waitFor("confirmation_required", nil)
	if str(req.Data, "tool_call_id") != parked.Interrupts[0].ID || str(req.Data, "requires_approval_at") != parked.Interrupts[0].ExpiresAt {
		t.Fatalf("native card %v, interrupt %+v", req.Data, parked.Interrupts[0])
	}
	status, d := call(t, http.MethodPost, base+"/v1/tool-calls/"+parked.Interrupts[0].ID+"/approval", "", `{"decision":"approve"}`)
	if status != http.StatusOK {
		t.Fatalf("native approval: %d %v", status, d)
	}
	st.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times", n)
	}
	// The AG-UI client's late resume, the same decision, changes nothing.
	late := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "resume", "thread-native", fmt.Sprintf(`[{"id":%q,"approved":true}]`, parked.Interrupts[0].ID)))[0]
	if late.Error != "" || late.types() != "RUN_STARTED RUN_FINISHED" {
		t.Errorf("late resume: %s %s", late.types(), late.Error)
	}

	// Vice versa: started natively, approved over AG-UI.
	conv2, st2 := newConversation(t, base, "")
	defer st2.close()
	send(t, base, "", conv2, "pay the invoice")
	callID := str(st2.waitFor("confirmation_required", nil).Data, "tool_call_id")
	resumed := aguiRuns(t, jsRun(t, base, "", "agui.mjs", "resume", conv2, fmt.Sprintf(`[{"id":%q,"approved":true}]`, callID)))[0]
	if resumed.frame("TOOL_CALL_RESULT", map[string]any{"toolCallId": callID}) == nil {
		t.Fatalf("AG-UI resume of a native conversation: %s %s", resumed.types(), resumed.Error)
	}
	st2.waitFor("run_finished", nil)

	// And over the AI SDK: started natively, approved with the SDK's body.
	conv3, st3 := newConversation(t, base, "")
	defer st3.close()
	send(t, base, "", conv3, "pay the invoice")
	callID = str(st3.waitFor("confirmation_required", nil).Data, "tool_call_id")
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"id": "m1", "role": "assistant", "parts": []any{
		map[string]any{"type": "tool-pay", "toolCallId": callID, "state": "approval-responded", "input": map[string]any{"amount": 5},
			"approval": map[string]any{"id": callID, "approved": false, "reason": "from the SDK"}}}}}})
	r := aisdkRun(t, base, "", "raw", conv3, string(body))
	if got := chunkTypes(r.Requests[0].Frames); !strings.HasPrefix(got, "start tool-output-denied start-step text-start") {
		t.Fatalf("AI SDK decision on a native conversation: %s (%s)", got, r.Error)
	}
	res := st3.waitFor("confirmation_resolved", nil)
	if str(res.Data, "decision") != "denied" || str(res.Data, "reason") != "from the SDK" {
		t.Errorf("native stream: %v", res.Data)
	}
	if n := execCount(t, execLog, "pay"); n != 2 {
		t.Fatalf("pay ran %d times, want 2", n)
	}
}

// A client that goes away mid-stream does not cancel the run: the native
// stream sees it finish, and the thread's next request sees the state.
func TestProtocolsDisconnect(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{})
	for _, tc := range []struct{ path, body string }{
		{"/v1/ag-ui", `{"threadId":"t-gone","runId":"r1","messages":[{"id":"u1","role":"user","content":"both please"}]}`},
		{"/v1/ai-sdk/chat", `{"id":"c-gone","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"both please"}]}]}`},
	} {
		req, err := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(tc.body))
		must(t, err)
		resp, err := streamClient.Do(req)
		must(t, err)
		conv := resp.Header.Get("X-Agentd-Conversation-Id")
		buf := make([]byte, 16)
		_, _ = resp.Body.Read(buf) // the stream has started
		resp.Body.Close()
		st := openStream(t, base, "", conv, 0)
		st.waitFor("run_waiting", nil)
		if !hasEvent(st, "tool_call_result") { // the auto call may end before or after the run waits
			st.waitFor("tool_call_result", nil)
		}
		st.close()
	}
	if n := execCount(t, execLog, "record"); n != 2 {
		t.Fatalf("record ran %d times, want 2", n)
	}
}

// An approval response after the deadline: the SDK's tool part shows the
// error (tool-output-error), the call never runs.
func TestAISDKExpiredApproval(t *testing.T) {
	base, execLog := protocolServer(t, projectOpts{approvalTimeout: "1s"})
	r := aisdkRun(t, base, "", "chat", "chat-expire", "pay the invoice")
	first := r.Requests[0].Frames
	callID, _ := first[len(first)-3]["toolCallId"].(string)
	deadline := time.Now().Add(waitLimit)
	for getCall(t, base, "", callID)["status"] != "expired" {
		if time.Now().After(deadline) {
			t.Fatal("the call did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"id": first[0]["messageId"], "role": "assistant", "parts": []any{
		map[string]any{"type": "tool-pay", "toolCallId": callID, "state": "approval-responded", "input": map[string]any{"amount": 5},
			"approval": map[string]any{"id": callID, "approved": true}}}}}})
	late := aisdkRun(t, base, "", "raw", "chat-expire", string(body))
	frames := late.Requests[0].Frames
	if len(frames) < 2 || frames[1]["type"] != "tool-output-error" || !strings.Contains(frames[1]["errorText"].(string), "deadline") {
		t.Fatalf("late approval: %s (%v)", chunkTypes(frames), frames)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times after expiry", n)
	}
}

// The encoders' golden files, which hold every kind of frame they write
// (each outcome, interrupts, errors), pass the SDKs' own schemas with no
// field the schemas do not name.
func TestGoldenMatchesSDK(t *testing.T) {
	jstest.Node(t)
	root := jstest.Root(t)
	for script, file := range map[string]string{
		"agui.mjs":  filepath.Join(root, "protocol", "agui", "testdata", "frames.jsonl"),
		"aisdk.mjs": filepath.Join(root, "protocol", "aisdk", "testdata", "chunks.jsonl"),
	} {
		var r struct {
			Frames   int      `json:"frames"`
			Problems []string `json:"problems"`
		}
		must(t, json.Unmarshal(jsRun(t, "http://unused", "", script, "validate", "-", file)[0], &r))
		if r.Frames < 20 || len(r.Problems) > 0 {
			t.Errorf("%s: %d frames, problems: %v", filepath.Base(file), r.Frames, r.Problems)
		}
	}
}
