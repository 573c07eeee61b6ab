package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/model/internal/provider"
	"github.com/agentd-dev/agentd/model/internal/providertest"
)

const testKey = "sk-test-9f8e7d6c5b4a-SECRET"

// newTestModel builds a Model against srv with the key in TEST_OPENAI_KEY
// and a sleep that records its waits without waiting.
func newTestModel(t *testing.T, srv *providertest.Server, extra string) (*Model, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	raw := fmt.Sprintf(`{"provider":"openai","model":"gpt-4o-mini","base_url":%q,"api_key_env":"TEST_OPENAI_KEY"%s}`, srv.URL+"/v1", extra)
	m, err := New(json.RawMessage(raw), env(map[string]string{"TEST_OPENAI_KEY": testKey}), WithSleep(sl.sleep))
	if err != nil {
		t.Fatal(err)
	}
	return m, sl
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var userOnly = agentd.ModelRequest{
	System:   "You are a test agent.",
	Messages: []agentd.ModelMessage{{Role: agentd.ModelRoleUser, Content: "refund order A-1001"}},
	Tools: []agentd.ToolSpec{
		{Name: "lookup_order", Description: "Look up an order.", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
		{Name: "refund_payment", Description: "Refund a payment.", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["order_id","amount"],"additionalProperties":false}`)},
	},
}

// (a) A streamed reply with text and two parallel tool calls whose
// arguments arrive in interleaved fragments: both calls are assembled by
// index with their ids, names and exact argument text, the text deltas
// arrive in order, usage and finish_reason are set; the request streams
// with include_usage and carries the tools as function tools.
func TestOpenAIStreamTextAndParallelToolCalls(t *testing.T) {
	srv := providertest.New(t, providertest.SSE(t, "testdata/text_and_two_calls.sse"))
	m, _ := newTestModel(t, srv, `,"max_tokens":300,"temperature":0.2`)
	var deltas []string
	resp, err := m.Generate(context.Background(), userOnly, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Let me look ", "that up and ", "refund it."}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas %q, want %q", deltas, want)
	}
	if resp.Text != "Let me look that up and refund it." {
		t.Errorf("text %q", resp.Text)
	}
	want := []agentd.ModelToolCall{
		{ID: "call_Lk3Vq9", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id": "A-1001"}`)},
		{ID: "call_Rf8Zp2", Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`)},
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	for i, c := range resp.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name || string(c.Arguments) != string(want[i].Arguments) {
			t.Errorf("call %d = {%s %s %s}, want {%s %s %s}", i, c.ID, c.Name, c.Arguments, want[i].ID, want[i].Name, want[i].Arguments)
		}
	}
	if resp.Usage != (agentd.Usage{InputTokens: 182, OutputTokens: 61}) || resp.StopReason != "tool_calls" {
		t.Errorf("usage %+v stop %q", resp.Usage, resp.StopReason)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v1/chat/completions" {
		t.Fatalf("requests %+v", reqs)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
	var body map[string]any
	mustJSON(t, reqs[0].Body, &body)
	if body["model"] != "gpt-4o-mini" || body["stream"] != true || body["max_tokens"] != float64(300) || body["temperature"] != 0.2 {
		t.Errorf("request %s", reqs[0].Body)
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options %v", body["stream_options"])
	}
	wantTools := `[
	 {"type":"function","function":{"name":"lookup_order","description":"Look up an order.",
	   "parameters":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}},
	 {"type":"function","function":{"name":"refund_payment","description":"Refund a payment.",
	   "parameters":{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["order_id","amount"],"additionalProperties":false}}}]`
	assertJSON(t, "tools", body["tools"], wantTools)
	assertJSON(t, "messages", body["messages"], `[{"role":"system","content":"You are a test agent."},{"role":"user","content":"refund order A-1001"}]`)
}

// historyID is the agentd id of the n-th call of historyRequest.
func historyID(n int) string { return fmt.Sprintf("call_0194f3a2-7b1c-7d4e-8f00-00000000000%d", n) }

// historyRequest has an assistant step with two calls (completed, denied
// with a reason), a second with four (expired, refused with arguments that
// were a JSON string, cancelled, failed), each call followed by its tool
// message with the Content the loop gives it, and a new user message.
func historyRequest() agentd.ModelRequest {
	id := historyID
	tool := func(n int, name string, status agentd.CallStatus, content, reason string, result string) agentd.ModelMessage {
		m := agentd.ModelMessage{Role: agentd.ModelRoleTool, ToolCallID: id(n), ToolName: name, ToolStatus: status, Content: content, ToolReason: reason}
		if result != "" {
			m.ToolResult = json.RawMessage(result)
		}
		return m
	}
	return agentd.ModelRequest{
		System: "sys",
		Messages: []agentd.ModelMessage{
			{Role: agentd.ModelRoleUser, Content: "check and refund A-1001"},
			{Role: agentd.ModelRoleAssistant, Content: "On it.", ToolCalls: []agentd.ModelToolCall{
				{ID: id(1), Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"A-1001"}`)},
				{ID: id(2), Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`)},
			}},
			tool(1, "lookup_order", agentd.StatusCompleted, `{"status":"paid","total":42.5}`, "", `{"status":"paid","total":42.5}`),
			tool(2, "refund_payment", agentd.StatusDenied, "The user denied this action, so it was not performed. Reason: not this one", "not this one", ""),
			{Role: agentd.ModelRoleAssistant, ToolCalls: []agentd.ModelToolCall{
				{ID: id(3), Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":1}`)},
				{ID: id(4), Name: "refund_payment", Arguments: json.RawMessage(`"{order_id: A-1001"`)},
				{ID: id(5), Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"B-2"}`)},
				{ID: id(6), Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"C-3"}`)},
			}},
			tool(3, "refund_payment", agentd.StatusExpired, "The approval request expired before anyone decided, so the action was not performed.", "the approval request expired before anyone decided; nothing was done", ""),
			tool(4, "refund_payment", agentd.StatusRefused, `The call was not performed: invalid arguments for tool "refund_payment": must be a JSON object`, `The call was not performed: invalid arguments for tool "refund_payment": must be a JSON object`, ""),
			tool(5, "lookup_order", agentd.StatusCancelled, "The action was cancelled, so it was not performed.", "the run was cancelled; nothing was done", ""),
			tool(6, "lookup_order", agentd.StatusFailed, "The tool failed: exit status 3", "exit status 3", ""),
			{Role: agentd.ModelRoleUser, Content: "and now?"},
		},
	}
}

