package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// grantRules are script rules put before the project's own: a small and
// a large refund through the pay tool.
const grantRules = `[
 {"when":{"user":"(?i)^small refund"},"reply":{"tool_calls":[{"name":"pay","arguments":{"amount":40}}]}},
 {"when":{"user":"(?i)^large refund"},"reply":{"tool_calls":[{"name":"pay","arguments":{"amount":500}}]}}
]`

// grantProject is govProject's project with approval and grantRules, and
// one more key: an operator of another tenant.
func grantProject(t *testing.T, approval string) (dir, execLog string) {
	t.Helper()
	dir, execLog = govProject(t, approval)
	path := filepath.Join(dir, "agent.json")
	b, err := os.ReadFile(path)
	must(t, err)
	var agent map[string]any
	must(t, json.Unmarshal(b, &agent))
	var extra, rules []any
	must(t, json.Unmarshal([]byte(grantRules), &extra))
	must(t, json.Unmarshal([]byte(defaultRules), &rules))
	agent["model"].(map[string]any)["script"] = map[string]any{"rules": append(extra, rules...)}
	b, err = json.Marshal(agent)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o644))

	path = filepath.Join(dir, "agentd.json")
	b, err = os.ReadFile(path)
	must(t, err)
	var cfg map[string]any
	must(t, json.Unmarshal(b, &cfg))
	sum := sha256.Sum256([]byte("k-t2op"))
	cfg["api_keys"] = append(cfg["api_keys"].([]any), map[string]any{"id": "t2op", "sha256": hex.EncodeToString(sum[:]),
		"tenant_id": "t2", "project_id": "p1", "role": "operator"})
	b, err = json.Marshal(cfg)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o644))
	return dir, execLog
}

// untilFinished reads st up to the run's run_finished and returns what
// it saw: the confirmation_required of a parked call (the run waits: nil
// then for run_finished) or the tool_call_started of a call that ran.
func untilParkedOrFinished(t *testing.T, st *eventStream) (card, started *sseEvent) {
	t.Helper()
	for {
		ev := st.next()
		switch ev.Type {
		case "confirmation_required":
			return &ev, started
		case "tool_call_started":
			if str(ev.Data, "tool_name") == "pay" {
				started = &ev
			}
		case "run_finished":
			return nil, started
		}
	}
}

// approve decides callID as key with body and expects 200.
func decideOK(t *testing.T, base, key, callID, body string) map[string]any {
	t.Helper()
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", key, body)
	if status != http.StatusOK {
		t.Fatalf("decide %s %s: %d %v", callID, body, status, m)
	}
	return m
}

