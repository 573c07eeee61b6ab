package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/jstest"
)

// Decision links (SPEC §11.4, issue 22 acceptance 5 and 6) on the real
// binary: in a real browser, and each check of a link's use.

// mintLinks is POST /v1/tool-calls/{id}/links as key with body.
func mintLinks(t *testing.T, base, key, callID, body string) (approve, deny string, m map[string]any) {
	t.Helper()
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/links", key, body)
	if status != 200 {
		t.Fatalf("mint links as %s: %d %v", key, status, m)
	}
	return str(m, "approve"), str(m, "deny"), m
}

// postLink presses a link's button: a form POST to its URL.
func postLink(t *testing.T, link string, form url.Values) (int, string) {
	t.Helper()
	resp, err := http.PostForm(link, form)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

// tamper changes one character of a link's token (its last, where a
// lenient base64 decoder would ignore the change).
func tamper(link string) string {
	last := link[len(link)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'B'
	}
	return link[:len(link)-1] + string(repl)
}

// Acceptance 5: a decision link opened in Chromium shows the card and
// changes nothing until its button is pressed; pressing it decides once
// and the original conversation's stream shows the result; the same link
// again is 410; a link with one character changed is 404.
func TestDecisionLinksInBrowser(t *testing.T) {
	node := jstest.Node(t)
	pkgs := jstest.Packages(t, "web/testdata/js")
	chromium := jstest.Chromium(t)
	bin := agentdBinary(t)
	dir, execLog := govProject(t, `{"approvers":["operator"]}`)
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog)

	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	callID := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	approve, deny, _ := mintLinks(t, base, "k-op1", callID, `{"ttl":"10m"}`)
	if !strings.HasPrefix(approve, base+"/d/") || !strings.HasPrefix(deny, base+"/d/") {
		t.Fatalf("links %s %s not under the request's host %s", approve, deny, base)
	}
	cfg, _ := json.Marshal(map[string]string{"chromium": chromium, "base": base, "key": "k-op1", "callId": callID,
		"approve": approve, "deny": deny, "tampered": tamper(approve)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "links.test.mjs")
	cmd.Dir, cmd.Env = pkgs, append(os.Environ(), "AGENTD_LINK_TEST="+string(cfg))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("links.test.mjs: %v\n%s", err, out)
	}

	res := st.waitFor("confirmation_resolved", nil)
	if str(res.Data, "decision") != "approved" || str(res.Data, "decided_by") != "op1" {
		t.Fatalf("confirmation_resolved %s", res.Raw)
	}
	if r := st.waitFor("tool_call_result", nil); str(r.Data, "status") != "completed" {
		t.Fatalf("tool_call_result %s", r.Raw)
	}
	if msg := st.waitFor("message", func(e sseEvent) bool { return strings.HasPrefix(str(e.Data, "content"), "paid:") }); msg.Raw == "" {
		t.Fatal("no answer after the decision")
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
	status, m := call(t, http.MethodGet, base+"/v1/audit?kind=decision&tool_call_id="+callID, "k-op1", "")
	entries, _ := m["entries"].([]any)
	if status != 200 || len(entries) != 1 || entries[0].(map[string]any)["via"] != "link" || entries[0].(map[string]any)["key_id"] != "op1" {
		t.Fatalf("audit: %d %v", status, m)
	}
}
