package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// providerKey is the API key the fake providers expect; the server reads
// it from the environment variable the agent.json names.
const providerKey = "sk-e2e-provider-key-0123456789"

// fakeRequest is one request a fake provider received, with the number of
// times the "pay" tool had run when it arrived.
type fakeRequest struct {
	header  http.Header
	body    []byte
	paidRun int
}

// fakeProvider is a loopback model provider that streams its n-th scripted
// SSE body to the n-th request and records the requests.
type fakeProvider struct {
	t       *testing.T
	path    string   // the one path it serves
	replies []string // SSE bodies
	execLog string
	mu      sync.Mutex
	reqs    []fakeRequest
	srv     *httptest.Server
}

func newFakeProvider(t *testing.T, path, execLog string, replies ...string) *fakeProvider {
	f := &fakeProvider{t: t, path: path, replies: replies, execLog: execLog}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, fakeRequest{header: r.Header.Clone(), body: body, paidRun: countLines(f.execLog, "pay")})
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != f.path || n >= len(f.replies) {
		f.t.Errorf("fake provider: unexpected request %d: %s %s", n+1, r.Method, r.URL.Path)
		http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range strings.SplitAfter(f.replies[n], "\n\n") {
		_, _ = io.WriteString(w, ev)
		_ = http.NewResponseController(w).Flush()
	}
}

func (f *fakeProvider) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.reqs...)
}

// countLines counts lines equal to name in the file (0 if it is absent);
// safe to call from the fake's handler goroutine.
func countLines(path, name string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == name {
			n++
		}
	}
	return n
}

// writeAgentJSON replaces the agent.json of a writeProject project with one
// whose model is the given provider object and whose model sees the tools
// pay (requires-confirmation) and record.
func writeAgentJSON(t *testing.T, dir, model string) {
	t.Helper()
	agent := fmt.Sprintf(`{"name":"test","system_prompt":"You are a test agent.","model":%s,"tools":["pay","record"],"approval_timeout":"15m","max_turns":10}`, model)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
}

// OpenAI chunks of the fake: a tool call to the requires-confirmation tool
// "pay" with arguments in fragments, then a final text.
func openAIChunks(usageIn, usageOut int, deltas ...string) string {
	var b strings.Builder
	chunk := func(choices, usage string) {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-e2e","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":%s,"usage":%s}`+"\n\n", choices, usage)
	}
	chunk(`[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`, "null")
	for _, d := range deltas {
		chunk(`[{"index":0,"delta":`+d+`,"logprobs":null,"finish_reason":null}]`, "null")
	}
	finish := "stop"
	if strings.Contains(strings.Join(deltas, ""), "tool_calls") {
		finish = "tool_calls"
	}
	chunk(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`+finish+`"}]`, "null")
	chunk(`[]`, fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, usageIn, usageOut, usageIn+usageOut))
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// anthropicEvents of the fake: the same two steps in the Messages format.
func anthropicEvents(usageIn, usageOut int, stop string, blocks ...[]string) string {
	var b strings.Builder
	ev := func(name, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_e2e","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, usageIn))
	for i, blk := range blocks {
		ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, blk[0]))
		for _, d := range blk[1:] {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, d))
		}
		ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, usageOut))
	ev("message_stop", `{"type":"message_stop"}`)
	return b.String()
}