// (b) The history reaches the server in Chat Completions form: each
// assistant message with its tool_calls (arguments as the stored JSON
// text, a string argument included), then one role:tool message per call
// with the matching tool_call_id and the loop's text; agentd's 41-byte ids
// are mapped to the same id of at most 40 bytes in a call and its result.
func TestOpenAIHistoryMapping(t *testing.T) {
	srv := providertest.New(t, providertest.SSE(t, "testdata/text.sse"))
	m, _ := newTestModel(t, srv, "")
	req := historyRequest()
	if _, err := m.Generate(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	mustJSON(t, srv.Requests()[0].Body, &body)
	id := func(n int) string {
		full := historyID(n)
		mapped := provider.ToolCallID(full, 40)
		if len(full) != 41 || len(mapped) > 40 || mapped == full {
			t.Fatalf("id %q maps to %q", full, mapped)
		}
		return mapped
	}
	want := fmt.Sprintf(`[
	 {"role":"system","content":"sys"},
	 {"role":"user","content":"check and refund A-1001"},
	 {"role":"assistant","content":"On it.","tool_calls":[
	   {"id":%q,"type":"function","function":{"name":"lookup_order","arguments":"{\"order_id\":\"A-1001\"}"}},
	   {"id":%q,"type":"function","function":{"name":"refund_payment","arguments":"{\"order_id\":\"A-1001\",\"amount\":42.5}"}}]},
	 {"role":"tool","tool_call_id":%q,"content":"{\"status\":\"paid\",\"total\":42.5}"},
	 {"role":"tool","tool_call_id":%q,"content":"The user denied this action, so it was not performed. Reason: not this one"},
	 {"role":"assistant","tool_calls":[
	   {"id":%q,"type":"function","function":{"name":"refund_payment","arguments":"{\"order_id\":\"A-1001\",\"amount\":1}"}},
	   {"id":%q,"type":"function","function":{"name":"refund_payment","arguments":"\"{order_id: A-1001\""}},
	   {"id":%q,"type":"function","function":{"name":"lookup_order","arguments":"{\"order_id\":\"B-2\"}"}},
	   {"id":%q,"type":"function","function":{"name":"lookup_order","arguments":"{\"order_id\":\"C-3\"}"}}]},
	 {"role":"tool","tool_call_id":%q,"content":"The approval request expired before anyone decided, so the action was not performed."},
	 {"role":"tool","tool_call_id":%q,"content":"The call was not performed: invalid arguments for tool \"refund_payment\": must be a JSON object"},
	 {"role":"tool","tool_call_id":%q,"content":"The action was cancelled, so it was not performed."},
	 {"role":"tool","tool_call_id":%q,"content":"The tool failed: exit status 3"},
	 {"role":"user","content":"and now?"}]`,
		id(1), id(2), id(1), id(2), id(3), id(4), id(5), id(6), id(3), id(4), id(5), id(6))
	assertJSON(t, "messages", body.Messages, want)
}

// (c) 429 with Retry-After: 2, then success: exactly one retry after a
// wait of at least 2s (the injected sleep saw it), and the reply is the
// second one's.
func TestOpenAIRetryAfter429(t *testing.T) {
	srv := providertest.New(t,
		providertest.Error(429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, map[string]string{"Retry-After": "2"}),
		providertest.SSE(t, "testdata/text.sse"))
	m, sl := newTestModel(t, srv, "")
	resp, err := m.Generate(context.Background(), userOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Done, refunded." || len(srv.Requests()) != 2 {
		t.Fatalf("text %q after %d requests", resp.Text, len(srv.Requests()))
	}
	if got := sl.all(); len(got) != 1 || got[0] < 2*time.Second {
		t.Fatalf("waits %v, want one of at least 2s", got)
	}
}

// (c) A persistent 500 fails after max_attempts requests with the
// provider's message and status in the error, which the loop can show.
func TestOpenAIPersistent500(t *testing.T) {
	body := `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	srv := providertest.New(t, providertest.Error(500, body, nil), providertest.Error(500, body, nil), providertest.Error(500, body, nil))
	m, sl := newTestModel(t, srv, `,"max_attempts":3`)
	_, err := m.Generate(context.Background(), userOnly, nil)
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	if n := len(sl.all()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
	msg := agentd.ErrorMessage(err)
	if agentd.ErrorCode(err) != agentd.EUNAVAILABLE || !strings.HasPrefix(msg, "openai: The server had an error while processing your request. Sorry about that! (HTTP 500") || !strings.Contains(msg, "3 attempts") {
		t.Fatalf("error %q (%s)", msg, agentd.ErrorCode(err))
	}
}

// (c) A 400 is not retried; the provider's message is the error.
func TestOpenAIBadRequestNotRetried(t *testing.T) {
	srv := providertest.New(t, providertest.Error(400, `{"error":{"message":"Invalid schema for function 'refund_payment'","type":"invalid_request_error","param":"tools[1].function.parameters","code":"invalid_function_parameters"}}`, nil))
	m, sl := newTestModel(t, srv, "")
	_, err := m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); msg != "openai: Invalid schema for function 'refund_payment' (HTTP 400)" {
		t.Fatalf("error %q", msg)
	}
	if len(srv.Requests()) != 1 || len(sl.all()) != 0 {
		t.Fatalf("%d requests, %d waits", len(srv.Requests()), len(sl.all()))
	}
}

// An error body the SDK cannot decode (a string "error", as some compatible
// servers send, or a proxy's HTML) still yields the status and the text.
func TestOpenAIUndecodableErrorBody(t *testing.T) {
	srv := providertest.New(t,
		providertest.Error(404, `{"error":"model \"llama9\" not found, try pulling it first"}`, nil),
		providertest.Error(502, "<html><body>502 Bad Gateway</body></html>", map[string]string{"Content-Type": "text/html"}),
		providertest.Error(502, "<html><body>502 Bad Gateway</body></html>", map[string]string{"Content-Type": "text/html"}))
	m, _ := newTestModel(t, srv, `,"max_attempts":2`)
	_, err := m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); msg != `openai: model "llama9" not found, try pulling it first (HTTP 404)` {
		t.Fatalf("error %q", msg)
	}
	_, err = m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); !strings.HasPrefix(msg, "openai: <html><body>502 Bad Gateway</body></html> (HTTP 502") {
		t.Fatalf("error %q", msg)
	}
}

// A connection refused is retried, then reported without the key.
func TestOpenAIConnectionRefused(t *testing.T) {
	srv := providertest.New(t)
	url := srv.URL
	srv.Close()
	sl := &sleeps{}
	m, err := New(json.RawMessage(`{"provider":"openai","model":"m","base_url":"`+url+`/v1","max_attempts":2}`), env(map[string]string{"OPENAI_API_KEY": testKey}), WithSleep(sl.sleep))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), userOnly, nil)
	msg := agentd.ErrorMessage(err)
	if !strings.HasPrefix(msg, "openai: cannot reach the model server: ") || !strings.Contains(msg, "2 attempts") || len(sl.all()) != 1 {
		t.Fatalf("error %q, waits %v", msg, sl.all())
	}
	if strings.Contains(err.Error(), testKey) {
		t.Fatalf("key in %q", err)
	}
}

// (c) Cancelling the run's context mid-stream (the server sent one chunk
// and then stalls) makes Generate return promptly with the context's error,
// and the server sees the connection close.
func TestOpenAICancelMidStream(t *testing.T) {
	closed := make(chan struct{})
	first := strings.SplitAfter(readFile(t, "testdata/text.sse"), "\n\n")[1]
	srv := providertest.New(t, providertest.Reply{Handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, first)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(closed)
	}})
	m, _ := newTestModel(t, srv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, userOnly, func(d string) { got <- d; cancel() })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Generate did not return after cancel")
	}
	if d := <-got; d != "Done, " {
		t.Errorf("delta %q", d)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the connection close")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests", n)
	}
}

// A stream that breaks off after text was streamed is an error, not a
// silent retry that would show the text twice; one that breaks off before
// any text is retried.
func TestOpenAIBrokenStream(t *testing.T) {
	events := strings.SplitAfter(readFile(t, "testdata/text.sse"), "\n\n")
	cut := func(n int) providertest.Reply {
		return providertest.Reply{Handler: providertest.StreamEvents(strings.Join(events[:n], ""))}
	}
	t.Run("after text", func(t *testing.T) {
		srv := providertest.New(t, cut(2))
		m, _ := newTestModel(t, srv, "")
		var deltas []string
		_, err := m.Generate(context.Background(), userOnly, func(d string) { deltas = append(deltas, d) })
		if msg := agentd.ErrorMessage(err); !strings.Contains(msg, "before the response was complete") || !strings.Contains(msg, "not retried") {
			t.Fatalf("error %q", msg)
		}
		if len(srv.Requests()) != 1 || !reflect.DeepEqual(deltas, []string{"Done, "}) {
			t.Fatalf("%d requests, deltas %q", len(srv.Requests()), deltas)
		}
	})
	t.Run("before text", func(t *testing.T) {
		srv := providertest.New(t, cut(1), providertest.SSE(t, "testdata/text.sse"))
		m, _ := newTestModel(t, srv, "")
		var deltas []string
		resp, err := m.Generate(context.Background(), userOnly, func(d string) { deltas = append(deltas, d) })
		if err != nil || resp.Text != "Done, refunded." || len(srv.Requests()) != 2 || strings.Join(deltas, "") != resp.Text {
			t.Fatalf("resp %+v err %v after %d requests, deltas %q", resp, err, len(srv.Requests()), deltas)
		}
	})
	t.Run("error event", func(t *testing.T) {
		srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(events[0] + `data: {"error":{"message":"The model is overloaded","type":"server_error"}}` + "\n\n")})
		m, _ := newTestModel(t, srv, `,"max_attempts":1`)
		_, err := m.Generate(context.Background(), userOnly, nil)
		if msg := agentd.ErrorMessage(err); msg != "openai: error in the stream: The model is overloaded (gave up after 1 attempts)" {
			t.Fatalf("error %q", msg)
		}
	})
}

// Responses over the size limit end with a clear error.
func TestOpenAIResponseLimit(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	var sse strings.Builder
	for range 4 {
		fmt.Fprintf(&sse, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%q}}]},"finish_reason":null}]}`+"\n\n", big)
	}
	sse.WriteString("data: [DONE]\n\n")
	srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(sse.String())})
	m, _ := newTestModel(t, srv, "")
	_, err := m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); !strings.Contains(msg, "too large") || !strings.Contains(msg, "tool-call arguments") {
		t.Fatalf("error %q", msg)
	}
}

