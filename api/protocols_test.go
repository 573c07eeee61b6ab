package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// frames are the data lines of an SSE body.
func frames(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(body, "\n") {
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

// runError is the RUN_ERROR frame of an AG-UI body (nil if none).
func runError(t *testing.T, body string) map[string]any {
	for _, f := range frames(t, body) {
		if f["type"] == "RUN_ERROR" {
			return f
		}
	}
	return nil
}

// Bad bodies get a clear 4xx before any stream starts, and reach nothing.
func TestProtocolBadBodies(t *testing.T) {
	keys := []testKey{{key: "k1", id: "k1", tenant: "t1", project: "p1", role: agentd.RoleClient}}
	s, fake := newFakeServer(t, keys, api.Config{MaxBodyBytes: 4096})
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"ag-ui malformed", "/v1/ag-ui", `{"threadId":"t","runId":`, 400, agentd.EINVALID},
		{"ag-ui not an object", "/v1/ag-ui", `[1,2]`, 400, agentd.EINVALID},
		{"ag-ui empty", "/v1/ag-ui", ``, 400, agentd.EINVALID},
		{"ag-ui threadId type", "/v1/ag-ui", `{"threadId":5,"runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui messages type", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":{}}`, 400, agentd.EINVALID},
		{"ag-ui resume type", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":1}]}`, 400, agentd.EINVALID},
		{"ag-ui no runId", "/v1/ag-ui", `{"threadId":"t","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui no threadId", "/v1/ag-ui", `{"runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui long threadId", "/v1/ag-ui", `{"threadId":"` + strings.Repeat("x", 300) + `","runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui duplicate key", "/v1/ag-ui", `{"threadId":"t","threadId":"u","runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui bad payload", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"c","status":"resolved","payload":{"approved":"yes"}}]}`, 400, agentd.EINVALID},
		{"ag-ui user content type", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":7}]}`, 400, agentd.EINVALID},
		{"ag-ui oversized", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, agentd.ETOOLARGE},
		{"ai-sdk malformed", "/v1/ai-sdk/chat", `{"id":`, 400, agentd.EINVALID},
		{"ai-sdk no id", "/v1/ai-sdk/chat", `{"messages":[]}`, 400, agentd.EINVALID},
		{"ai-sdk id type", "/v1/ai-sdk/chat", `{"id":["c"],"messages":[]}`, 400, agentd.EINVALID},
		{"ai-sdk regenerate", "/v1/ai-sdk/chat", `{"id":"c","trigger":"regenerate-message","messages":[]}`, 400, agentd.EINVALID},
		{"ai-sdk parts type", "/v1/ai-sdk/chat", `{"id":"c","messages":[{"id":"1","role":"user","parts":"hi"}]}`, 400, agentd.EINVALID},
		{"ai-sdk approval without approved", "/v1/ai-sdk/chat", `{"id":"c","messages":[{"id":"1","role":"assistant","parts":[{"type":"tool-pay","toolCallId":"c1","state":"approval-responded","approval":{"id":"c1"}}]}]}`, 400, agentd.EINVALID},
		{"ai-sdk oversized", "/v1/ai-sdk/chat", `{"id":"c","messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}]}]}`, 413, agentd.ETOOLARGE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fake.count()
			r := s.do("POST", tc.path, "k1", tc.body, nil)
			want(t, tc.name, r, tc.status, tc.code)
			if n := fake.count(); n != before {
				t.Errorf("a bad body reached the service (%d calls)", n-before)
			}
		})
	}
	// No key: 401, as everywhere.
	want(t, "no key", s.do("POST", "/v1/ag-ui", "", `{"threadId":"t","runId":"r","messages":[]}`, nil), 401, agentd.EUNAUTHORIZED)
}

