package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// These flows test the engine's rules through the HTTP API (who reaches
// what, digests, batches, the audit log, the protocols' threads), over
// run() with the SQLite store; the API's handlers alone are tested in api
// against fakes.

// flowRules: a message "pay…" makes one call of the confirm-tier tool pay
// with {"amount":5}; its result is answered with one word.
const flowRules = `[
 {"when":{"user":"(?i)^pay"},"reply":{"tool_calls":[{"name":"pay","arguments":{"amount":5}}]}},
 {"when":{"tool_result":"pay"},"reply":{"text":"paid"}}
]`

// testKey is one API key of a flow server: the key itself and its config.
type testKey struct {
	key                       string
	id, tenant, project, role string
}

var roleKeys = []testKey{
	{key: "k-alice", id: "alice", tenant: "t1", project: "p1", role: agentd.RoleClient},
	{key: "k-bob", id: "bob", tenant: "t1", project: "p1", role: agentd.RoleClient},
	{key: "k-robot", id: "robot", tenant: "t1", project: "p1", role: agentd.RoleDelegate},
	{key: "k-op", id: "op", tenant: "t1", project: "p1", role: agentd.RoleOperator},
	{key: "k-admin", id: "admin", tenant: "t1", project: "p1", role: agentd.RoleAdmin},
	{key: "k-other", id: "other", tenant: "t2", project: "p1", role: agentd.RoleAdmin},
}

// flowServer is run() serving a test project (writeProject's tools, the
// flowRules model) with its keys.
type flowServer struct {
	t    *testing.T
	url  string
	tool execLog
}

// execLog counts the executions of the tool pay in a project's execution log.
type execLog struct {
	t    *testing.T
	path string
}

func (l execLog) count() int { return execCount(l.t, l.path, "pay") }

// newFlowServer starts run() on loopback over a new project with keys
// (none: dev mode).
func newFlowServer(t *testing.T, keys []testKey) *flowServer {
	t.Helper()
	dir, log := writeProject(t, projectOpts{})
	agent := fmt.Sprintf(`{"name":"test","system_prompt":"You are a test agent.","model":{"provider":"script","script":{"rules":%s}},"max_turns":10}`, flowRules)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	if len(keys) > 0 {
		var ks []map[string]string
		for _, k := range keys {
			sum := sha256.Sum256([]byte(k.key))
			ks = append(ks, map[string]string{"id": k.id, "sha256": hex.EncodeToString(sum[:]), "tenant_id": k.tenant, "project_id": k.project, "role": k.role})
		}
		b, err := json.Marshal(map[string]any{"api_keys": ks})
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	}
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": log})
	return &flowServer{t: t, url: base, tool: execLog{t: t, path: log}}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   string
}

// errorCode returns the code of an error body ("" if it is not one).
func (r response) errorCode() string {
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(r.body), &b)
	return b.Error.Code
}