// (d) Configuration errors name the field or the environment variable, and
// no error ever contains the key.
func TestOpenAIConfigErrors(t *testing.T) {
	withKey := env(map[string]string{"OPENAI_API_KEY": testKey, "MY_KEY": testKey})
	noKey := env(nil)
	for _, tt := range []struct {
		raw    string
		getenv func(string) string
		want   string
	}{
		{`{"provider":"openai","model":"m","modle":"x"}`, withKey, `field "model.modle": unknown field`},
		{`{"provider":"openai"}`, withKey, `field "model.model": required`},
		{`{"provider":"openai","model":"m"}`, noKey, `field "model.api_key_env": the environment variable OPENAI_API_KEY is not set`},
		{`{"provider":"openai","model":"m","api_key_env":"MY_KEY"}`, noKey, `the environment variable MY_KEY is not set`},
		{`{"provider":"openai","model":"m","api_key_env":"MY KEY"}`, withKey, `field "model.api_key_env": must name an environment variable`},
		{`{"provider":"openai","model":"m","max_tokens":0}`, withKey, `field "model.max_tokens": must be at least 1`},
		{`{"provider":"openai","model":"m","max_tokens":"many"}`, withKey, `field "model.max_tokens": must be an integer`},
		{`{"provider":"openai","model":"m","temperature":2.5}`, withKey, `field "model.temperature": must be between 0 and 2`},
		{`{"provider":"openai","model":"m","max_attempts":0}`, withKey, `field "model.max_attempts": must be between 1 and 10`},
		{`{"provider":"openai","model":"m","timeout":"soon"}`, withKey, `field "model.timeout": time: invalid duration`},
		{`{"provider":"openai","model":"m","base_url":"localhost:11434"}`, withKey, `field "model.base_url": must be an http or https URL`},
		{`{"provider":"openai","model":"m","base_url":"http://u:` + testKey + `@h/v1"}`, withKey, `field "model.base_url": must not carry credentials`},
		{`{"provider":"anthropic","model":"m"}`, withKey, `field "model.provider": must be "openai"`},
	} {
		_, err := New(json.RawMessage(tt.raw), tt.getenv)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.raw, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: the key is in the error %q", tt.raw, err)
		}
	}
	// With a base_url (a local server) no key is needed, and none is sent.
	srv := providertest.New(t, providertest.SSE(t, "testdata/text.sse"))
	m, err := New(json.RawMessage(`{"provider":"openai","model":"llama3.1","base_url":"`+srv.URL+`/v1"}`), noKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), userOnly, nil); err != nil {
		t.Fatal(err)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization %q without a key", h)
	}
}