// Another tenant's conversation named as the thread is a 404 that reads as
// a ghost's; an unknown interrupt is a RUN_ERROR and decides nothing.
func TestProtocolOtherTenantAndUnknownInterrupt(t *testing.T) {
	keys := []testKey{
		{key: "k1", id: "k1", tenant: "t1", project: "p1", role: agentd.RoleAdmin},
		{key: "k2", id: "k2", tenant: "t2", project: "p1", role: agentd.RoleAdmin},
	}
	s, fake := newFakeServer(t, keys, api.Config{})
	r := s.do("POST", "/v1/conversations", "k1", "", nil)
	var conv struct{ ID string }
	_ = json.Unmarshal([]byte(r.body), &conv)
	ghost := agentd.NewID(agentd.PrefixConversation)
	for _, path := range []string{"/v1/ag-ui", "/v1/ai-sdk/chat"} {
		body := func(thread string) string {
			if path == "/v1/ag-ui" {
				return fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":[{"id":"1","role":"user","content":"hi"}]}`, thread)
			}
			return fmt.Sprintf(`{"id":%q,"messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`, thread)
		}
		other := s.do("POST", path, "k2", body(conv.ID), nil)
		missing := s.do("POST", path, "k2", body(ghost), nil)
		want(t, path+" other tenant's conversation", other, http.StatusNotFound, agentd.ENOTFOUND)
		if other.body != missing.body {
			t.Errorf("%s: another tenant's conversation reads %s, a ghost %s", path, other.body, missing.body)
		}
	}
	for _, c := range fake.calls {
		if c.method == "Send" {
			t.Fatalf("a message reached another tenant's conversation: %+v", c)
		}
	}
	// The fake's calls belong to no conversation: the interrupt is unknown.
	r = s.do("POST", "/v1/ag-ui", "k1", fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":[],"resume":[{"interruptId":"call_x","status":"resolved","payload":{"approved":true}}]}`, conv.ID), nil)
	want(t, "unknown interrupt", r, http.StatusOK, "")
	if e := runError(t, r.body); e == nil || e["code"] != agentd.ENOTFOUND || !strings.Contains(e["message"].(string), "unknown interrupt") {
		t.Errorf("unknown interrupt: %s", r.body)
	}
	// The engine was asked to decide only a call of this thread.
	if c := fake.last(); c.method != "Decide" || c.req.(agentd.DecisionRequest).ConversationID != conv.ID {
		t.Errorf("the decision did not name the thread's conversation: %+v", c)
	}
	// A resume on a thread nobody has used: unknown interrupt, no conversation made.
	before := fake.count()
	r = s.do("POST", "/v1/ag-ui", "k1", `{"threadId":"never-used","runId":"r","messages":[],"resume":[{"interruptId":"call_x","status":"cancelled"}]}`, nil)
	if e := runError(t, r.body); e == nil || e["code"] != agentd.ENOTFOUND {
		t.Errorf("resume on a new thread: %s", r.body)
	}
	for _, c := range fake.calls[before:] {
		if c.method == "CreateConversation" {
			t.Errorf("a resume created a conversation")
		}
	}
}

// Over the real engine: two tenants, and two client keys of one tenant,
// using one thread id get their own conversations; a client key's interrupt
// is unknown to another client key and to another tenant, and stays
// pending; a delegate key may not decide.
func TestProtocolThreadsAreTenantScoped(t *testing.T) {
	s := newServer(t, roleKeys, api.Config{})
	run := func(key, thread string) response {
		return s.do("POST", "/v1/ag-ui", key, fmt.Sprintf(`{"threadId":%q,"runId":"r1","messages":[{"id":"1","role":"user","content":"pay"}]}`, thread), nil)
	}
	a, b := run("k-alice", "shared"), run("k-other", "shared")
	want(t, "alice", a, http.StatusOK, "")
	want(t, "other tenant", b, http.StatusOK, "")
	convA, convB := a.header.Get("X-Agentd-Conversation-Id"), b.header.Get("X-Agentd-Conversation-Id")
	if convA == "" || convA == convB {
		t.Fatalf("one thread id in two tenants: conversations %q and %q", convA, convB)
	}
	var callA string
	for _, f := range frames(t, a.body) {
		if f["type"] == "RUN_FINISHED" {
			callA = f["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)["id"].(string)
		}
	}
	if callA == "" {
		t.Fatalf("no interrupt: %s", a.body)
	}
	// Bob (same tenant, client key) naming "shared" gets his own thread, and
	// Alice's interrupt is unknown on it.
	bob := run("k-bob", "shared")
	want(t, "bob on his own shared", bob, http.StatusOK, "")
	if convBob := bob.header.Get("X-Agentd-Conversation-Id"); convBob == "" || convBob == convA || convBob == convB {
		t.Errorf("bob's shared is conversation %q (alice's %q, other tenant's %q)", convBob, convA, convB)
	}
	// Another tenant resuming Alice's interrupt on its own thread.
	resume := func(key, thread, decision string) response {
		return s.do("POST", "/v1/ag-ui", key, fmt.Sprintf(`{"threadId":%q,"runId":"r2","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":%s}]}`, thread, callA, decision), nil)
	}
	if e := runError(t, resume("k-other", "shared", `{"approved":true}`).body); e == nil || e["code"] != agentd.ENOTFOUND {
		t.Errorf("another tenant's resume: %v", e)
	}
	if e := runError(t, resume("k-bob", "shared", `{"approved":true}`).body); e == nil || e["code"] != agentd.ENOTFOUND {
		t.Errorf("another client key's resume: %v", e)
	}
	// A delegate key of the tenant, on the conversation itself: forbidden.
	if e := runError(t, resume("k-robot", convA, `{"approved":true}`).body); e == nil || e["code"] != agentd.ENOTFOUND && e["code"] != agentd.EFORBIDDEN {
		t.Errorf("delegate resume: %v", e)
	}
	// An edit where the card does not allow it is refused by the engine's rules.
	if e := runError(t, resume("k-alice", "shared", `{"approved":true,"editedArgs":{"amount":1}}`).body); e == nil || e["code"] != agentd.EINVALID {
		t.Errorf("edit without edit allowed: %v", e)
	}
	// A digest the call does not have: stale.
	if e := runError(t, resume("k-alice", "shared", fmt.Sprintf(`{"approved":true,"argumentsSha256":%q}`, strings.Repeat("0", 64))).body); e == nil || e["code"] != agentd.ESTALE {
		t.Errorf("stale digest: %v", e)
	}
	if c := s.toolCall("k-alice", callA); c.Status != agentd.StatusRequiresConfirmation || s.tool.count() != 0 {
		t.Fatalf("after refused resumes: %s, %d runs", c.Status, s.tool.count())
	}
	// The operator approves it over the AI SDK endpoint, naming the conversation.
	body := fmt.Sprintf(`{"id":%q,"messages":[{"id":"m","role":"assistant","parts":[{"type":"tool-pay","toolCallId":%q,"state":"approval-responded","input":{},"approval":{"id":%q,"approved":true}}]}]}`, convA, callA, callA)
	r := s.do("POST", "/v1/ai-sdk/chat", "k-op", body, nil)
	want(t, "operator approval", r, http.StatusOK, "")
	if r.header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Errorf("AI SDK stream: %v %q", r.header, r.body)
	}
	var types []string
	for _, f := range frames(t, r.body) {
		types = append(types, f["type"].(string))
	}
	if got := strings.Join(types, " "); got != "start tool-output-available text-start text-delta text-end finish" {
		t.Errorf("chunks: %s", got)
	}
	if s.tool.count() != 1 {
		t.Fatalf("pay ran %d times", s.tool.count())
	}
}

// Issue 17 finding 4: a protocol request's decisions are checked first and
// applied all or nothing: a request that also names an unknown call, or
// answers one call twice, decides nothing. Payload keys match exactly.
func TestProtocolMixedDecisionsApplyNothing(t *testing.T) {
	s := newServer(t, roleKeys, api.Config{})
	conv := s.createConversation("k-alice")
	call, _ := s.parkedCall("k-alice", conv)
	ghost := agentd.NewID(agentd.PrefixToolCall)
	resume := func(entries string) response {
		return s.do("POST", "/v1/ag-ui", "k-alice", fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":[],"resume":%s}`, conv, entries), nil)
	}
	approveEntry := func(id string) string {
		return fmt.Sprintf(`{"interruptId":%q,"status":"resolved","payload":{"approved":true}}`, id)
	}
	if e := runError(t, resume("["+approveEntry(call)+","+approveEntry(ghost)+"]").body); e == nil || e["code"] != agentd.ENOTFOUND {
		t.Errorf("AG-UI [call, unknown]: %v", e)
	}
	if e := runError(t, resume("["+approveEntry(call)+","+approveEntry(call+".2")+"]").body); e == nil || e["code"] != agentd.EINVALID {
		t.Errorf("AG-UI [call, call.2]: %v", e)
	}
	want(t, "AG-UI APPROVED", resume(fmt.Sprintf(`[{"interruptId":%q,"status":"resolved","payload":{"APPROVED":true}}]`, call)), http.StatusBadRequest, agentd.EINVALID)
	part := func(approved bool) string {
		return fmt.Sprintf(`{"type":"tool-pay","toolCallId":%q,"state":"approval-responded","input":{},"approval":{"id":%q,"approved":%v}}`, call, call, approved)
	}
	aisdk := func(parts ...string) response {
		return s.do("POST", "/v1/ai-sdk/chat", "k-alice", fmt.Sprintf(`{"id":%q,"messages":[{"id":"m","role":"assistant","parts":[%s]}]}`, conv, strings.Join(parts, ",")), nil)
	}
	want(t, "AI SDK [approve, deny]", aisdk(part(true), part(false)), http.StatusBadRequest, agentd.EINVALID)
	want(t, "AI SDK Approved", aisdk(strings.Replace(part(true), `"approved"`, `"Approved"`, 1)), http.StatusBadRequest, agentd.EINVALID)
	// A key twice after a nested value is refused on the native door too.
	r := s.do("POST", "/v1/tool-calls/"+call+"/approval", "k-alice", `{"decision":"deny","arguments":{"amount":1},"decision":"approve"}`, nil)
	want(t, "a key twice after a nested object", r, http.StatusBadRequest, agentd.EINVALID)
	r = s.do("POST", "/v1/approvals", "k-alice", fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":true}],"approvals":[]}`, call), nil)
	want(t, "a key twice after a nested array", r, http.StatusBadRequest, agentd.EINVALID)
	if c := s.toolCall("k-alice", call); c.Status != agentd.StatusRequiresConfirmation || len(c.Decisions) != 0 || s.tool.count() != 0 {
		t.Fatalf("after refused requests: %s, %d decisions, %d runs", c.Status, len(c.Decisions), s.tool.count())
	}
	// Distinct keys after nested values are read: the denial applies.
	r = s.do("POST", "/v1/approvals", "k-alice", fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":false,"reason":"no"}],"atomic":true}`, call), nil)
	want(t, "distinct keys after a nested array", r, http.StatusOK, "")
	if c := s.toolCall("k-alice", call); c.Status != agentd.StatusDenied || s.tool.count() != 0 {
		t.Fatalf("after the denial: %s, %d runs", c.Status, s.tool.count())
	}
}
