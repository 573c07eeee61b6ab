package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// Issue 17, rules nothing caught: an operator of another tenant, or of
// another project of the same tenant, naming a conversation or a call of
// t1/p1 gets an empty pending list and an empty audit log (not the
// conversation's calls or entries), whichever filter reads the store; so
// does another client key naming a client's conversation in the list.
func TestOperatorFiltersKeepTheirScope(t *testing.T) {
	keys := append([]testKey{{key: "k-op-p2", id: "op-p2", tenant: "t1", project: "p2", role: agentd.RoleOperator}}, roleKeys...)
	s := newServer(t, keys, api.Config{})
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
