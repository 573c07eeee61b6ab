package main

import (
	"net/http"
	"strings"
	"testing"
)

// bulkItem is the only result of POST /v1/approvals as key with body.
func bulkItem(t *testing.T, base, key, body string) map[string]any {
	t.Helper()
	status, m := call(t, http.MethodPost, base+"/v1/approvals", key, body)
	rs, _ := m["results"].([]any)
	if status != http.StatusOK || len(rs) != 1 {
		t.Fatalf("bulk %s: %d %v", body, status, m)
	}
	return rs[0].(map[string]any)
}

// itemError is a bulk result's error code and message ("" when none).
func itemError(r map[string]any) (code, message string) {
	e, _ := r["error"].(map[string]any)
	return str(e, "code"), str(e, "message")
}

// SPEC §11.2 on the bulk route, on the real binary: an item's remember
// obeys the single route's rules with its errors (a ttl above
// grant_max_ttl, a remembered deny, and — where the rule does not allow
// remember — remember_not_allowed with the single route's message), in
// an atomic batch or not, and changes nothing when refused; a good one
// (atomic: the batch's commit) makes the grant, and the next identical
// call runs under it without a card.
func TestBulkRemember(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := grantProject(t, `{"approvers":["owner","operator","admin"],"allow_remember":true,"grant_max_ttl":"12h"}`)
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog)
	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	card, _ := untilParkedOrFinished(t, st)
	if card == nil {
		t.Fatal("no card")
	}
	id := str(card.Data, "tool_call_id")
	for _, x := range []struct{ body, code, names string }{
		{`{"approvals":[{"tool_call_id":"` + id + `","approve":true,"remember":{"scope":"conversation","ttl":"13h"}}]}`, "grant_ttl_exceeds_max", "remember.ttl"},
		{`{"atomic":true,"approvals":[{"tool_call_id":"` + id + `","approve":true,"remember":{"scope":"conversation","ttl":"13h"}}]}`, "grant_ttl_exceeds_max", "remember.ttl"},
		{`{"approvals":[{"tool_call_id":"` + id + `","approve":false,"remember":{"scope":"conversation"}}]}`, "invalid", "remember"},
	} {
		r := bulkItem(t, base, "k-owner", x.body)
		if code, msg := itemError(r); r["status"] != "failed" || code != x.code || !strings.Contains(msg, x.names) {
			t.Errorf("%s: %v, want failed %s naming %s", x.body, r, x.code, x.names)
		}
	}
	if c := getCall(t, base, "k-op1", id); c["status"] != "requires_confirmation" {
		t.Fatalf("a refused remember decided the call: %v", c["status"])
	}

	r := bulkItem(t, base, "k-owner", `{"atomic":true,"approvals":[{"tool_call_id":"`+id+`","approve":true,"remember":{"scope":"conversation","match":"exact"}}]}`)
	if r["status"] != "applied" {
		t.Fatalf("bulk approve with remember: %v", r)
	}
	created := st.waitFor("grant_created", nil)
	grantID := str(created.Data, "grant_id")
	if str(created.Data, "tool_call_id") != id || str(created.Data, "scope") != "conversation" {
		t.Fatalf("grant_created %s", created.Raw)
	}
	st.waitFor("run_finished", nil)
	send(t, base, "k-owner", conv, "pay it again")
	card, started := untilParkedOrFinished(t, st)
	if card != nil || started == nil {
		t.Fatalf("the identical call after a bulk remember: card %v, started %v", card, started)
	}
	if gb, _ := started.Data["granted_by"].(map[string]any); str(gb, "grant_id") != grantID {
		t.Fatalf("granted_by %s, want %s", started.Raw, grantID)
	}
	if n := execCount(t, execLog, "pay"); n != 2 {
		t.Fatalf("pay ran %d times, want 2", n)
	}

	// A rule without allow_remember: the bulk item fails as the single
	// route answers (403 remember_not_allowed), and the call still waits.
	dir, _ = govProject(t, `{"approvers":["owner","operator"]}`)
	base, _ = startProcess(t, bin, dir, t.TempDir())
	conv, st = newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	id = str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	remember := `"remember":{"scope":"conversation"}`
	status, single := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "k-owner", `{"decision":"approve",`+remember+`}`)
	if status != http.StatusForbidden || errCode(single) != "remember_not_allowed" {
		t.Fatalf("single remember without allow_remember: %d %v", status, single)
	}
	for _, atomic := range []string{"false", "true"} {
		r = bulkItem(t, base, "k-owner", `{"atomic":`+atomic+`,"approvals":[{"tool_call_id":"`+id+`","approve":true,`+remember+`}]}`)
		code, msg := itemError(r)
		if r["status"] != "failed" || code != "remember_not_allowed" || msg != single["error"].(map[string]any)["message"] {
			t.Errorf("atomic %s: bulk remember without allow_remember: %v, want the single route's %v", atomic, r, single)
		}
	}
	if c := getCall(t, base, "k-op1", id); c["status"] != "requires_confirmation" {
		t.Fatalf("a refused bulk remember decided the call: %v", c["status"])
	}
}
