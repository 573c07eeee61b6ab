package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/jstest"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
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

// Acceptance 6 for links: each check of a link fails its test when
// removed — the minting key's rights (403 with the rule's code), the
// ttl's form, a GET that never decides, the signature (404 for one
// character changed anywhere), single use (410 again, and one winner of
// concurrent uses), expiry (410), a call decided by another path (409).
func TestDecisionLinkChecks(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := govProject(t, `{"approvers":["operator"]}`)
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog)
	park := func() string {
		t.Helper()
		conv, st := newConversation(t, base, "k-owner")
		defer st.close()
		send(t, base, "k-owner", conv, "pay the bill")
		return str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	}
	pending := func(id string) {
		t.Helper()
		if c := getCall(t, base, "k-op1", id); c["status"] != "requires_confirmation" {
			t.Fatalf("call %s is %v, want still pending", id, c["status"])
		}
	}

	// The minting key's rights: the owner is not an approver here.
	id := park()
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/links", "k-owner", "")
	if status != http.StatusForbidden || errCode(m) != "approver_not_allowed" {
		t.Fatalf("links by a key that may not decide: %d %v", status, m)
	}
	for _, ttl := range []string{`"soon"`, `"-1h"`, `"8761h"`, `5`} {
		status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/links", "k-op1", `{"ttl":`+ttl+`}`)
		if status != http.StatusBadRequest || !strings.Contains(m["error"].(map[string]any)["message"].(string), "ttl") {
			t.Fatalf("ttl %s: %d %v", ttl, status, m)
		}
	}
	approve, deny, minted := mintLinks(t, base, "k-op1", id, "")
	exp, _ := time.Parse(time.RFC3339, str(minted, "expires_at"))
	deadline, _ := time.Parse(time.RFC3339Nano, getCall(t, base, "k-op1", id)["requires_approval_at"].(string))
	if exp.After(deadline) || time.Until(exp) > time.Hour {
		t.Fatalf("expires_at %s: after the deadline %s or over the default ttl", exp, deadline)
	}

	// A GET never decides, however often.
	for range 2 {
		status, body := getPage(t, deny)
		if status != 200 || !strings.Contains(body, `name="reason"`) {
			t.Fatalf("GET deny link: %d %s", status, body)
		}
	}
	pending(id)

	// The signature: one character changed anywhere is 404.
	token := deny[strings.Index(deny, "/d/")+3:]
	for _, i := range []int{0, len(token) / 3, strings.Index(token, ".") - 1, strings.Index(token, ".") + 1, len(token) - 1} {
		b := []byte(token)
		b[i] ^= 0x01
		if b[i] == '.' || b[i] == '/' {
			b[i] ^= 0x03
		}
		if status, _ := postLink(t, base+"/d/"+string(b), nil); status != http.StatusNotFound {
			t.Fatalf("token changed at %d: %d, want 404", i, status)
		}
	}
	pending(id)

	// Single use: the deny link decides once, with its reason; again 410.
	if status, body := postLink(t, deny, url.Values{"reason": {"not this month"}}); status != 200 || !strings.Contains(body, "Denied") {
		t.Fatalf("deny link: %d %s", status, body)
	}
	if c := getCall(t, base, "k-op1", id); c["status"] != "denied" {
		t.Fatalf("after the deny link the call is %v", c["status"])
	}
	if status, body := postLink(t, deny, nil); status != http.StatusGone || !strings.Contains(body, "already used") {
		t.Fatalf("deny link again: %d %s", status, body)
	}
	// Links die with the decision: the unused approve link is 409.
	if status, _ := postLink(t, approve, nil); status != http.StatusConflict {
		t.Fatalf("approve link of a denied call: %d", status)
	}

	// Decided by another path: 409, and the call is not decided twice.
	id = park()
	approve, _, _ = mintLinks(t, base, "k-op1", id, "")
	if status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "k-op2", `{"decision":"approve"}`); status != 200 {
		t.Fatalf("approve by op2: %d %v", status, m)
	}
	if status, body := postLink(t, approve, nil); status != http.StatusConflict {
		t.Fatalf("link of a call approved by another path: %d %s", status, body)
	}

	// Concurrent uses of one link: one decides, the others are refused.
	id = park()
	approve, _, _ = mintLinks(t, base, "k-op1", id, "")
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 6 {
		wg.Go(func() {
			resp, err := http.PostForm(approve, nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[200] != 1 || statuses[http.StatusGone]+statuses[http.StatusConflict] != 5 {
		t.Fatalf("concurrent uses: %v, want one 200 and five 410 or 409", statuses)
	}

	// Expiry: a link past its ttl is 410 while the call is still pending.
	id = park()
	approve, _, minted = mintLinks(t, base, "k-op1", id, `{"ttl":"1s"}`)
	exp, _ = time.Parse(time.RFC3339, str(minted, "expires_at"))
	time.Sleep(time.Until(exp) + 50*time.Millisecond)
	if status, body := postLink(t, approve, nil); status != http.StatusGone || !strings.Contains(body, "expired") {
		t.Fatalf("expired link: %d %s", status, body)
	}
	pending(id)
	if n := execCount(t, execLog, "pay"); n != 2 {
		t.Fatalf("pay ran %d times, want 2 (op2's approval and the concurrent link)", n)
	}
}

// getPage is a GET of a link's page, as a browser or a mail scanner does.
func getPage(t *testing.T, link string) (int, string) {
	t.Helper()
	resp, err := http.Get(link)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

// A webhook endpoint with include_decision_links gets decision_links in
// llm.tool_call_approval_required, minted as its links_key_id under
// public_url, signed, valid under the schema, and usable; an endpoint
// whose key may not decide the call gets none.
func TestWebhookDecisionLinks(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := govProject(t, `{"approvers":["operator"]}`)
	bot, plain := webhooktest.NewReceiver(t), webhooktest.NewReceiver(t)
	secret := newSecret(t)
	addWebhook(t, dir,
		map[string]any{"id": "bot", "url": bot.URL, "secret_env": "BOT_SECRET", "events": []string{webhook.EventApprovalRequired},
			"include_decision_links": true, "links_key_id": "op1"},
		map[string]any{"id": "owner-bot", "url": plain.URL, "secret_env": "BOT_SECRET", "events": []string{webhook.EventApprovalRequired},
			"include_decision_links": true, "links_key_id": "owner"})
	setServerField(t, dir, "public_url", "https://agentd.example.com/")
	base, _ := startProcess(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog, "BOT_SECRET="+secret)

	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	callID := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	got := func(rc *webhooktest.Receiver) webhooktest.Request {
		reqs := rc.WaitFor(t, waitLimit, "approval_required", func(r []webhooktest.Request) bool {
			return len(webhooktest.WithEvent(r, webhook.EventApprovalRequired)) == 1
		})
		r := webhooktest.WithEvent(reqs, webhook.EventApprovalRequired)[0]
		webhooktest.Validate(t, r.Body)
		must(t, webhooktest.Verify(secret, r))
		return r
	}
	if p := bodyOf(t, got(plain)); p.DecisionLinks != nil || p.ToolCall.ID != callID {
		t.Fatalf("the owner's endpoint got links: %+v", p.DecisionLinks)
	}
	p := bodyOf(t, got(bot))
	dl := p.DecisionLinks
	if dl == nil || !strings.HasPrefix(dl.Approve, "https://agentd.example.com/d/") || !strings.HasPrefix(dl.Deny, "https://agentd.example.com/d/") ||
		dl.ExpiresAt.After(*p.ToolCall.RequiresApprovalAt) {
		t.Fatalf("decision_links %+v (deadline %v)", dl, p.ToolCall.RequiresApprovalAt)
	}
	local := strings.Replace(dl.Approve, "https://agentd.example.com", base, 1)
	if status, body := getPage(t, local); status != 200 || !strings.Contains(body, "Approve") {
		t.Fatalf("the webhook's approve link: %d %s", status, body)
	}
	if status, body := postLink(t, local, nil); status != 200 {
		t.Fatalf("using the webhook's approve link: %d %s", status, body)
	}
	if res := st.waitFor("confirmation_resolved", nil); str(res.Data, "decided_by") != "op1" || str(res.Data, "decision") != "approved" {
		t.Fatalf("confirmation_resolved %s", res.Raw)
	}
	st.waitFor("tool_call_result", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times", n)
	}
}

// setServerField sets one field of the project's agentd.json.
func setServerField(t *testing.T, dir, name string, value any) {
	t.Helper()
	setJSONField(t, filepath.Join(dir, "agentd.json"), name, value)
}

// setJSONField sets one top-level field of the JSON object in the file
// path, keeping its other fields.
func setJSONField(t *testing.T, path, name string, value any) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var conf map[string]any
	must(t, json.Unmarshal(b, &conf))
	conf[name] = value
	b, err = json.Marshal(conf)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o644))
}

// Issue 28, findings 1 and 7, on the real binary: the webhook receiver
// gets working decision links, the same body on a redelivery, while the
// delivery log, the redelivery's answer and the server's log never hold
// a link's token (the log shows the route, /d/{token}); the unsealed link
// the delivery log shows opens nothing.
func TestDecisionLinkTokensNeverLeak(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := govProject(t, `{"approvers":["operator"]}`)
	bot := webhooktest.NewReceiver(t)
	secret := newSecret(t)
	addWebhook(t, dir, map[string]any{"id": "bot", "url": bot.URL, "secret_env": "BOT_SECRET",
		"events": []string{webhook.EventApprovalRequired}, "include_decision_links": true, "links_key_id": "op1"})
	setServerField(t, dir, "public_url", "https://agentd.example.com")
	base, _, serverLog := startProcessLogged(t, bin, dir, t.TempDir(), "AGENTD_TEST_LOG="+execLog, "BOT_SECRET="+secret)

	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	st.waitFor("confirmation_required", nil)
	first := bot.WaitFor(t, waitLimit, "approval_required", func(r []webhooktest.Request) bool { return len(r) == 1 })[0]
	webhooktest.Validate(t, first.Body)
	must(t, webhooktest.Verify(secret, first))
	dl := bodyOf(t, first).DecisionLinks
	if dl == nil {
		t.Fatalf("no decision_links: %s", first.Body)
	}
	tokens := []string{strings.TrimPrefix(dl.Approve, "https://agentd.example.com/d/"), strings.TrimPrefix(dl.Deny, "https://agentd.example.com/d/")}
	noToken := func(where, s string) {
		t.Helper()
		for _, tok := range tokens {
			unsealed, mac, _ := strings.Cut(tok, ".")
			if mac == "" || strings.Contains(s, tok) || strings.Contains(s, mac) {
				t.Fatalf("%s holds the token %s:\n%s", where, tok, s)
			}
			if where != "the server's log" && !strings.Contains(s, "/d/"+unsealed) {
				t.Fatalf("%s does not show the unsealed link /d/%s:\n%s", where, unsealed, s)
			}
		}
	}

	status, log := callRaw(t, http.MethodGet, base+"/v1/webhooks/deliveries", "k-op1", "")
	if status != 200 {
		t.Fatalf("delivery log: %d %s", status, log)
	}
	noToken("the delivery log", string(log))
	status, redelivered := callRaw(t, http.MethodPost, base+"/v1/webhooks/deliveries/"+first.ID()+"/redeliver", "k-op1", "")
	if status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", status, redelivered)
	}
	noToken("the redelivery's answer", string(redelivered))
	again := bot.WaitFor(t, waitLimit, "the redelivery", func(r []webhooktest.Request) bool { return len(r) == 2 })[1]
	if again.ID() != first.ID() || string(again.Body) != string(first.Body) {
		t.Fatalf("the redelivery sent another body:\n%s\n%s", first.Body, again.Body)
	}
	must(t, webhooktest.Verify(secret, again))
	unsealed, _, _ := strings.Cut(tokens[0], ".")
	if status, _ := getPage(t, base+"/d/"+unsealed); status != http.StatusNotFound {
		t.Fatalf("the delivery log's unsealed link opens: %d", status)
	}

	// The receiver's links work; the log shows neither token.
	local := base + "/d/" + tokens[0]
	if status, body := getPage(t, local); status != 200 || !strings.Contains(body, "Approve") {
		t.Fatalf("the webhook's approve link: %d %s", status, body)
	}
	if status, body := postLink(t, local, nil); status != 200 {
		t.Fatalf("using the webhook's approve link: %d %s", status, body)
	}
	st.waitFor("tool_call_result", nil)
	if status, _ := getPage(t, base+"/d/"+tokens[1]); status != http.StatusConflict {
		t.Fatalf("the deny link of an approved call: %d", status)
	}
	// Each request's line follows its answer: wait for the four /d/ lines.
	deadline := time.Now().Add(waitLimit)
	for strings.Count(serverLog(), `"path":"/d/{token}"`) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the log has not four /d/{token} request lines:\n%s", serverLog())
		}
		time.Sleep(10 * time.Millisecond)
	}
	noToken("the server's log", serverLog())
}
