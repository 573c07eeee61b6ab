package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

var roleKeys = []testKey{
	{key: "k-alice", id: "alice", tenant: "t1", project: "p1", role: agentd.RoleClient},
	{key: "k-bob", id: "bob", tenant: "t1", project: "p1", role: agentd.RoleClient},
	{key: "k-robot", id: "robot", tenant: "t1", project: "p1", role: agentd.RoleDelegate},
	{key: "k-op", id: "op", tenant: "t1", project: "p1", role: agentd.RoleOperator},
	{key: "k-admin", id: "admin", tenant: "t1", project: "p1", role: agentd.RoleAdmin},
	{key: "k-other", id: "other", tenant: "t2", project: "p1", role: agentd.RoleAdmin},
}

// approvalIDs lists the pending approvals key sees.
func (s *server) approvalIDs(key string) []string {
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

// TestRolesWithinTenant: a client key reaches only the conversations it
// created, on every route, and gets the same 404 as for an id that exists
// nowhere; a delegate never decides; operators and admins reach all.
func TestRolesWithinTenant(t *testing.T) {
	s := newServer(t, roleKeys, api.Config{})
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
	s := newServer(t, nil, api.Config{})
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
	s := newServer(t, roleKeys, api.Config{})
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
