package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/demo/billing"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a real OTLP/HTTP trace receiver: it decodes each export
// with the official protobuf and keeps the spans.
type otlpReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string // service.name of each export
	auth    []string // the Authorization header of each export
	dumps   []string // each export, decoded, as protojson text
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &ex)
		}
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("OTLP export %s %s %q: %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.dumps = append(r.dumps, protojson.Format(&ex))
		for _, rs := range ex.ResourceSpans {
			r.service = append(r.service, attr(rs.GetResource().GetAttributes(), "service.name"))
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// waitSpans waits until the spans received include every name in names
// (as a prefix) and returns them all.
func (r *otlpReceiver) waitSpans(t *testing.T, names ...string) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		r.mu.Lock()
		spans := append([]*tracepb.Span(nil), r.spans...)
		r.mu.Unlock()
		missing := ""
		for _, n := range names {
			if findSpan(spans, n) == nil {
				missing = n
			}
		}
		if missing == "" {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q among %d: %s", missing, len(spans), spanNames(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findSpan(spans []*tracepb.Span, prefix string) *tracepb.Span {
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			return s
		}
	}
	return nil
}

func spanNames(spans []*tracepb.Span) string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return fmt.Sprint(v.IntValue)
			default:
				return kv.Value.String()
			}
		}
	}
	return ""
}

func hasAttr(kvs []*commonpb.KeyValue, key string) bool {
	for _, kv := range kvs {
		if kv.Key == key {
			return true
		}
	}
	return false
}

func spanDuration(s *tracepb.Span) time.Duration {
	return time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano)
}

const (
	otelUserText  = "refund 500 for the broken kettle, customer Zanzibar"
	otlpSecret    = "otlp-ingest-s3cret"
	traceTestTool = "traceparent"
	webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// otelRules: the request is parked; its result leads to the traceparent
// command tool, whose result ends the run.
const otelRules = `[
 {"when":{"user":"^refund 500"},"reply":{"text":"Refunding.","tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":500,"reason":"broken"},"intent":"write"}}]}},
 {"when":{"tool_result":"request"},"reply":{"text":"Refunded, writing it down.","tool_calls":[{"name":"traceparent","arguments":{}}]}},
 {"when":{"tool_result":"traceparent"},"reply":{"text":"All done for Zanzibar."}}
]`

// otelProject is the connection fixture's project (billing connection,
// operator key) with otelRules and a command tool that writes its
// TRACEPARENT to tpFile.
func otelProject(t *testing.T) (dir, tpFile string, api *billing.API, rc *webhooktest.Receiver) {
	t.Helper()
	api = billing.New()
	downstream := httptest.NewServer(api.Handler())
	t.Cleanup(downstream.Close)
	dir, _ = writeProject(t, projectOpts{keys: map[string][3]string{operatorKey: {"t1", "operator"}}})
	agent := fmt.Sprintf(`{"name":"test","model":{"provider":"script","script":{"rules":%s}},"max_turns":10}`, otelRules)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	cdir := filepath.Join(dir, "connections", "billing")
	must(t, os.MkdirAll(cdir, 0o755))
	doc, err := fsRead("connections/billing/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, "openapi.json"), doc, 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(connPolicy), 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(fmt.Sprintf(
		`{"base_url": %q, "auth": {"type": "bearer", "token_env": "BILLING_TOKEN"}, "openapi": "openapi.json"}`, downstream.URL+"/api")), 0o644))
	tpFile = filepath.Join(dir, "traceparent.txt")
	td := filepath.Join(dir, "tools", traceTestTool)
	must(t, os.MkdirAll(td, 0o755))
	must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null; printf '%s' \"$TRACEPARENT\" > "+tpFile+"; printf '{\"ok\":true}'\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"traceparent","description":"writes TRACEPARENT","command":["/bin/sh","./run.sh"]}`), 0o644))
	// A webhook endpoint beside the keys.
	rc = webhooktest.NewReceiver(t)
	var conf map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "agentd.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &conf))
	conf["webhooks"] = []map[string]any{{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET"}}
	b, _ = json.Marshal(conf)
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	writeHook(t, dir, "trace", map[string]any{"points": []string{"postToolUse"}},
		"cat >/dev/null; printf '%s\\n' \"$TRACEPARENT\" >> "+filepath.Join(dir, "hook-traceparent.txt"))
	writeHook(t, dir, "pretrace", map[string]any{"points": []string{"preToolUse"}},
		"cat >/dev/null; printf '%s\\n' \"$TRACEPARENT\" >> "+filepath.Join(dir, "pre-traceparent.txt"))
	return dir, tpFile, api, rc
}

// otelEnv is the environment of a server exporting to r.
func otelEnv(r *otlpReceiver) []string {
	return []string{"BILLING_TOKEN=" + billingToken, "OTEL_EXPORTER_OTLP_ENDPOINT=" + r.srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20" + otlpSecret, "OTEL_SERVICE_NAME=agentd-test",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OPS_WEBHOOK_SECRET=" + webhookSecret}
}

// sendTraced posts a user message with a caller's traceparent.
func sendTraced(t *testing.T, base, key, conv, content, traceparent string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/conversations/"+conv+"/messages",
		strings.NewReader(fmt.Sprintf(`{"content":%q}`, content)))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", traceparent)
	resp, err := testClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("send: %d %s", resp.StatusCode, b)
	}
}