// For each hosted provider, against a loopback fake speaking its streaming
// wire format: the model streams two parallel calls with fragmented
// arguments; the auto one (record) runs, the requires-confirmation one
// (pay) parks; the approval runs that very call once, with no provider request
// in between; the second request carries both results in the provider's format;
// the run finishes completed with the usage of both steps.
func TestProviderApprovalEndToEnd(t *testing.T) {
	for _, tt := range []struct {
		provider string
		path     string
		model    func(base string) string
		replies  []string
		// check inspects the 2nd request body for the results of callID
		// (pay, parked) and recordID (record, auto), made in one step.
		check func(t *testing.T, body map[string]any, callID, recordID string)
		auth  func(h http.Header) bool
	}{
		{
			provider: "openai", path: "/v1/chat/completions",
			model: func(base string) string {
				return fmt.Sprintf(`{"provider":"openai","model":"m","base_url":%q,"api_key_env":"AGENTD_TEST_PROVIDER_KEY","max_attempts":1}`, base+"/v1")
			},
			replies: []string{
				openAIChunks(100, 20, `{"content":"I will "}`, `{"content":"pay it."}`,
					`{"tool_calls":[{"index":0,"id":"call_fake1","type":"function","function":{"name":"pay","arguments":""}}]}`,
					`{"tool_calls":[{"index":1,"id":"call_fake2","type":"function","function":{"name":"record","arguments":""}}]}`,
					`{"tool_calls":[{"index":0,"function":{"arguments":"{\"amo"}}]}`,
					`{"tool_calls":[{"index":1,"function":{"arguments":"{"}}]}`,
					`{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]}`,
					`{"tool_calls":[{"index":0,"function":{"arguments":"unt\": 5}"}}]}`),
				openAIChunks(150, 8, `{"content":"Done, "}`, `{"content":"paid."}`),
			},
			check: func(t *testing.T, body map[string]any, callID, recordID string) {
				msgs, _ := body["messages"].([]any)
				if len(msgs) != 5 {
					t.Fatalf("2nd request messages: %v", msgs)
				}
				asst, _ := msgs[2].(map[string]any)
				tool, _ := msgs[3].(map[string]any)
				calls, _ := asst["tool_calls"].([]any)
				if asst["role"] != "assistant" || asst["content"] != "I will pay it." || len(calls) != 2 {
					t.Fatalf("assistant message %v", asst)
				}
				c, _ := calls[0].(map[string]any)
				fn, _ := c["function"].(map[string]any)
				id, _ := c["id"].(string)
				// agentd's id is mapped to 40 bytes, the same in the call and its result.
				if fn["name"] != "pay" || fn["arguments"] != `{"amount":5}` || id == "" || len(id) > 40 {
					t.Fatalf("tool call %v (agentd id %s)", c, callID)
				}
				if tool["role"] != "tool" || tool["tool_call_id"] != id || !strings.Contains(str(tool, "content"), `"paid":true`) {
					t.Fatalf("tool message %v, want the result for %s", tool, id)
				}
				rc, _ := calls[1].(map[string]any)
				rfn, _ := rc["function"].(map[string]any)
				rid, _ := rc["id"].(string)
				rtool, _ := msgs[4].(map[string]any)
				if rfn["name"] != "record" || rfn["arguments"] != `{}` || rid == "" || rid == id || len(rid) > 40 {
					t.Fatalf("second tool call %v (agentd id %s)", rc, recordID)
				}
				if rtool["role"] != "tool" || rtool["tool_call_id"] != rid || !strings.Contains(str(rtool, "content"), `"ok":true`) {
					t.Fatalf("tool message %v, want the result for %s", rtool, rid)
				}
			},
			auth: func(h http.Header) bool { return h.Get("Authorization") == "Bearer "+providerKey },
		},
		{
			provider: "anthropic", path: "/v1/messages",
			model: func(base string) string {
				return fmt.Sprintf(`{"provider":"anthropic","model":"m","base_url":%q,"api_key_env":"AGENTD_TEST_PROVIDER_KEY","max_tokens":512,"max_attempts":1}`, base)
			},
			replies: []string{
				anthropicEvents(100, 20, "tool_use",
					[]string{`{"type":"text","text":""}`, `{"type":"text_delta","text":"I will "}`, `{"type":"text_delta","text":"pay it."}`},
					[]string{`{"type":"tool_use","id":"toolu_fake1","name":"pay","input":{}}`,
						`{"type":"input_json_delta","partial_json":""}`, `{"type":"input_json_delta","partial_json":"{\"amo"}`, `{"type":"input_json_delta","partial_json":"unt\": 5}"}`},
					[]string{`{"type":"tool_use","id":"toolu_fake2","name":"record","input":{}}`,
						`{"type":"input_json_delta","partial_json":"{"}`, `{"type":"input_json_delta","partial_json":"}"}`}),
				anthropicEvents(150, 8, "end_turn",
					[]string{`{"type":"text","text":""}`, `{"type":"text_delta","text":"Done, "}`, `{"type":"text_delta","text":"paid."}`}),
			},
			check: func(t *testing.T, body map[string]any, callID, recordID string) {
				msgs, _ := body["messages"].([]any)
				if len(msgs) != 3 {
					t.Fatalf("2nd request messages: %v", msgs)
				}
				asst, _ := msgs[1].(map[string]any)
				blocks, _ := asst["content"].([]any)
				if asst["role"] != "assistant" || len(blocks) != 3 {
					t.Fatalf("assistant message %v", asst)
				}
				use, _ := blocks[1].(map[string]any)
				if in, _ := use["input"].(map[string]any); use["type"] != "tool_use" || use["id"] != callID || use["name"] != "pay" || in["amount"] != float64(5) {
					t.Fatalf("tool_use %v, want id %s", use, callID)
				}
				user, _ := msgs[2].(map[string]any)
				results, _ := user["content"].([]any)
				if use2, _ := blocks[2].(map[string]any); use2["type"] != "tool_use" || use2["id"] != recordID || use2["name"] != "record" {
					t.Fatalf("second tool_use %v, want id %s", use2, recordID)
				}
				if user["role"] != "user" || len(results) != 2 {
					t.Fatalf("tool results message %v", user)
				}
				res, _ := results[0].(map[string]any)
				content, _ := json.Marshal(res["content"])
				if res["type"] != "tool_result" || res["tool_use_id"] != callID || res["is_error"] != nil || !strings.Contains(string(content), `\"paid\":true`) {
					t.Fatalf("tool_result %v, want the result for %s", res, callID)
				}
				res2, _ := results[1].(map[string]any)
				content2, _ := json.Marshal(res2["content"])
				if res2["type"] != "tool_result" || res2["tool_use_id"] != recordID || res2["is_error"] != nil || !strings.Contains(string(content2), `\"ok\":true`) {
					t.Fatalf("second tool_result %v, want the result for %s", res2, recordID)
				}
			},
			auth: func(h http.Header) bool {
				return h.Get("X-Api-Key") == providerKey || h.Get("Authorization") == "Bearer "+providerKey
			},
		},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			dir, execLog := writeProject(t, projectOpts{})
			fake := newFakeProvider(t, tt.path, execLog, tt.replies...)
			writeAgentJSON(t, dir, tt.model(fake.srv.URL))
			base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog, "AGENTD_TEST_PROVIDER_KEY": providerKey})

			conv, st := newConversation(t, base, "")
			sent := send(t, base, "", conv, "pay the invoice")
			// The text streams as it arrives, then the call parks.
			var deltas []string
			var cr sseEvent
			for cr.Type == "" {
				switch ev := st.next(); ev.Type {
				case "text_delta":
					deltas = append(deltas, str(ev.Data, "delta"))
				case "confirmation_required":
					cr = ev
				}
			}
			if strings.Join(deltas, "") != "I will pay it." || len(deltas) != 2 {
				t.Errorf("text deltas %q", deltas)
			}
			callID := str(cr.Data, "tool_call_id")
			if cr.Data["tool_name"] != "pay" || cr.Data["run_id"] != sent["run_id"] {
				t.Fatalf("card %s", cr.Raw)
			}
			if p, _ := cr.Data["params"].(map[string]any); p["amount"] != float64(5) {
				t.Fatalf("params %v", cr.Data["params"])
			}
			// The auto call of the same step runs while pay waits.
			recordID, waiting, recorded := "", false, false
			for {
				for _, ev := range st.seen {
					switch {
					case ev.Type == "run_waiting":
						waiting = true
					case ev.Type == "tool_call_started" && ev.Data["tool_name"] == "record":
						recordID = str(ev.Data, "tool_call_id")
					case ev.Type == "tool_call_result" && ev.Data["tool_name"] == "record" && ev.Data["status"] == "completed":
						recorded = true
					}
				}
				if waiting && recorded {
					break
				}
				st.next()
			}
			if n := len(fake.requests()); n != 1 || execCount(t, execLog, "pay") != 0 || execCount(t, execLog, "record") != 1 {
				t.Fatalf("before approval: %d provider requests, pay ran %d times", n, execCount(t, execLog, "pay"))
			}

			status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve"}`)
			if status != 200 || dec["decision"] != "approved" {
				t.Fatalf("approve: %d %v", status, dec)
			}
			// The same call runs next: no model step in between.
			for _, want := range []string{"confirmation_resolved", "tool_call_started", "tool_call_result"} {
				ev := st.next()
				if ev.Type != want || ev.Data["tool_call_id"] != callID {
					t.Fatalf("after approval expected %s for %s, got %s %s", want, callID, ev.Type, ev.Raw)
				}
			}
			msg := st.waitFor("message", nil)
			if got := str(msg.Data, "content"); got != "Done, paid." {
				t.Errorf("final message %q", got)
			}
			fin := st.waitFor("run_finished", nil)
			usage, _ := fin.Data["usage"].(map[string]any)
			if fin.Data["status"] != "completed" || usage["input_tokens"] != float64(250) || usage["output_tokens"] != float64(28) ||
				(fin.Data["stop_reason"] != "stop" && fin.Data["stop_reason"] != "end_turn") {
				t.Errorf("run_finished %s, want completed with usage 250/28", fin.Raw)
			}

			if n := execCount(t, execLog, "pay"); n != 1 {
				t.Fatalf("pay ran %d times, want 1", n)
			}
			reqs := fake.requests()
			if len(reqs) != 2 {
				t.Fatalf("the provider got %d requests, want 2", len(reqs))
			}
			if reqs[0].paidRun != 0 || reqs[1].paidRun != 1 {
				t.Fatalf("pay had run %d and %d times at the two requests, want 0 and 1", reqs[0].paidRun, reqs[1].paidRun)
			}
			for i, r := range reqs {
				if !tt.auth(r.header) {
					t.Errorf("request %d lacks the key: %v", i+1, r.header)
				}
			}
			var body map[string]any
			must(t, json.Unmarshal(reqs[1].body, &body))
			tt.check(t, body, callID, recordID)
		})
	}
}

