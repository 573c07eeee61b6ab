package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/demo/billing"
)

var (
	ctxcallOnce sync.Once
	ctxcallPath string
	ctxcallErr  error
)

// ctxcallHelper builds testdata/ctxcall, the command tools' HTTP client
// of these tests, once per test process.
func ctxcallHelper(t *testing.T) string {
	t.Helper()
	ctxcallOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentd-ctxcall")
		if err != nil {
			ctxcallErr = err
			return
		}
		ctxcallPath = filepath.Join(dir, "ctxcall")
		if out, err := exec.Command("go", "build", "-o", ctxcallPath, "./testdata/ctxcall").CombinedOutput(); err != nil {
			ctxcallErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if ctxcallErr != nil {
		t.Fatal(ctxcallErr)
	}
	return ctxcallPath
}

// ctxTool writes tools/<name>/ with a run.sh script; def adds tool.json
// fields.
func ctxTool(t *testing.T, dir, name, script string, def map[string]any) {
	t.Helper()
	td := filepath.Join(dir, "tools", name)
	must(t, os.MkdirAll(td, 0o755))
	must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	full := map[string]any{"name": name, "description": "test tool " + name, "command": []string{"/bin/sh", "./run.sh"},
		"env": []string{"CTXCALL", "CTXCALL_SAVE", "AGENTD_TEST_LOG"}}
	for k, v := range def {
		full[k] = v
	}
	b, err := json.Marshal(full)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(td, "tool.json"), b, 0o644))
}