// Issue 23, acceptance 1 and 4: one approval, traced by the real binary
// into a real OTLP/HTTP receiver, is one trace continuing the caller's:
// the run, its model steps with token usage, the wait of about 2 s naming
// the approver's key, the tool call, the connection request as its child
// (whose traceparent the downstream got), and the command tool's
// TRACEPARENT; no key, secret or message text in any span.
func TestTracesOfAnApproval(t *testing.T) {
	recv := newOTLPReceiver(t)
	dir, tpFile, api, rc := otelProject(t)
	base, _ := startProcess(t, agentdBinary(t), dir, t.TempDir(), otelEnv(recv)...)

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	conv, st := newConversation(t, base, operatorKey)
	sendTraced(t, base, operatorKey, conv, otelUserText, "00-"+callerTrace+"-"+callerSpan+"-01")
	if rs := st.waitFor("run_started", nil); rs.Data["trace_id"] != callerTrace {
		t.Fatalf("run_started does not carry the caller's trace id: %s", rs.Raw)
	}
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	st.waitFor("run_waiting", nil)
	time.Sleep(2 * time.Second) // the person takes 2 s
	status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", operatorKey,
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, cr.Data["arguments_sha256"]))
	if status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve: %d %v", status, dec)
	}
	approver := str(st.waitFor("confirmation_resolved", nil).Data, "decided_by")
	if fin := st.waitFor("run_finished", nil); fin.Data["status"] != "completed" {
		t.Fatalf("run_finished %s", fin.Raw)
	}

	spans := recv.waitSpans(t, "invoke_agent", "await_approval", "execute_tool request", "execute_tool traceparent", "POST")
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) != callerTrace {
			t.Errorf("span %s is in trace %x, not the caller's", s.Name, s.TraceId)
		}
	}
	run := findSpan(spans, "invoke_agent")
	runID := hex.EncodeToString(run.SpanId)
	if hex.EncodeToString(run.ParentSpanId) != callerSpan || attr(run.Attributes, "agentd.run.status") != "completed" {
		t.Errorf("run span: parent %x, attributes %v", run.ParentSpanId, run.Attributes)
	}
	chats := 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat ") {
			chats++
			if hex.EncodeToString(s.ParentSpanId) != runID || !hasAttr(s.Attributes, "gen_ai.usage.input_tokens") ||
				!hasAttr(s.Attributes, "gen_ai.usage.output_tokens") || !hasAttr(s.Attributes, "gen_ai.response.finish_reasons") {
				t.Errorf("model step span %s: parent %x, attributes %v", s.Name, s.ParentSpanId, s.Attributes)
			}
		}
	}
	if chats != 3 {
		t.Errorf("%d model step spans, want 3: %s", chats, spanNames(spans))
	}
	wait := findSpan(spans, "await_approval request")
	if d := spanDuration(wait); d < 2*time.Second || d > waitLimit || hex.EncodeToString(wait.ParentSpanId) != runID ||
		attr(wait.Attributes, "agentd.approval.decided_by") != approver || attr(wait.Attributes, "agentd.approval.decision") != "approved" ||
		attr(wait.Attributes, "gen_ai.tool.call.id") != callID {
		t.Errorf("wait span of %s (approver %s): %v", d, approver, wait.Attributes)
	}
	tool := findSpan(spans, "execute_tool request")
	if hex.EncodeToString(tool.ParentSpanId) != runID || attr(tool.Attributes, "gen_ai.tool.call.id") != callID {
		t.Errorf("tool span: parent %x, attributes %v", tool.ParentSpanId, tool.Attributes)
	}
	post := findSpan(spans, "POST")
	if !bytesEqual(post.ParentSpanId, tool.SpanId) || post.Kind != tracepb.Span_SPAN_KIND_CLIENT ||
		attr(post.Attributes, "http.response.status_code") != "201" {
		t.Errorf("connection request span: parent %x (tool %x), %v", post.ParentSpanId, tool.SpanId, post.Attributes)
	}
	down := api.Requests()
	if len(down) != 1 || down[0].Header.Get("Traceparent") != "00-"+callerTrace+"-"+hex.EncodeToString(post.SpanId)+"-01" {
		t.Errorf("downstream traceparent %q, want the request span %x", down[0].Header.Get("Traceparent"), post.SpanId)
	}
	tpTool := findSpan(spans, "execute_tool traceparent")
	if got, _ := os.ReadFile(tpFile); string(got) != "00-"+callerTrace+"-"+hex.EncodeToString(tpTool.SpanId)+"-01" {
		t.Errorf("the command tool's TRACEPARENT %q, want its span %x", got, tpTool.SpanId)
	}
	hookSaw, _ := os.ReadFile(filepath.Join(dir, "hook-traceparent.txt"))
	if want := "00-" + callerTrace + "-" + hex.EncodeToString(tool.SpanId) + "-01\n00-" + callerTrace + "-" +
		hex.EncodeToString(tpTool.SpanId) + "-01\n"; string(hookSaw) != want {
		t.Errorf("the postToolUse hook's TRACEPARENT %q, want the tools' spans %q", hookSaw, want)
	}

	// A preToolUse hook runs under the run's span, when the step's calls are
	// classified and again right before an approved call runs: three runs at
	// least, each with the run's span (an empty line is a hook without it).
	preSaw, _ := os.ReadFile(filepath.Join(dir, "pre-traceparent.txt"))
	if lines := strings.Split(strings.TrimSuffix(string(preSaw), "\n"), "\n"); len(lines) < 3 || slices.ContainsFunc(lines, func(l string) bool {
		return l != "00-"+callerTrace+"-"+runID+"-01"
	}) {
		t.Errorf("the preToolUse hook's TRACEPARENT %q, want the run's span %s each time", preSaw, runID)
	}

	// The webhook of the parked call carries the run's trace context, in
	// its body and as its traceparent header.
	reqs := rc.WaitFor(t, waitLimit, "approval_required", func(r []webhooktest.Request) bool {
		return len(webhooktest.WithEvent(r, webhook.EventApprovalRequired)) == 1
	})
	parked := webhooktest.WithEvent(reqs, webhook.EventApprovalRequired)[0]
	webhooktest.Validate(t, parked.Body)
	runTP := "00-" + callerTrace + "-" + runID + "-01"
	if p := bodyOf(t, parked); p.EventContext.TraceID != callerTrace || p.EventContext.TraceParent != runTP || parked.Header.Get("Traceparent") != runTP {
		t.Errorf("webhook trace context: header %q, body %s; want %s", parked.Header.Get("Traceparent"), parked.Body, runTP)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i := range recv.auth {
		if recv.auth[i] != "Bearer "+otlpSecret || recv.service[i] != "agentd-test" {
			t.Errorf("export %d: Authorization %q, service.name %q", i, recv.auth[i], recv.service[i])
		}
	}
	// Acceptance 4: nothing secret or said in any exported span.
	all := strings.Join(recv.dumps, "\n")
	for _, secret := range []string{billingToken, operatorKey, otlpSecret, webhookSecret, otelUserText, "Zanzibar", "Refunding", "broken"} {
		if strings.Contains(all, secret) {
			t.Errorf("an exported span holds %q", secret)
		}
	}
}