// A provider config error stops the server at start with a message that
// names agent.json, the field and the environment variable, never the key.
func TestProviderConfigErrorAtStart(t *testing.T) {
	for _, tt := range []struct{ model, want string }{
		{`{"provider":"openai","model":"m","api_key_env":"AGENTD_TEST_UNSET_KEY"}`, `agent.json: field "model.api_key_env": the environment variable AGENTD_TEST_UNSET_KEY is not set`},
		{`{"provider":"anthropic","model":"m","api_key_env":"AGENTD_TEST_PROVIDER_KEY","max_tokenz":1}`, `agent.json: field "model.max_tokenz": unknown field`},
	} {
		dir, _ := writeProject(t, projectOpts{})
		writeAgentJSON(t, dir, tt.model)
		t.Setenv("AGENTD_TEST_PROVIDER_KEY", providerKey)
		var stderr strings.Builder
		err := run(t.Context(), []string{"serve", "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir()}, os.Getenv, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error()+stderr.String(), providerKey) {
			t.Errorf("%s: error %v, want %q", tt.model, err, tt.want)
		}
	}
}

// A provider that fails for good fails the run with its own message:
// run_finished has status failed, reason "error" and the message, after
// exactly max_attempts requests (retry-after-ms keeps the test fast).
func TestProviderPersistentErrorFailsTheRun(t *testing.T) {
	var mu sync.Mutex
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		attempts++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("retry-after-ms", "10")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"The server had an error while processing your request","type":"server_error"}}`)
	}))
	t.Cleanup(srv.Close)
	dir, _ := writeProject(t, projectOpts{})
	writeAgentJSON(t, dir, fmt.Sprintf(`{"provider":"openai","model":"m","base_url":%q,"max_attempts":3}`, srv.URL+"/v1"))
	base, _ := startServer(t, dir, t.TempDir(), nil)

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "hello")
	errEv := st.waitFor("error", nil)
	fin := st.waitFor("run_finished", nil)
	const want = "The server had an error while processing your request"
	if fin.Data["status"] != "failed" || fin.Data["reason"] != "error" || !strings.Contains(str(fin.Data, "error"), want) ||
		!strings.Contains(str(fin.Data, "error"), "HTTP 500") || !strings.Contains(str(errEv.Data, "message"), want) {
		t.Fatalf("run_finished %s / error %s", fin.Raw, errEv.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts != 3 {
		t.Fatalf("the provider got %d requests, want max_attempts = 3", attempts)
	}
}

// Cancelling a run while the model streams stops the stream: the provider
// sees its connection closed and run_finished says cancelled.
func TestProviderCancelDuringStream(t *testing.T) {
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Thinking"},"finish_reason":null}]}`+"\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // hold the stream open until the client goes away
		close(closed)
	}))
	t.Cleanup(srv.Close)
	dir, _ := writeProject(t, projectOpts{})
	writeAgentJSON(t, dir, fmt.Sprintf(`{"provider":"openai","model":"m","base_url":%q,"max_attempts":1}`, srv.URL+"/v1"))
	base, _ := startServer(t, dir, t.TempDir(), nil)

	conv, st := newConversation(t, base, "")
	sent := send(t, base, "", conv, "hello")
	if d := st.waitFor("text_delta", nil); d.Data["delta"] != "Thinking" {
		t.Fatalf("delta %s", d.Raw)
	}
	if status, got := call(t, http.MethodPost, base+"/v1/runs/"+str(sent, "run_id")+"/cancel", "", ""); status != 200 {
		t.Fatalf("cancel: %d %v", status, got)
	}
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatal("the provider's stream was not closed after cancel")
	}
	if fin := st.waitFor("run_finished", nil); fin.Data["status"] != "cancelled" {
		t.Fatalf("run_finished %s", fin.Raw)
	}
}