// billingConnection writes connections/billing/ pointing at base.
func billingConnection(t *testing.T, dir, base string) {
	t.Helper()
	cdir := filepath.Join(dir, "connections", "billing")
	must(t, os.MkdirAll(cdir, 0o755))
	doc, err := fsRead("connections/billing/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, "openapi.json"), doc, 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(connPolicy), 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(fmt.Sprintf(`{"base_url": %q, "openapi": "openapi.json"}`, base+"/api")), 0o644))
}

const ctxRules = `[
 {"when":{"user":"^read$"},"reply":{"tool_calls":[{"name":"reader"}]}},
 {"when":{"user":"^write$"},"reply":{"tool_calls":[{"name":"writer"}]}},
 {"when":{"user":"^report$"},"reply":{"tool_calls":[{"name":"report"}]}},
 {"when":{"tool_result":"reader"},"reply":{"text":"reader {{status}}: {{result}}{{reason}}"}},
 {"when":{"tool_result":"writer"},"reply":{"text":"writer {{status}}: {{result}}{{reason}}"}},
 {"when":{"tool_result":"report"},"reply":{"text":"report {{status}}: {{result}}{{reason}}"}}
]`

const (
	ctxRead    = `'{"connection":"billing","method":"GET","endpoint":"/invoices","intent":"read"}'`
	ctxRefund  = `'{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":5},"intent":"write"}'`
	ctxReview  = `'{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1002","amount":20000},"intent":"write"}'`
	ctxSecrets = `'{"connection":"billing","method":"GET","endpoint":"/secrets/keys","intent":"read"}'`
)

type ctxAnswer struct {
	Code int            `json:"code"`
	Body map[string]any `json:"body"`
}

// ctxRun sends msg and returns what ctxcall answered in the call of tool.
func ctxRun(t *testing.T, base, msg, tool string) []ctxAnswer {
	t.Helper()
	return ctxRunAs(t, base, "", msg, tool)
}

// ctxRunAs is ctxRun in a new conversation of key.
func ctxRunAs(t *testing.T, base, key, msg, tool string) []ctxAnswer {
	t.Helper()
	conv, st := newConversation(t, base, key)
	send(t, base, key, conv, msg)
	m := st.waitFor("message", nil)
	st.waitFor("run_finished", nil)
	if hasEvent(st, "confirmation_required") {
		t.Fatalf("%s parked a call: %s", msg, st.summary())
	}
	text, ok := strings.CutPrefix(str(m.Data, "content"), tool+" completed: ")
	var out []ctxAnswer
	if !ok || json.Unmarshal([]byte(text), &out) != nil {
		t.Fatalf("%s: %s", msg, m.Raw)
	}
	return out
}

func bodyCode(a ctxAnswer) string {
	e, _ := a.Body["error"].(map[string]any)
	return str(e, "code")
}

// SPEC §4.1 through the real binary, issue 21 acceptance 1 and 2: command
// tools (shell scripts running a small HTTP client) use their per-call
// context endpoint against a real billing API on loopback. With confirm
// false a read runs and a write is refused (write_not_allowed); with
// confirm true the write is sent without a card; an endpoint at review or
// never refuses either way; a composite calls the tools of its uses.tools
// and no other; a token replayed after its call ended is refused (401).
func TestContextEndpoint(t *testing.T) {
	bin, helper := agentdBinary(t), ctxcallHelper(t)
	api := billing.New()
	downstream := httptest.NewServer(api.Handler())
	t.Cleanup(downstream.Close)
	dir, execLog := writeProject(t, projectOpts{})
	writeAgent(t, dir, ctxRules, nil)
	billingConnection(t, dir, downstream.URL)
	saved := filepath.Join(t.TempDir(), "token")
	ctxTool(t, dir, "reader", `cat >/dev/null; export CTXCALL_SAVE; exec "$CTXCALL" /request `+ctxRead+` /request `+ctxRefund+` /request `+ctxSecrets, nil)
	ctxTool(t, dir, "writer", `cat >/dev/null; exec "$CTXCALL" /request `+ctxRefund+` /request `+ctxReview+` /request `+ctxSecrets,
		map[string]any{"confirm": true})
	ctxTool(t, dir, "lookup", `printf '{"found":%s}' "$(cat)"`, map[string]any{"llm_callable": false})
	ctxTool(t, dir, "report", `cat >/dev/null; exec "$CTXCALL" /tools/lookup '{"arguments":{"q":"tea"}}' /tools/pay '{"arguments":{"amount":5}}' /tools/record '{}'`,
		map[string]any{"uses": map[string]any{"tools": []string{"lookup", "record"}}})
	base, _ := startProcess(t, bin, dir, t.TempDir(), "CTXCALL="+helper, "CTXCALL_SAVE="+saved, "AGENTD_TEST_LOG="+execLog)

	r := ctxRun(t, base, "read", "reader")
	if len(r) != 3 || r[0].Code != 200 || r[0].Body["status"] != float64(200) ||
		r[1].Code != 403 || bodyCode(r[1]) != "write_not_allowed" || r[2].Code != 403 || bodyCode(r[2]) != "forbidden" {
		t.Fatalf("reader (confirm false): %+v", r)
	}
	if reqs := api.Requests(); len(reqs) != 1 || reqs[0].Method != "GET" {
		t.Fatalf("downstream after the reader: %d requests", len(reqs))
	}

	// The token of the reader's call, used after the call ended.
	b, err := os.ReadFile(saved)
	must(t, err)
	url, token, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1/context") || token == "" {
		t.Fatalf("context URL %q, token of %d bytes", url, len(token))
	}
	for _, path := range []string{"/request", "/tools/lookup"} {
		status, got := call(t, http.MethodPost, url+path, token, strings.Trim(ctxRead, "'"))
		if path == "/tools/lookup" {
			status, got = call(t, http.MethodPost, url+path, token, `{"arguments":{"q":"tea"}}`)
		}
		if status != 401 || errCode(got) != "unauthorized" {
			t.Fatalf("replayed token on %s: %d %v", path, status, got)
		}
	}
	if n := len(api.Requests()); n != 1 {
		t.Fatalf("the replay reached the downstream API: %d requests", n)
	}

	w := ctxRun(t, base, "write", "writer")
	if len(w) != 3 || w[0].Code != 200 || w[0].Body["status"] != float64(201) ||
		w[1].Code != 403 || bodyCode(w[1]) != "forbidden" || !strings.Contains(fmt.Sprint(w[1].Body), "review") ||
		w[2].Code != 403 || bodyCode(w[2]) != "forbidden" {
		t.Fatalf("writer (confirm true): %+v", w)
	}
	if refunds := api.Refunds(); len(refunds) != 1 || refunds[0].OrderID != "A-1001" {
		t.Fatalf("refunds: %+v, want the writer's one", refunds)
	}

	c := ctxRun(t, base, "report", "report")
	if len(c) != 3 || c[0].Code != 200 || c[0].Body["status"] != "completed" ||
		!strings.Contains(fmt.Sprint(c[0].Body["result"]), "tea") ||
		c[1].Code != 403 || bodyCode(c[1]) != "forbidden" || c[2].Code != 200 || c[2].Body["status"] != "completed" {
		t.Fatalf("composite: %+v", c)
	}
	if n, p := execCount(t, execLog, "record"), execCount(t, execLog, "pay"); n != 1 || p != 0 {
		t.Fatalf("the composite ran record %d times and pay %d times", n, p)
	}

	// Every request of the endpoint is in the audit log.
	status, audit := call(t, http.MethodGet, base+"/v1/audit?kind=connection_request", "", "")
	entries, _ := audit["entries"].([]any)
	if status != 200 || len(entries) != 6 {
		t.Fatalf("audit: %d, %d entries, want 6", status, len(entries))
	}
}

