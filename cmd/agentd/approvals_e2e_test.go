package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parkPay starts a "pay" run in a new conversation and returns the parked
// call's id, its conversation's stream and the conversation.
func parkPay(t *testing.T, base, key string) (id string, st *eventStream, conv string) {
	t.Helper()
	conv, st = newConversation(t, base, key)
	send(t, base, key, conv, "pay")
	return str(st.waitFor("confirmation_required", nil).Data, "tool_call_id"), st, conv
}

// bulkResult is one item of POST /v1/approvals' answer.
type bulkResult struct {
	ToolCallID string `json:"tool_call_id"`
	Status     string `json:"status"`
	Decision   *struct {
		ID       string `json:"id"`
		Decision string `json:"decision"`
		Via      string `json:"via"`
	} `json:"decision"`
	Error *struct{ Code, Message string } `json:"error"`
}

// bulk posts a batch and returns the status and the results.
func bulk(t *testing.T, base, key, body string) (int, []bulkResult, string) {
	t.Helper()
	status, raw := callRaw(t, http.MethodPost, base+"/v1/approvals", key, body)
	var out struct {
		Results []bulkResult `json:"results"`
	}
	if status == http.StatusOK {
		must(t, json.Unmarshal(raw, &out))
	}
	return status, out.Results, string(raw)
}

// outcome is a result as "applied", "not_applied" or the failed item's code.
func outcome(r bulkResult) string {
	if r.Status == "failed" && r.Error != nil {
		return r.Error.Code
	}
	return r.Status
}

// Acceptance 4: a batch without atomic applies the good items and reports
// each bad one; an atomic batch with a bad item applies none; 20
// concurrent batches naming the same call run it exactly once.
func TestBulkApprovals(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	a, stA, _ := parkPay(t, base, "")
	b, stB, _ := parkPay(t, base, "")
	c, stC, _ := parkPay(t, base, "")
	ghost := "call_01a23125-0000-7000-8000-00000000dead"

	status, res, raw := bulk(t, base, "", fmt.Sprintf(`{"approvals":[
		{"tool_call_id":%q,"approve":true},
		{"tool_call_id":%q,"approve":false,"reason":"not this one"},
		{"tool_call_id":%q,"approve":true,"arguments_sha256":"%s"},
		{"tool_call_id":%q,"approve":true}]}`, a, b, c, strings.Repeat("0", 64), ghost))
	if status != 200 || len(res) != 4 {
		t.Fatalf("non-atomic batch: %d %s", status, raw)
	}
	for i, want := range []string{"applied", "applied", "stale", "not_found"} {
		if got := outcome(res[i]); got != want || res[i].ToolCallID != []string{a, b, c, ghost}[i] {
			t.Errorf("item %d: %s %s, want %s", i, res[i].ToolCallID, got, want)
		}
	}
	if res[0].Decision.Via != "bulk" || res[1].Decision.Decision != "denied" {
		t.Errorf("decisions %+v %+v", res[0].Decision, res[1].Decision)
	}
	stA.waitFor("run_finished", nil)
	stB.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times after the batch, want 1", n)
	}

	// Atomic with a bad item: nothing applies, the results say so.
	d, stD, _ := parkPay(t, base, "")
	status, res, raw = bulk(t, base, "", fmt.Sprintf(`{"atomic":true,"approvals":[
		{"tool_call_id":%q,"approve":true},{"tool_call_id":%q,"approve":true},{"tool_call_id":%q,"approve":true}]}`, c, d, ghost))
	if status != 200 || len(res) != 3 || outcome(res[0]) != "not_applied" || outcome(res[1]) != "not_applied" || outcome(res[2]) != "not_found" ||
		res[0].Error.Code != "not_applied" || !strings.Contains(res[0].Error.Message, "approvals[2]") {
		t.Fatalf("atomic batch with a bad item: %d %s", status, raw)
	}
	for _, id := range []string{c, d} {
		if _, m := call(t, http.MethodGet, base+"/v1/tool-calls/"+id, "", ""); m["status"] != "requires_confirmation" {
			t.Fatalf("after a failed atomic batch %s is %v", id, m["status"])
		}
	}
	// The same batch without the bad item applies all of it.
	status, res, raw = bulk(t, base, "", fmt.Sprintf(`{"atomic":true,"approvals":[
		{"tool_call_id":%q,"approve":true},{"tool_call_id":%q,"approve":false}]}`, c, d))
	if status != 200 || outcome(res[0]) != "applied" || outcome(res[1]) != "applied" {
		t.Fatalf("atomic batch: %d %s", status, raw)
	}
	stC.waitFor("run_finished", nil)
	stD.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 2 {
		t.Fatalf("pay ran %d times, want 2", n)
	}

	// 20 concurrent batches, atomic and not, naming one call.
	e, stE, _ := parkPay(t, base, "")
	var wg sync.WaitGroup
	results := make([][]bulkResult, 20)
	statuses := make([]int, 20)
	start := make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			statuses[i], results[i], _ = bulk(t, base, "", fmt.Sprintf(`{"atomic":%v,"approvals":[{"tool_call_id":%q,"approve":true}]}`, i%2 == 0, e))
		})
	}
	close(start)
	wg.Wait()
	stE.waitFor("run_finished", nil)
	for i := range 20 {
		if statuses[i] != 200 || len(results[i]) != 1 || outcome(results[i][0]) != "applied" || results[i][0].Decision.ID != results[0][0].Decision.ID {
			t.Fatalf("batch %d: %d %+v (first %+v)", i, statuses[i], results[i], results[0])
		}
	}
	if n := execCount(t, execLog, "pay"); n != 3 {
		t.Fatalf("pay ran %d times, want 3: the concurrent batches ran it %d times", n, n-2)
	}

	// Batches the server refuses whole.
	var many []string
	for range 101 {
		many = append(many, fmt.Sprintf(`{"tool_call_id":%q,"approve":true}`, ghost))
	}
	for name, body := range map[string]string{
		"101 items": `{"approvals":[` + strings.Join(many, ",") + `]}`,
		"duplicate": fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":true},{"tool_call_id":%q,"approve":false}]}`, e, e),
		"empty":     `{"approvals":[]}`,
	} {
		status, _, raw := bulk(t, base, "", body)
		if status != 400 || !strings.Contains(raw, `"invalid"`) || name == "101 items" && !strings.Contains(raw, "at most 100") {
			t.Errorf("%s: %d %s", name, status, raw)
		}
	}
}