// (d) A provider error that echoes the key (a misbehaving proxy) reaches
// the loop with the key redacted, in the message and in the detail.
func TestOpenAIKeyNeverInErrors(t *testing.T) {
	srv := providertest.New(t, providertest.Error(401, `{"error":{"message":"Incorrect API key provided: `+testKey+`","type":"invalid_request_error","code":"invalid_api_key"}}`, nil))
	m, _ := newTestModel(t, srv, "")
	_, err := m.Generate(context.Background(), userOnly, nil)
	if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(agentd.ErrorMessage(err), testKey) || strings.Contains(fmt.Sprintf("%+v", err), testKey) {
		t.Fatalf("error %v", err)
	}
	if msg := agentd.ErrorMessage(err); msg != "openai: Incorrect API key provided: [redacted] (HTTP 401)" {
		t.Fatalf("message %q", msg)
	}
}

// The SDK reads no OPENAI_* variable: the configured base_url and key win
// and no organization header leaks in.
func TestOpenAIIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_ORG_ID", "org-leak")
	srv := providertest.New(t, providertest.SSE(t, "testdata/text.sse"))
	m, _ := newTestModel(t, srv, "")
	if _, err := m.Generate(context.Background(), userOnly, nil); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	if h.Get("Authorization") != "Bearer "+testKey || h.Get("OpenAI-Organization") != "" {
		t.Fatalf("headers %v", h)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// assertJSON compares got (any JSON-marshalable value) with the JSON text want.
func assertJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	mustJSON(t, gb, &g)
	mustJSON(t, []byte(want), &w)
	if !reflect.DeepEqual(g, w) {
		wb, _ := json.MarshalIndent(w, "", " ")
		gi, _ := json.MarshalIndent(g, "", " ")
		t.Errorf("%s:\n got %s\nwant %s", what, gi, wb)
	}
}

// A server that sends whole calls in one chunk without distinct indexes
// (all index 0, as some Ollama versions do) still yields separate calls,
// told apart by their ids.
func TestOpenAIWholeCallsWithoutIndexes(t *testing.T) {
	sse := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"llama3.1","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[` +
		`{"id":"call_a","index":0,"type":"function","function":{"name":"lookup_order","arguments":"{\"order_id\":\"A-1\"}"}},` +
		`{"id":"call_b","index":0,"type":"function","function":{"name":"refund_payment","arguments":"{\"order_id\":\"A-1\",\"amount\":1}"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"llama3.1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(sse)})
	m, _ := newTestModel(t, srv, "")
	resp, err := m.Generate(context.Background(), userOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "call_a" || resp.ToolCalls[0].Name != "lookup_order" ||
		resp.ToolCalls[1].ID != "call_b" || string(resp.ToolCalls[1].Arguments) != `{"order_id":"A-1","amount":1}` {
		t.Fatalf("calls %+v", resp.ToolCalls)
	}
}