// Issue 22 acceptance 3 (SPEC §11.2) on the real binary: a conversation
// grant with match exact skips the second identical card and not a call
// with other arguments; bad remembers are refused with the field named;
// another tenant sees and revokes nothing; a revoke brings the card back;
// a constraint grant (max) covers a small amount and not a large one;
// the audit log records creation, use and revocation.
func TestRememberedGrants(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := grantProject(t, `{"approvers":["owner","operator","admin"],"allow_remember":true,"grant_max_ttl":"12h"}`)
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog)
	conv, st := newConversation(t, base, "k-owner")

	send(t, base, "k-owner", conv, "pay the bill")
	card, _ := untilParkedOrFinished(t, st)
	if card == nil || !strings.Contains(fmt.Sprint(card.Data["allowed_decisions"]), "remember") {
		t.Fatalf("the first card: %v", card)
	}
	first := str(card.Data, "tool_call_id")
	decideOK(t, base, "k-owner", first, `{"decision":"approve","remember":{"scope":"conversation","ttl":"1h","match":"exact"}}`)
	created := st.waitFor("grant_created", nil)
	grantID := str(created.Data, "grant_id")
	if str(created.Data, "scope") != "conversation" || str(created.Data, "tool_name") != "pay" || str(created.Data, "expires_at") == "" {
		t.Fatalf("grant_created %s", created.Raw)
	}
	st.waitFor("run_finished", nil)

	// The identical call runs without a card, under the grant.
	send(t, base, "k-owner", conv, "pay it again")
	card, started := untilParkedOrFinished(t, st)
	if card != nil || started == nil {
		t.Fatalf("the identical call: card %v, started %v", card, started)
	}
	gb, _ := started.Data["granted_by"].(map[string]any)
	if str(gb, "grant_id") != grantID || str(gb, "key_id") != "owner" {
		t.Fatalf("tool_call_started.granted_by %v", started.Raw)
	}
	if n := execCount(t, execLog, "pay"); n != 2 {
		t.Fatalf("pay ran %d times, want 2", n)
	}

	// Other arguments (amount 7): a card. Bad remembers on it change nothing.
	send(t, base, "k-owner", conv, "both")
	card, _ = untilParkedOrFinished(t, st)
	if card == nil {
		t.Fatal("a call with other arguments ran without a card")
	}
	other := str(card.Data, "tool_call_id")
	for body, want := range map[string][2]string{
		`{"decision":"approve","remember":{"scope":"conversation","ttl":"13h"}}`:  {"422", "grant_ttl_exceeds_max"},
		`{"decision":"approve","remember":{"scope":"conversation","until":"1h"}}`: {"400", "until"},
		`{"decision":"approve","remember":{"scope":"tenant"}}`:                    {"400", "remember.scope"},
		`{"decision":"approve","remember":{"scope":"project","match":"all"}}`:     {"400", "remember.match"},
	} {
		status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+other+"/approval", "k-owner", body)
		if fmt.Sprint(status) != want[0] || !strings.Contains(fmt.Sprint(m), want[1]) {
			t.Errorf("%s: %d %v, want %s naming %s", body, status, m, want[0], want[1])
		}
	}
	decideOK(t, base, "k-owner", other, `{"decision":"deny"}`)
	st.waitFor("run_finished", nil)

	// Another tenant sees and revokes nothing; the owner sees its grant.
	status, m := call(t, http.MethodGet, base+"/v1/grants", "k-t2op", "")
	if status != 200 || len(m["grants"].([]any)) != 0 {
		t.Fatalf("another tenant's list: %d %v", status, m)
	}
	if status, m := call(t, http.MethodDelete, base+"/v1/grants/"+grantID, "k-t2op", ""); status != http.StatusNotFound {
		t.Fatalf("another tenant revokes: %d %v", status, m)
	}
	status, m = call(t, http.MethodGet, base+"/v1/grants", "k-owner", "")
	if status != 200 || len(m["grants"].([]any)) != 1 || str(m["grants"].([]any)[0].(map[string]any), "id") != grantID {
		t.Fatalf("the owner's list: %d %v", status, m)
	}

	// Revoked: the card is back.
	status, m = call(t, http.MethodDelete, base+"/v1/grants/"+grantID, "k-owner", "")
	if status != 200 || str(m, "revoked_at") == "" {
		t.Fatalf("revoke: %d %v", status, m)
	}
	if ev := st.waitFor("grant_revoked", nil); str(ev.Data, "grant_id") != grantID {
		t.Fatalf("grant_revoked %s", ev.Raw)
	}
	send(t, base, "k-owner", conv, "pay the bill")
	card, _ = untilParkedOrFinished(t, st)
	if card == nil {
		t.Fatal("a revoked grant still answered the card")
	}
	decideOK(t, base, "k-owner", str(card.Data, "tool_call_id"),
		`{"decision":"approve","remember":{"scope":"project","match":{"amount":{"max":100}}}}`)
	st.waitFor("grant_created", nil)
	st.waitFor("run_finished", nil)

	// A constraint grant: a small amount runs, a large one gets a card.
	send(t, base, "k-owner", conv, "small refund")
	if card, started := untilParkedOrFinished(t, st); card != nil || started == nil || started.Data["granted_by"] == nil {
		t.Fatalf("a small amount under the max grant: card %v", card)
	}
	send(t, base, "k-owner", conv, "large refund")
	card, _ = untilParkedOrFinished(t, st)
	if card == nil {
		t.Fatal("a large amount ran under the max grant")
	}
	decideOK(t, base, "k-owner", str(card.Data, "tool_call_id"), `{"decision":"deny"}`)

	status, m = call(t, http.MethodGet, base+"/v1/audit?limit=100", "k-op1", "")
	if status != 200 {
		t.Fatalf("audit: %d %v", status, m)
	}
	var kinds []string
	for _, e := range m["entries"].([]any) {
		if k := str(e.(map[string]any), "kind"); strings.HasPrefix(k, "grant_") {
			kinds = append(kinds, k)
		}
	}
	if !slices.Equal(kinds, []string{"grant_created", "grant_use", "grant_revoked", "grant_created", "grant_use"}) {
		t.Fatalf("grant audit entries %v", kinds)
	}
}