// scrape reads /metrics with the Prometheus text parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	status, raw := callRaw(t, http.MethodGet, base+"/metrics", "", "")
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, raw)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(raw)))
	must(t, err)
	return fams
}

// value is the sum of the family's samples whose labels include labels
// (counter or gauge; a histogram's count).
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// Acceptance 5: a scripted session — an approval, a denial in bulk, a
// refusal, a cancelled parked call — is in the audit log entry by entry,
// with who decided through which door; the metrics move as it runs.
func TestAuditAndMetricsOfASession(t *testing.T) {
	opKey, clientKey := "key-operator-audit-0123", "key-client-audit-0123"
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{opKey: {"t1", "operator", ""}, clientKey: {"t1", "client", ""}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	before := scrape(t, base)
	if g := gauge(before, "agentd_parked_tool_calls"); g != 0 {
		t.Fatalf("parked gauge at start = %v", g)
	}

	approved, stA, convA := parkPay(t, base, clientKey)
	denied, stB, _ := parkPay(t, base, clientKey)
	cancelled, stC, _ := parkPay(t, base, clientKey)
	if g := gauge(scrape(t, base), "agentd_parked_tool_calls"); g != 3 {
		t.Fatalf("parked gauge with three parked calls = %v", g)
	}
	if s, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+approved+"/approval", clientKey, `{"decision":"approve"}`); s != 200 {
		t.Fatalf("approve: %d %v", s, m)
	}
	stA.waitFor("run_finished", nil)
	if s, res, raw := bulk(t, base, opKey, fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":false,"reason":"too much"}]}`, denied)); s != 200 || outcome(res[0]) != "applied" {
		t.Fatalf("bulk deny: %d %s", s, raw)
	}
	stB.waitFor("run_finished", nil)
	runC := str(stC.waitFor("run_waiting", nil).Data, "run_id")
	if s, m := call(t, http.MethodPost, base+"/v1/runs/"+runC+"/cancel", clientKey, ""); s != 200 {
		t.Fatalf("cancel: %d %v", s, m)
	}
	convR, stR := newConversation(t, base, clientKey)
	send(t, base, clientKey, convR, "unknown")
	refused := str(stR.waitFor("tool_call_refused", nil).Data, "tool_call_id")
	stR.waitFor("run_finished", nil)

	// The audit log, as an operator reads it.
	status, page := call(t, http.MethodGet, base+"/v1/audit?limit=100", opKey, "")
	list, _ := page["entries"].([]any)
	if status != 200 || len(list) != 4 {
		t.Fatalf("audit: %d %v, want 4 entries", status, page)
	}
	entries := make([]map[string]any, len(list))
	for i, x := range list {
		entries[i], _ = x.(map[string]any)
	}
	for i, want := range []struct{ kind, call, decision, role, via string }{
		{"decision", approved, "approved", "client", "single"},
		{"decision", denied, "denied", "operator", "bulk"},
		{"cancellation", cancelled, "cancelled", "client", "cancel"},
		{"refusal", refused, "", "", ""},
	} {
		e := entries[i]
		if e["kind"] != want.kind || e["tool_call_id"] != want.call || str(e, "decision") != want.decision ||
			str(e, "role") != want.role || str(e, "via") != want.via || str(e, "key_id") == "" || str(e, "at") == "" {
			t.Errorf("audit entry %d = %v, want %+v", i, e, want)
		}
	}
	if str(entries[0], "arguments_sha256") == "" || str(entries[1], "reason") != "too much" || str(entries[3], "tier") == "" {
		t.Errorf("audit entries lack their digest, reason or tier: %v", entries)
	}
	// Filters, and the client key that may not read it.
	if _, m := call(t, http.MethodGet, base+"/v1/audit?conversation_id="+convA, opKey, ""); len(m["entries"].([]any)) != 1 {
		t.Errorf("audit of one conversation: %v", m)
	}
	if _, m := call(t, http.MethodGet, base+"/v1/audit?kind=refusal", opKey, ""); len(m["entries"].([]any)) != 1 {
		t.Errorf("audit of refusals: %v", m)
	}
	if s, m := call(t, http.MethodGet, base+"/v1/audit", clientKey, ""); s != 403 || errCode(m) != "forbidden" {
		t.Errorf("a client key reads the audit log: %d %v", s, m)
	}

	// The metrics moved with the session.
	after := scrape(t, base)
	for _, c := range []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"agentd_runs_started_total", nil, 4},
		{"agentd_runs_finished_total", []string{"status", "completed"}, 3},
		{"agentd_runs_finished_total", []string{"status", "cancelled"}, 1},
		{"agentd_approval_decisions_total", []string{"decision", "approved", "source", "single"}, 1},
		{"agentd_approval_decisions_total", []string{"decision", "denied", "source", "bulk"}, 1},
		{"agentd_approval_decisions_total", []string{"decision", "cancelled", "source", "cancel"}, 1},
		{"agentd_approval_wait_seconds", []string{"decision", "approved"}, 1},
		{"agentd_tool_calls_total", []string{"status", "completed", "tier", "confirm"}, 1},
		{"agentd_tool_calls_total", []string{"status", "denied", "tier", "confirm"}, 1},
		{"agentd_tool_calls_total", []string{"status", "cancelled", "tier", "confirm"}, 1},
		{"agentd_tool_calls_total", []string{"status", "refused"}, 1},
		{"agentd_tool_duration_seconds", []string{"tool", "pay", "status", "completed"}, 1},
		{"agentd_http_requests_total", []string{"route", "/v1/approvals", "method", "POST", "code", "200"}, 1},
	} {
		if d := value(after, c.name, c.labels...) - value(before, c.name, c.labels...); d != c.delta {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, d, c.delta)
		}
	}
	if g := gauge(after, "agentd_parked_tool_calls"); g != 0 {
		t.Errorf("parked gauge after the session = %v, want 0", g)
	}
	if value(after, "agentd_model_step_seconds") <= value(before, "agentd_model_step_seconds") ||
		value(after, "go_goroutines") == 0 || gauge(after, "process_start_time_seconds") == 0 {
		t.Errorf("model step, Go or process metrics missing")
	}
	for _, mf := range after {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "t1") || strings.HasPrefix(l.GetValue(), "call_") || strings.HasPrefix(l.GetValue(), "key") {
					t.Errorf("%s has an unbounded label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// gauge is the value of an unlabelled metric.
func gauge(f map[string]*dto.MetricFamily, name string) float64 { return value(f, name) }