// do sends one request; header holds extra headers.
func (s *flowServer) do(method, path, key, body string, header map[string]string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// want fails the test unless r has the status (and, if code is set, that error code).
func want(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.errorCode() != code) {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
}

// createConversation creates a conversation with key and returns its id.
func (s *flowServer) createConversation(key string) string {
	s.t.Helper()
	r := s.do("POST", "/v1/conversations", key, "", nil)
	want(s.t, "create conversation", r, http.StatusCreated, "")
	var c struct{ ID string }
	if err := json.Unmarshal([]byte(r.body), &c); err != nil || c.ID == "" {
		s.t.Fatalf("create conversation: %s", r.body)
	}
	return c.ID
}

// parkedCall sends a message on conv and returns the parked call's id and
// run id, waiting for it through GET /v1/conversations/{id}.
func (s *flowServer) parkedCall(key, conv string) (callID, runID string) {
	s.t.Helper()
	r := s.do("POST", "/v1/conversations/"+conv+"/messages", key, `{"content":"pay"}`, nil)
	want(s.t, "send", r, http.StatusAccepted, "")
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		r := s.do("GET", "/v1/conversations/"+conv, key, "", nil)
		var v struct {
			ToolCalls []agentd.ToolCall `json:"tool_calls"`
		}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			s.t.Fatalf("conversation: %s", r.body)
		}
		for _, c := range v.ToolCalls {
			if c.Status == agentd.StatusRequiresConfirmation {
				return c.ID, c.RunID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatal("no parked call")
	return "", ""
}

// toolCall returns the call as key sees it.
func (s *flowServer) toolCall(key, id string) agentd.ToolCall {
	s.t.Helper()
	r := s.do("GET", "/v1/tool-calls/"+id, key, "", nil)
	want(s.t, "get tool call", r, http.StatusOK, "")
	var c agentd.ToolCall
	if err := json.Unmarshal([]byte(r.body), &c); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// approvalIDs lists the pending approvals key sees.
func (s *flowServer) approvalIDs(key string) []string {
	s.t.Helper()
	r := s.do("GET", "/v1/approvals?status=pending", key, "", nil)
	want(s.t, "approvals", r, http.StatusOK, "")
	var v struct{ Approvals []agentd.ToolCall }
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		s.t.Fatal(err)
	}
	var ids []string
	for _, c := range v.Approvals {
		ids = append(ids, c.ID)
	}
	return ids
}

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

// TestRolesWithinTenant: a client key reaches only the conversations it
// created, on every route, and gets the same 404 as for an id that exists
// nowhere; a delegate never decides; operators and admins reach all.
func TestRolesWithinTenant(t *testing.T) {
	s := newFlowServer(t, roleKeys)
	conv := s.createConversation("k-alice")
	call, run := s.parkedCall("k-alice", conv)

	ghostConv, ghostRun, ghostCall := "conv_01a23125-0000-7000-8000-00000000dead", "run_01a23125-0000-7000-8000-00000000dead", "call_01a23125-0000-7000-8000-00000000dead"
	routes := []struct{ method, path, ghost, body string }{
		{"GET", "/v1/conversations/" + conv, "/v1/conversations/" + ghostConv, ""},
		{"GET", "/v1/conversations/" + conv + "/events", "/v1/conversations/" + ghostConv + "/events", ""},
		{"POST", "/v1/conversations/" + conv + "/messages", "/v1/conversations/" + ghostConv + "/messages", `{"content":"hi"}`},
		{"GET", "/v1/runs/" + run, "/v1/runs/" + ghostRun, ""},
		{"POST", "/v1/runs/" + run + "/cancel", "/v1/runs/" + ghostRun + "/cancel", ""},
		{"GET", "/v1/tool-calls/" + call, "/v1/tool-calls/" + ghostCall, ""},
		{"POST", "/v1/tool-calls/" + call + "/approval", "/v1/tool-calls/" + ghostCall + "/approval", `{"decision":"deny"}`},
	}
	for _, key := range []string{"k-bob", "k-other", "k-robot"} {
		for _, rt := range routes {
			if key == "k-robot" && strings.HasSuffix(rt.path, "/approval") {
				continue // a delegate is refused before the call is looked up (below)
			}
			got := s.do(rt.method, rt.path, key, rt.body, nil)
			ghost := s.do(rt.method, rt.ghost, key, rt.body, nil)
			want(t, key+" "+rt.method+" "+rt.path, got, http.StatusNotFound, agentd.ENOTFOUND)
			if got.body != ghost.body {
				t.Errorf("%s %s: the 404 for another's object %s differs from the one for no object %s", key, rt.path, got.body, ghost.body)
			}
		}
		if ids := s.approvalIDs(key); len(ids) != 0 {
			t.Errorf("%s lists alice's approvals: %v", key, ids)
		}
	}
	if ids := s.approvalIDs("k-alice"); len(ids) != 1 || ids[0] != call {
		t.Fatalf("alice's approvals = %v, want [%s]", ids, call)
	}
	for _, key := range []string{"k-op", "k-admin"} {
		if ids := s.approvalIDs(key); len(ids) != 1 || ids[0] != call {
			t.Fatalf("%s's approvals = %v, want [%s]", key, ids, call)
		}
		want(t, key+" reads alice's conversation", s.do("GET", "/v1/conversations/"+conv, key, "", nil), http.StatusOK, "")
	}

	// A delegate never decides, not even on its own conversation's calls.
	robotConv := s.createConversation("k-robot")
	robotCall, _ := s.parkedCall("k-robot", robotConv)
	for _, id := range []string{robotCall, call} {
		want(t, "delegate decides", s.do("POST", "/v1/tool-calls/"+id+"/approval", "k-robot", `{"decision":"approve"}`, nil), http.StatusForbidden, agentd.EFORBIDDEN)
	}
	if ids := s.approvalIDs("k-robot"); len(ids) != 1 || ids[0] != robotCall {
		t.Fatalf("robot's approvals = %v, want [%s]", ids, robotCall)
	}
	if c := s.toolCall("k-alice", call); c.Status != agentd.StatusRequiresConfirmation || s.tool.count() != 0 {
		t.Fatalf("after refused decisions the call is %s and ran %d times", c.Status, s.tool.count())
	}

	// The operator decides alice's call; the decision records its key.
	want(t, "operator approves", s.do("POST", "/v1/tool-calls/"+call+"/approval", "k-op", `{"decision":"approve"}`, nil), http.StatusOK, "")
	if c := s.toolCall("k-alice", call); len(c.Decisions) != 1 || c.Decisions[0].DecidedBy != "op" {
		t.Fatalf("decision = %+v, want one by op", c.Decisions)
	}
	// Alice decides her own; Bob cannot see the conversation Alice made.
	conv2 := s.createConversation("k-alice")
	call2, _ := s.parkedCall("k-alice", conv2)
	want(t, "alice denies her own", s.do("POST", "/v1/tool-calls/"+call2+"/approval", "k-alice", `{"decision":"deny"}`, nil), http.StatusOK, "")
}

// TestRepeatedDecisionWithStaleDigest: a repeat that names another digest
// is 409 stale, not the stored decision.
func TestRepeatedDecisionWithStaleDigest(t *testing.T) {
	s := newFlowServer(t, nil)
	call, _ := s.parkedCall("", s.createConversation(""))
	digest := s.toolCall("", call).ArgumentsSHA256
	body := `{"decision":"approve","arguments_sha256":"` + digest + `"}`
	first := s.do("POST", "/v1/tool-calls/"+call+"/approval", "", body, nil)
	want(t, "approve", first, http.StatusOK, "")
	wrong := strings.Repeat("0", 64)
	want(t, "repeat with another digest", s.do("POST", "/v1/tool-calls/"+call+"/approval", "", `{"decision":"approve","arguments_sha256":"`+wrong+`"}`, nil),
		http.StatusConflict, agentd.ESTALE)
	again := s.do("POST", "/v1/tool-calls/"+call+"/approval", "", body, nil)
	want(t, "repeat with the digest", again, http.StatusOK, "")
	if again.body != first.body {
		t.Fatalf("repeat answered %s, first %s", again.body, first.body)
	}
	want(t, "repeat without digest", s.do("POST", "/v1/tool-calls/"+call+"/approval", "", `{"decision":"approve"}`, nil), http.StatusOK, "")
}

// TestBulkAndAuditRoles: in a bulk decision another tenant's or another
// client's call reads as a call that does not exist (same message), a
// delegate's batch is 403; the audit log is for operator and admin keys,
// of their own tenant, and records who decided through which door.
func TestBulkAndAuditRoles(t *testing.T) {
	s := newFlowServer(t, roleKeys)
	conv := s.createConversation("k-alice")
	call, _ := s.parkedCall("k-alice", conv)
	ghost := "call_01a23125-0000-7000-8000-00000000dead"
	batch := `{"approvals":[{"tool_call_id":"` + call + `","approve":false},{"tool_call_id":"` + ghost + `","approve":false}]}`
	for _, key := range []string{"k-bob", "k-other"} {
		r := s.do("POST", "/v1/approvals", key, batch, nil)
		want(t, key+" bulk", r, http.StatusOK, "")
		var out struct {
			Results []agentd.BatchDecisionResult `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.body), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 2 || out.Results[0].Error == nil || out.Results[0].Error.Code != agentd.ENOTFOUND ||
			*out.Results[0].Error != *out.Results[1].Error {
			t.Errorf("%s: results %s; another's call must read as a ghost", key, r.body)
		}
	}
	want(t, "delegate bulk", s.do("POST", "/v1/approvals", "k-robot", batch, nil), http.StatusForbidden, agentd.EFORBIDDEN)
	if c := s.toolCall("k-alice", call); c.Status != agentd.StatusRequiresConfirmation {
		t.Fatalf("refused batches changed the call: %s", c.Status)
	}
	want(t, "operator bulk", s.do("POST", "/v1/approvals", "k-op", `{"approvals":[{"tool_call_id":"`+call+`","approve":false,"reason":"no"}]}`, nil), http.StatusOK, "")

	for _, key := range []string{"k-alice", "k-robot"} {
		want(t, key+" audit", s.do("GET", "/v1/audit", key, "", nil), http.StatusForbidden, agentd.EFORBIDDEN)
	}
	audit := func(key, query string) []agentd.AuditEntry {
		t.Helper()
		r := s.do("GET", "/v1/audit"+query, key, "", nil)
		want(t, key+" audit", r, http.StatusOK, "")
		var page struct{ Entries []agentd.AuditEntry }
		if err := json.Unmarshal([]byte(r.body), &page); err != nil {
			t.Fatal(err)
		}
		return page.Entries
	}
	es := audit("k-admin", "?kind=decision&tool_call_id="+call)
	if len(es) != 1 || es[0].KeyID != "op" || es[0].Role != agentd.RoleOperator || es[0].Via != agentd.ViaBulk ||
		es[0].Decision != agentd.DecisionDenied || es[0].Reason != "no" || es[0].ConversationID != conv {
		t.Fatalf("audit = %+v, want op's bulk denial", es)
	}
	if es := audit("k-other", ""); len(es) != 0 {
		t.Errorf("another tenant's admin reads %d entries", len(es))
	}
}

// Issue 17, rules nothing caught: an operator of another tenant, or of
// another project of the same tenant, naming a conversation or a call of
// t1/p1 gets an empty pending list and an empty audit log (not the
// conversation's calls or entries), whichever filter reads the store; so
// does another client key naming a client's conversation in the list.
func TestOperatorFiltersKeepTheirScope(t *testing.T) {
	keys := append([]testKey{{key: "k-op-p2", id: "op-p2", tenant: "t1", project: "p2", role: agentd.RoleOperator}}, roleKeys...)
	s := newFlowServer(t, keys)
	conv := s.createConversation("k-alice")
	call, _ := s.parkedCall("k-alice", conv)

	list := func(key, path, field string, q url.Values) []json.RawMessage {
		t.Helper()
		r := s.do("GET", path+"?"+q.Encode(), key, "", nil)
		want(t, path+" "+key+" "+q.Encode(), r, http.StatusOK, "")
		var v map[string]json.RawMessage
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(r.body), &v); err != nil || json.Unmarshal(v[field], &items) != nil || items == nil {
			t.Fatalf("%s: %s", path, r.body)
		}
		return items
	}
	pendingQueries := []url.Values{
		{"status": {"pending"}, "conversation_id": {conv}},
		{"status": {"pending"}, "conversation_id": {conv}, "tool_name": {"pay"}},
		{"status": {"pending"}, "conversation_id": {conv}, "expires_before": {"2999-01-01T00:00:00Z"}},
	}
	for _, q := range pendingQueries {
		if got := list("k-op", "/v1/approvals", "approvals", q); len(got) != 1 {
			t.Errorf("the tenant's operator with %s: %d approvals, want alice's call", q.Encode(), len(got))
		}
		for _, key := range []string{"k-other", "k-op-p2", "k-bob"} {
			if got := list(key, "/v1/approvals", "approvals", q); len(got) != 0 {
				t.Errorf("%s naming t1/p1's conversation (%s): %s", key, q.Encode(), got)
			}
		}
	}

	r := s.do("POST", "/v1/tool-calls/"+call+"/approval", "k-op", `{"decision":"deny","reason":"no"}`, nil)
	want(t, "deny", r, http.StatusOK, "")
	auditQueries := []url.Values{{}, {"conversation_id": {conv}}, {"tool_call_id": {call}}, {"kind": {agentd.AuditDecision}}}
	for _, q := range auditQueries {
		if got := list("k-op", "/v1/audit", "entries", q); len(got) == 0 {
			t.Errorf("the tenant's operator with %q: no audit entries", q.Encode())
		}
		for _, key := range []string{"k-other", "k-op-p2"} {
			if got := list(key, "/v1/audit", "entries", q); len(got) != 0 {
				t.Errorf("%s reads t1/p1's audit log (%q): %s", key, q.Encode(), got)
			}
		}
	}
}

// Over the real engine: two tenants, and two client keys of one tenant,
// using one thread id get their own conversations; a client key's interrupt
// is unknown to another client key and to another tenant, and stays
// pending; a delegate key may not decide.
func TestProtocolThreadsAreTenantScoped(t *testing.T) {
	s := newFlowServer(t, roleKeys)
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
	if got := strings.Join(types, " "); got != "start tool-output-available start-step text-start text-delta text-end finish-step finish" {
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
	s := newFlowServer(t, roleKeys)
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