// A write that delegations.escalateConfirm refuses in a delegated
// conversation is refused through the context endpoint too (issue 28.4):
// a confirm true tool's confirm-tier write through AGENTD_CONTEXT_URL/request
// is 403 (review) in a delegate's conversation and on the invoke path with
// a delegate key, and nothing reaches the downstream API; the same write
// in a client's conversation and an operator's invoke is sent.
func TestContextEndpointDelegated(t *testing.T) {
	bin, helper := agentdBinary(t), ctxcallHelper(t)
	api := billing.New()
	downstream := httptest.NewServer(api.Handler())
	t.Cleanup(downstream.Close)
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{
		delegateKey: {"t1", "delegate"}, clientKey: {"t1", "client"}, operatorKey: {"t1", "operator"}}})
	writeAgent(t, dir, ctxRules, nil)
	billingConnection(t, dir, downstream.URL)
	ctxTool(t, dir, "writer", `cat >/dev/null; exec "$CTXCALL" /request `+ctxRefund,
		map[string]any{"confirm": true, "triggers": map[string]any{"invoke": true}})
	base, _ := startProcess(t, bin, dir, t.TempDir(), "CTXCALL="+helper, "AGENTD_TEST_LOG="+execLog)

	refused := func(what string, a []ctxAnswer) {
		t.Helper()
		if len(a) != 1 || a[0].Code != 403 || bodyCode(a[0]) != "forbidden" || !strings.Contains(fmt.Sprint(a[0].Body), "review") {
			t.Fatalf("%s: %+v, want 403 forbidden (review)", what, a)
		}
		if n := len(api.Refunds()); n != 0 {
			t.Fatalf("%s: the refused write reached the downstream API (%d refunds)", what, n)
		}
	}
	refused("a delegate's conversation", ctxRunAs(t, base, delegateKey, "write", "writer"))
	invoke := func(key string) []ctxAnswer {
		t.Helper()
		st, m := call(t, http.MethodPost, base+"/v1/tools/writer/run", key, `{"arguments":{}}`)
		res, _ := json.Marshal(m["result"])
		var out []ctxAnswer
		if st != 200 || m["status"] != "completed" || json.Unmarshal(res, &out) != nil {
			t.Fatalf("invoke writer with %s: %d %v", key, st, m)
		}
		return out
	}
	refused("a delegate's invoke", invoke(delegateKey))

	if w := ctxRunAs(t, base, clientKey, "write", "writer"); len(w) != 1 || w[0].Code != 200 {
		t.Fatalf("a client's conversation: %+v, want the write sent", w)
	}
	if w := invoke(operatorKey); len(w) != 1 || w[0].Code != 200 {
		t.Fatalf("an operator's invoke: %+v, want the write sent", w)
	}
	if n := len(api.Refunds()); n != 2 {
		t.Fatalf("%d refunds, want the client's and the operator's", n)
	}
}

// Issue 21 acceptance 2, at load: a composite whose uses.tools names a
// requires-confirmation tool or a connection tool does not load, and the
// error names both tools.
func TestCompositeLoadErrors(t *testing.T) {
	for _, tc := range []struct{ child, want string }{
		{"pay", `tools (tools/report/tool.json): field "uses.tools[0]": composite "report" may not use "pay" (tools (tools/pay/tool.json)): it requires confirmation`},
		{"billing__createRefund", `composite "report" may not use "billing__createRefund" (connection "billing"): it is a connection tool`},
		{"request", `composite "report" may not use "request" (connections (the request tool)): it is a connection tool`},
		{"nope", `composite "report" uses "nope", which no tool source defines`},
	} {
		t.Run(tc.child, func(t *testing.T) {
			dir, _ := writeProject(t, projectOpts{})
			billingConnection(t, dir, "http://127.0.0.1:1")
			ctxTool(t, dir, "report", `cat >/dev/null`, map[string]any{"uses": map[string]any{"tools": []string{tc.child}}})
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"serve", "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir()},
				func(string) string { return "" }, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