func bytesEqual(a, b []byte) bool { return hex.EncodeToString(a) == hex.EncodeToString(b) }

// Issue 23, acceptance 2: kill -9 while a call is parked, restart,
// approve: the wait's span, exported by the second process, starts at the
// park time and ends at the decision, in the run's trace.
func TestTracedWaitAcrossKill9(t *testing.T) {
	recv := newOTLPReceiver(t)
	dir, _, _, _ := otelProject(t)
	data := t.TempDir()
	bin := agentdBinary(t)
	base, proc := startProcess(t, bin, dir, data, otelEnv(recv)...)
	conv, st := newConversation(t, base, operatorKey)
	beforeSend := time.Now()
	send(t, base, operatorKey, conv, otelUserText)
	traceID := str(st.waitFor("run_started", nil).Data, "trace_id")
	cr := st.waitFor("confirmation_required", nil)
	parkedBy := time.Now()
	callID := str(cr.Data, "tool_call_id")
	st.waitFor("run_waiting", nil)
	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()

	base2, _ := startProcess(t, bin, dir, data, otelEnv(recv)...)
	restarted := time.Now()
	status, _ := call(t, http.MethodPost, base2+"/v1/tool-calls/"+callID+"/approval", operatorKey,
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, cr.Data["arguments_sha256"]))
	decided := time.Now()
	if status != 200 {
		t.Fatalf("approve after restart: %d", status)
	}
	spans := recv.waitSpans(t, "invoke_agent", "await_approval")
	wait, run := findSpan(spans, "await_approval"), findSpan(spans, "invoke_agent")
	start, end := time.Unix(0, int64(wait.StartTimeUnixNano)), time.Unix(0, int64(wait.EndTimeUnixNano))
	if start.Before(beforeSend.Add(-time.Millisecond)) || start.After(parkedBy) {
		t.Errorf("the wait starts at %s, not at the park (between %s and %s)", start, beforeSend, parkedBy)
	}
	if end.Before(restarted.Add(-time.Millisecond)) || end.After(decided) {
		t.Errorf("the wait ends at %s, not at the decision (between %s and %s)", end, restarted, decided)
	}
	if hex.EncodeToString(wait.TraceId) != traceID || !bytesEqual(wait.ParentSpanId, run.SpanId) || !bytesEqual(run.TraceId, wait.TraceId) {
		t.Errorf("wait span %x/%x parent %x, run span %x/%x, run_started trace %s", wait.TraceId, wait.SpanId, wait.ParentSpanId, run.TraceId, run.SpanId, traceID)
	}
	if time.Unix(0, int64(run.StartTimeUnixNano)).Before(beforeSend.Add(-time.Millisecond)) || time.Unix(0, int64(run.StartTimeUnixNano)).After(parkedBy) {
		t.Errorf("the run span starts at %d, not when the run started", run.StartTimeUnixNano)
	}
}

// An AG-UI run continues the caller's trace too: the protocol endpoints
// go through the same middleware as POST …/messages.
func TestAGUIContinuesTheCallersTrace(t *testing.T) {
	recv := newOTLPReceiver(t)
	dir, _ := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.srv.URL + "/v1/traces",
		"OTEL_BSP_SCHEDULE_DELAY": "100"})
	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, err := http.NewRequest(http.MethodPost, base+"/v1/ag-ui",
		strings.NewReader(`{"threadId":"t-traced","runId":"r1","messages":[{"id":"u1","role":"user","content":"record it"}]}`))
	must(t, err)
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := streamClient.Do(req)
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body) // to RUN_FINISHED
	resp.Body.Close()
	run := findSpan(recv.waitSpans(t, "invoke_agent"), "invoke_agent")
	if hex.EncodeToString(run.TraceId) != callerTrace || hex.EncodeToString(run.ParentSpanId) != callerSpan {
		t.Errorf("AG-UI run span in trace %x under %x, want %s under %s", run.TraceId, run.ParentSpanId, callerTrace, callerSpan)
	}
}
