package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// newSecret returns a fresh whsec_ secret.
func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	must(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// withWebhooks writes agentd.json with the endpoints (dev mode: no keys).
func withWebhooks(t *testing.T, dir string, endpoints ...map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"webhooks": endpoints})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
}

// bodyOf decodes a webhook body.
func bodyOf(t *testing.T, r webhooktest.Request) webhook.Payload {
	t.Helper()
	var p webhook.Payload
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("webhook body: %v: %s", err, r.Body)
	}
	return p
}

// Acceptance 1 and 5 (webhooks): a scripted session produces all five
// events, each body valid under its schema; the parked call's
// llm.tool_call_approval_required carries the SSE card's
// requires_approval_at; the signatures (two secrets: a rotation) verify in
// Go and with the official npm package, and a tampered body does not.
func TestWebhooksScriptedSession(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	rc := webhooktest.NewReceiver(t)
	oldSecret, newSecretValue := newSecret(t), newSecret(t)
	withWebhooks(t, dir, map[string]any{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET"})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog, "OPS_WEBHOOK_SECRET": oldSecret + " " + newSecretValue})

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay the bill")
	card := st.waitFor("confirmation_required", nil)
	callID := str(card.Data, "tool_call_id")
	reqs := rc.WaitFor(t, waitLimit, "approval_required", func(r []webhooktest.Request) bool {
		return len(webhooktest.WithEvent(r, webhook.EventApprovalRequired)) == 1
	})
	parked := webhooktest.WithEvent(reqs, webhook.EventApprovalRequired)[0]
	p := bodyOf(t, parked)
	var raw struct {
		ToolCall struct {
			RequiresApprovalAt string `json:"requires_approval_at"`
		} `json:"tool_call"`
	}
	must(t, json.Unmarshal(parked.Body, &raw))
	if raw.ToolCall.RequiresApprovalAt != str(card.Data, "requires_approval_at") || raw.ToolCall.RequiresApprovalAt == "" {
		t.Fatalf("requires_approval_at = %q, the SSE card's %q", raw.ToolCall.RequiresApprovalAt, str(card.Data, "requires_approval_at"))
	}
	if p.ToolCall.ID != callID || p.ToolCall.Name != "pay" || p.ToolCall.Status != "TOOL_EXECUTION_STATUS_REQUIRES_CONFIRMATION" ||
		string(p.ToolCall.ArgumentsJSON) != `{"amount":5}` || p.EventContext.CallerKey != "default:"+conv ||
		p.EventContext.TenantID != "default" || p.EventContext.ProjectID != "default" || p.EventContext.CorrelationID != str(card.Data, "correlation_id") {
		t.Fatalf("approval_required body %s", parked.Body)
	}
	if parked.ID() == "" || p.EventContext.EventID == "" {
		t.Fatalf("no webhook-id or event_id: %v %s", parked.Header, parked.Body)
	}
	for _, secret := range []string{oldSecret, newSecretValue} {
		if err := webhooktest.Verify(secret, parked); err != nil {
			t.Fatalf("Go verification with one of the rotating secrets: %v", err)
		}
	}
	tampered := parked
	tampered.Body = bytes.Replace(parked.Body, []byte(`"amount":5`), []byte(`"amount":9`), 1)
	if err := webhooktest.Verify(newSecretValue, tampered); err == nil {
		t.Fatal("a tampered body verified")
	}

	status, _ := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve"}`)
	if status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	st.waitFor("run_finished", nil)
	send(t, base, "", conv, "unknown tool please")
	st.waitFor("run_finished", func(e sseEvent) bool { return len(st.seen) > 0 && e.Data["run_id"] != card.Data["run_id"] })
	reqs = rc.WaitFor(t, waitLimit, "all five events", func(r []webhooktest.Request) bool {
		for _, name := range webhook.EventNames[:5] { // reminders and extensions: TestRemindAndExtend
			if len(webhooktest.WithEvent(r, name)) == 0 {
				return false
			}
		}
		return true
	})
	for _, r := range reqs {
		webhooktest.Validate(t, r.Body)
		if err := webhooktest.Verify(oldSecret, r); err != nil {
			t.Fatalf("%s: %v", r.EventName(), err)
		}
	}
	done := bodyOf(t, webhooktest.WithEvent(reqs, webhook.EventCompleted)[0])
	if done.ToolCall.Status != "TOOL_EXECUTION_STATUS_COMPLETED" || !bytes.Contains(done.ToolCall.ResultJSON, []byte(`"paid":true`)) {
		t.Fatalf("completed body: %+v", done.ToolCall)
	}
	if r := bodyOf(t, webhooktest.WithEvent(reqs, webhook.EventApprovalResolved)[0]); r.ToolCall.Status != "TOOL_EXECUTION_STATUS_APPROVED" {
		t.Fatalf("resolved status %s", r.ToolCall.Status)
	}

	// The official npm package agrees: every delivery verifies with either
	// secret, the tampered one does not.
	results := webhooktest.VerifyWithNode(t, newSecretValue, append(reqs, tampered))
	for i, res := range results[:len(reqs)] {
		if res != "ok" {
			t.Fatalf("standardwebhooks (npm) rejected %s: %s", reqs[i].EventName(), res)
		}
	}
	if last := results[len(results)-1]; last == "ok" {
		t.Fatal("standardwebhooks (npm) verified a tampered body")
	}
}

// Acceptance 2: 500 then 429 with Retry-After: 1 gives the same webhook-id
// three times, the third at least a second after the second; a 410
// receiver is hit once and disabled (delivery log, /readyz), and enabling
// it and redelivering reaches it again; a hanging receiver times out
// without holding back another endpoint.
func TestWebhookRetriesAndDisabling(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	flaky, gone, hang, fast := webhooktest.NewReceiver(t), webhooktest.NewReceiver(t), webhooktest.NewReceiver(t), webhooktest.NewReceiver(t)
	flaky.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusInternalServerError)
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}
	var goneUp atomic.Bool
	gone.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		if goneUp.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusGone)
	}
	release := make(chan struct{})
	var hanging atomic.Int32
	hang.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		defer hanging.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	t.Cleanup(func() { close(release) })
	events := []string{webhook.EventApprovalRequired}
	short := []string{"10ms", "10ms", "10ms"}
	secret := newSecret(t)
	ep := func(id, url string, extra map[string]any) map[string]any {
		m := map[string]any{"id": id, "url": url, "secret_env": "HOOK_SECRET", "events": events, "retry_schedule": short}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	// hang and fast also get the decision; hang has one attempt in flight
	// at most, and it hangs.
	both := []string{webhook.EventApprovalRequired, webhook.EventApprovalResolved}
	var hangingWhenFastGotDecision atomic.Int32
	hangingWhenFastGotDecision.Store(-1)
	fast.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			hangingWhenFastGotDecision.Store(hanging.Load())
		}
		w.WriteHeader(http.StatusNoContent)
	}
	withWebhooks(t, dir, ep("flaky", flaky.URL, nil), ep("gone", gone.URL, nil),
		ep("hang", hang.URL, map[string]any{"timeout": "5s", "max_in_flight": 1, "events": both}),
		ep("fast", fast.URL, map[string]any{"events": both}))
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog, "HOOK_SECRET": secret})

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay the bill")
	callID := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	hang.WaitFor(t, waitLimit, "the hanging receiver holds the first delivery", func(r []webhooktest.Request) bool {
		return len(r) == 1 && hanging.Load() == 1
	})
	if status, _ := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve"}`); status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	fast.WaitFor(t, waitLimit, "the fast endpoint gets both events", func(r []webhooktest.Request) bool { return len(r) == 2 })
	if got := hangingWhenFastGotDecision.Load(); got != 1 {
		t.Fatalf("when the fast endpoint got the decision, the hanging receiver held %d requests, want 1 (still hanging)", got)
	}
	if n := len(hang.Requests()); n != 1 {
		t.Fatalf("the hanging endpoint got %d requests while its first hangs, want 1 (max_in_flight 1)", n)
	}
	reqs := flaky.WaitFor(t, waitLimit, "three attempts", func(r []webhooktest.Request) bool { return len(r) == 3 })
	if reqs[0].ID() != reqs[1].ID() || reqs[1].ID() != reqs[2].ID() {
		t.Fatalf("webhook-ids %s %s %s, want one id", reqs[0].ID(), reqs[1].ID(), reqs[2].ID())
	}
	if gap := reqs[2].At.Sub(reqs[1].At); gap < time.Second {
		t.Fatalf("third attempt %s after the second, want at least Retry-After: 1s", gap)
	}
	gone.WaitFor(t, waitLimit, "the 410 receiver", func(r []webhooktest.Request) bool { return len(r) == 1 })
	// The hanging receiver's attempt times out and is retried: a second
	// request with the same id.
	hreqs := hang.WaitFor(t, waitLimit, "a retry after the timeout", func(r []webhooktest.Request) bool {
		return len(webhooktest.WithEvent(r, webhook.EventApprovalRequired)) >= 2
	})
	if parked := webhooktest.WithEvent(hreqs, webhook.EventApprovalRequired); parked[0].ID() != parked[1].ID() {
		t.Fatal("the retry after a timeout has another webhook-id")
	}

	// The 410 endpoint is disabled: the log says so, /readyz too, and a new
	// event does not reach it.
	waitFor(t, "gone disabled", func() bool {
		_, m := call(t, http.MethodGet, base+"/readyz", "", "")
		d, _ := m["webhooks"].(map[string]any)["disabled_endpoints"].([]any)
		return len(d) == 1 && d[0] == "gone"
	})
	_, page := call(t, http.MethodGet, base+"/v1/webhooks/deliveries?endpoint_id=gone", "", "")
	ds := page["deliveries"].([]any)
	d0 := ds[0].(map[string]any)
	attempts := d0["attempts"].([]any)
	if len(ds) != 1 || d0["status"] != "failed" || len(attempts) != 1 || attempts[0].(map[string]any)["status_code"] != float64(410) {
		t.Fatalf("gone's delivery log: %v", page)
	}
	_, eps := call(t, http.MethodGet, base+"/v1/webhooks/endpoints", "", "")
	for _, e := range eps["endpoints"].([]any) {
		e := e.(map[string]any)
		if (e["id"] == "gone") == (e["enabled"] == true) {
			t.Fatalf("endpoint states: %v", eps)
		}
	}
	goneUp.Store(true)
	status, _ := call(t, http.MethodPost, base+"/v1/webhooks/endpoints/gone/enable", "", "")
	if status != http.StatusOK {
		t.Fatalf("enable: %d", status)
	}
	status, _ = call(t, http.MethodPost, base+"/v1/webhooks/deliveries/"+str(d0, "id")+"/redeliver", "", "")
	if status != http.StatusAccepted {
		t.Fatalf("redeliver: %d", status)
	}
	greqs := gone.WaitFor(t, waitLimit, "the redelivery", func(r []webhooktest.Request) bool { return len(r) == 2 })
	if greqs[1].ID() != greqs[0].ID() || greqs[0].ID() != str(d0, "id") {
		t.Fatalf("redelivery id %s, first %s, log %s", greqs[1].ID(), greqs[0].ID(), str(d0, "id"))
	}
	for _, r := range append(append(reqs, greqs...), fast.Requests()...) {
		webhooktest.Validate(t, r.Body)
		if err := webhooktest.Verify(secret, r); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond until it holds, failing after waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Acceptance 3: kill -9 of the real binary after the event committed and
// while its delivery is in flight (the receiver holds the request); after
// the restart the receiver gets it again, with the same webhook-id.
func TestKill9WebhookDelivery(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := writeProject(t, projectOpts{})
	rc := webhooktest.NewReceiver(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var up atomic.Bool
	rc.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		if up.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		select { // down: hold the request until the process is gone
		case <-release:
		case <-r.Context().Done():
		}
	}
	secret := newSecret(t)
	withWebhooks(t, dir, map[string]any{"id": "ops", "url": rc.URL, "secret_env": "OPS_SECRET",
		"events": []string{webhook.EventApprovalRequired}, "timeout": "1s", "retry_schedule": []string{"10ms", "10ms"}})
	data := t.TempDir()
	env := []string{"AGENTD_TEST_LOG=" + execLog, "OPS_SECRET=" + secret}

	base, proc := startProcess(t, bin, dir, data, env...)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay the bill")
	st.waitFor("confirmation_required", nil)
	first := rc.WaitFor(t, waitLimit, "the delivery in flight", func(r []webhooktest.Request) bool { return len(r) == 1 })[0]
	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()

	up.Store(true)
	startProcess(t, bin, dir, data, env...)
	reqs := rc.WaitFor(t, waitLimit, "the delivery after the restart", func(r []webhooktest.Request) bool {
		return len(r) >= 2 && r[len(r)-1].At.After(first.At)
	})
	last := reqs[len(reqs)-1]
	if last.ID() != first.ID() || !bytes.Equal(last.Body, first.Body) {
		t.Fatalf("after the restart: webhook-id %s body %s; before: %s %s", last.ID(), last.Body, first.ID(), first.Body)
	}
	if err := webhooktest.Verify(secret, last); err != nil {
		t.Fatal(err)
	}
}

// The curl block of docs/webhooks.md ("The delivery log and redelivery")
// really works: run with an operator key against a server whose parked
// call was delivered, it lists, pages, redelivers (the receiver gets the
// same webhook-id again) and shows and enables the endpoint.
func TestWebhookDocsCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks.md"))
	must(t, err)
	section := string(doc)[strings.Index(string(doc), "## The delivery log and redelivery"):]
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("docs/webhooks.md: no shell block in the delivery log section")
	}

	dir, execLog := writeProject(t, projectOpts{})
	rc := webhooktest.NewReceiver(t)
	const opKey = "op-key-for-the-docs"
	sum := sha256.Sum256([]byte(opKey))
	b, _ := json.Marshal(map[string]any{
		"api_keys": []map[string]string{{"id": "op", "sha256": hex.EncodeToString(sum[:]), "tenant_id": "acme", "project_id": "shop", "role": "operator"}},
		"webhooks": []map[string]any{{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET", "tenant_id": "acme"}},
	})
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog, "OPS_WEBHOOK_SECRET": newSecret(t)})
	conv, st := newConversation(t, base, opKey)
	send(t, base, opKey, conv, "pay the bill")
	st.waitFor("confirmation_required", nil)
	first := rc.WaitFor(t, waitLimit, "the delivery", func(r []webhooktest.Request) bool { return len(r) == 1 })[0]

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	script := "set -e\n" + strings.ReplaceAll(block[1], "A=http://127.0.0.1:8787", "A="+base)
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "AGENTD_OPERATOR_KEY="+opKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the docs' curl block: %v\n%s", err, out)
	}
	if strings.Contains(string(out), `"error":`) {
		t.Fatalf("a request of the docs' curl block failed:\n%s", out)
	}
	for _, want := range []string{`"deliveries":[{"id":"msg_`, `"event_name":"llm.tool_call_approval_required"`,
		`"deliveries":[]`, `"status":"pending"`, `"endpoints":[{"id":"ops"`, `"enabled":true`} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the docs' curl block printed no %s:\n%s", want, out)
		}
	}
	again := rc.WaitFor(t, waitLimit, "the redelivery", func(r []webhooktest.Request) bool { return len(r) == 2 })[1]
	if again.ID() != first.ID() {
		t.Fatalf("redelivered %s, first %s", again.ID(), first.ID())
	}
}
