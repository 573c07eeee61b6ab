package anthropic

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
	"github.com/agentd-dev/agentd/model/internal/providertest"
)

const testKey = "sk-ant-test-0a1b2c3d4e5f-SECRET"

// newTestModel builds a Model against srv with the key in TEST_ANTHROPIC_KEY
// and a sleep that records its waits without waiting.
func newTestModel(t *testing.T, srv *providertest.Server, extra string) (*Model, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	raw := fmt.Sprintf(`{"provider":"anthropic","model":"claude-sonnet-4-5","base_url":%q,"api_key_env":"TEST_ANTHROPIC_KEY"%s}`, srv.URL, extra)
	m, err := New(json.RawMessage(raw), env(map[string]string{"TEST_ANTHROPIC_KEY": testKey}), WithSleep(sl.sleep))
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

// (a) A streamed reply with a text block and two tool_use blocks whose
// input arrives in input_json_delta fragments: both calls are assembled
// with their ids, names and exact input, the text deltas arrive in order
// (pings skipped), usage and stop_reason are set; the request has the
// system prompt as system, max_tokens, temperature and the tools with
// their input schemas.
func TestAnthropicStreamTextAndParallelToolCalls(t *testing.T) {
	srv := providertest.New(t, providertest.SSE(t, "testdata/text_and_two_calls.sse"))
	m, _ := newTestModel(t, srv, `,"temperature":0.3`)
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
		{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id": "A-1001"}`)},
		{ID: "toolu_01Bq8cM3r9XYkQ5pD2sZ7hWe", Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`)},
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	for i, c := range resp.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name || string(c.Arguments) != string(want[i].Arguments) {
			t.Errorf("call %d = {%s %s %s}, want {%s %s %s}", i, c.ID, c.Name, c.Arguments, want[i].ID, want[i].Name, want[i].Arguments)
		}
	}
	if resp.Usage != (agentd.Usage{InputTokens: 472, OutputTokens: 89}) || resp.StopReason != "tool_use" {
		t.Errorf("usage %+v stop %q", resp.Usage, resp.StopReason)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v1/messages" {
		t.Fatalf("requests %+v", reqs)
	}
	h := reqs[0].Header
	if h.Get("X-Api-Key") != testKey && h.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("no key in the headers %v", h)
	}
	if h.Get("Anthropic-Version") == "" {
		t.Errorf("no anthropic-version header")
	}
	var body map[string]any
	mustJSON(t, reqs[0].Body, &body)
	if body["model"] != "claude-sonnet-4-5" || body["stream"] != true || body["max_tokens"] != float64(DefaultMaxTokens) || body["temperature"] != 0.3 {
		t.Errorf("request %s", reqs[0].Body)
	}
	assertJSON(t, "system", body["system"], `[{"type":"text","text":"You are a test agent."}]`)
	assertJSON(t, "tools", body["tools"], `[
	 {"name":"lookup_order","description":"Look up an order.",
	  "input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}},
	 {"name":"refund_payment","description":"Refund a payment.",
	  "input_schema":{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"}},"required":["order_id","amount"],"additionalProperties":false}}]`)
	assertJSON(t, "messages", body["messages"], `[{"role":"user","content":[{"type":"text","text":"refund order A-1001"}]}]`)
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

// (b) The history reaches the server in Messages form: assistant content
// with a text block and tool_use blocks (agentd's ids unchanged, the input
// as stored, {} for arguments that were a JSON string); the results of one
// step grouped into ONE user message of tool_result blocks in call order,
// is_error on every status but completed; a user text after tool results
// joins that user message after them, so roles alternate.
func TestAnthropicHistoryMapping(t *testing.T) {
	srv := providertest.New(t, providertest.SSE(t, "testdata/text.sse"))
	m, _ := newTestModel(t, srv, "")
	if _, err := m.Generate(context.Background(), historyRequest(), nil); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	mustJSON(t, srv.Requests()[0].Body, &body)
	id := historyID
	want := fmt.Sprintf(`[
	 {"role":"user","content":[{"type":"text","text":"check and refund A-1001"}]},
	 {"role":"assistant","content":[
	   {"type":"text","text":"On it."},
	   {"type":"tool_use","id":%q,"name":"lookup_order","input":{"order_id":"A-1001"}},
	   {"type":"tool_use","id":%q,"name":"refund_payment","input":{"order_id":"A-1001","amount":42.5}}]},
	 {"role":"user","content":[
	   {"type":"tool_result","tool_use_id":%q,"content":[{"type":"text","text":"{\"status\":\"paid\",\"total\":42.5}"}]},
	   {"type":"tool_result","tool_use_id":%q,"is_error":true,"content":[{"type":"text","text":"The user denied this action, so it was not performed. Reason: not this one"}]}]},
	 {"role":"assistant","content":[
	   {"type":"tool_use","id":%q,"name":"refund_payment","input":{"order_id":"A-1001","amount":1}},
	   {"type":"tool_use","id":%q,"name":"refund_payment","input":{}},
	   {"type":"tool_use","id":%q,"name":"lookup_order","input":{"order_id":"B-2"}},
	   {"type":"tool_use","id":%q,"name":"lookup_order","input":{"order_id":"C-3"}}]},
	 {"role":"user","content":[
	   {"type":"tool_result","tool_use_id":%q,"is_error":true,"content":[{"type":"text","text":"The approval request expired before anyone decided, so the action was not performed."}]},
	   {"type":"tool_result","tool_use_id":%q,"is_error":true,"content":[{"type":"text","text":"The call was not performed: invalid arguments for tool \"refund_payment\": must be a JSON object"}]},
	   {"type":"tool_result","tool_use_id":%q,"is_error":true,"content":[{"type":"text","text":"The action was cancelled, so it was not performed."}]},
	   {"type":"tool_result","tool_use_id":%q,"is_error":true,"content":[{"type":"text","text":"The tool failed: exit status 3"}]},
	   {"type":"text","text":"and now?"}]}]`,
		id(1), id(2), id(1), id(2), id(3), id(4), id(5), id(6), id(3), id(4), id(5), id(6))
	assertJSON(t, "messages", body["messages"], want)
}

// (c) 429 with Retry-After: 2, then success: exactly one retry after a
// wait of at least 2s (the injected sleep saw it).
func TestAnthropicRetryAfter429(t *testing.T) {
	srv := providertest.New(t,
		providertest.Error(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, map[string]string{"Retry-After": "2"}),
		providertest.SSE(t, "testdata/text.sse"))
	m, sl := newTestModel(t, srv, "")
	resp, err := m.Generate(context.Background(), userOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Done, refunded." || resp.StopReason != "end_turn" || len(srv.Requests()) != 2 {
		t.Fatalf("resp %+v after %d requests", resp, len(srv.Requests()))
	}
	if got := sl.all(); len(got) != 1 || got[0] < 2*time.Second {
		t.Fatalf("waits %v, want one of at least 2s", got)
	}
}

// (c) A persistent 529 (overloaded) fails after max_attempts with the
// provider's message; a 400 is not retried.
func TestAnthropicPersistentErrorAndBadRequest(t *testing.T) {
	body := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	srv := providertest.New(t, providertest.Error(529, body, nil), providertest.Error(529, body, nil),
		providertest.Error(400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"}}`, nil))
	m, sl := newTestModel(t, srv, `,"max_attempts":2`)
	_, err := m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); msg != "anthropic: Overloaded (HTTP 529; gave up after 2 attempts)" || agentd.ErrorCode(err) != agentd.EUNAVAILABLE {
		t.Fatalf("error %q", msg)
	}
	if len(srv.Requests()) != 2 || len(sl.all()) != 1 {
		t.Fatalf("%d requests, %d waits", len(srv.Requests()), len(sl.all()))
	}
	_, err = m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); msg != "anthropic: messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$' (HTTP 400)" {
		t.Fatalf("error %q", msg)
	}
	if len(srv.Requests()) != 3 || len(sl.all()) != 1 {
		t.Fatalf("400 retried: %d requests, %d waits", len(srv.Requests()), len(sl.all()))
	}
}

// An "error" event in the stream before any text is retried when its type
// is transient (overloaded_error); after text it ends the step.
func TestAnthropicErrorEvent(t *testing.T) {
	events := strings.SplitAfter(readFile(t, "testdata/text.sse"), "\n\n")
	overloaded := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	t.Run("before text", func(t *testing.T) {
		srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(events[0] + overloaded)}, providertest.SSE(t, "testdata/text.sse"))
		m, sl := newTestModel(t, srv, "")
		resp, err := m.Generate(context.Background(), userOnly, nil)
		if err != nil || resp.Text != "Done, refunded." || len(srv.Requests()) != 2 || len(sl.all()) != 1 {
			t.Fatalf("resp %+v err %v, %d requests", resp, err, len(srv.Requests()))
		}
	})
	t.Run("after text", func(t *testing.T) {
		srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(strings.Join(events[:3], "") + overloaded)})
		m, _ := newTestModel(t, srv, "")
		var deltas []string
		_, err := m.Generate(context.Background(), userOnly, func(d string) { deltas = append(deltas, d) })
		msg := agentd.ErrorMessage(err)
		if msg != "anthropic: error in the stream: Overloaded (overloaded_error) (the response broke off after part of it was streamed, so it is not retried)" {
			t.Fatalf("error %q", msg)
		}
		if len(srv.Requests()) != 1 || !reflect.DeepEqual(deltas, []string{"Done, "}) {
			t.Fatalf("%d requests, deltas %q", len(srv.Requests()), deltas)
		}
	})
	t.Run("cut short", func(t *testing.T) {
		srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(strings.Join(events[:2], ""))}, providertest.SSE(t, "testdata/text.sse"))
		m, _ := newTestModel(t, srv, "")
		resp, err := m.Generate(context.Background(), userOnly, nil)
		if err != nil || resp.Text != "Done, refunded." || len(srv.Requests()) != 2 {
			t.Fatalf("resp %+v err %v, %d requests", resp, err, len(srv.Requests()))
		}
	})
}

// (c) Cancelling the context mid-stream makes Generate return promptly
// with the context's error, and the server sees the connection close.
func TestAnthropicCancelMidStream(t *testing.T) {
	events := strings.SplitAfter(readFile(t, "testdata/text.sse"), "\n\n")
	closed := make(chan struct{})
	srv := providertest.New(t, providertest.Reply{Handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, strings.Join(events[:3], ""))
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(closed)
	}})
	m, _ := newTestModel(t, srv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Generate(ctx, userOnly, func(string) { cancel() })
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
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not see the connection close")
	}
}

// Text over the size limit ends the step with a clear error.
func TestAnthropicResponseLimit(t *testing.T) {
	events := strings.SplitAfter(readFile(t, "testdata/text.sse"), "\n\n")
	var sse strings.Builder
	sse.WriteString(events[0] + events[1])
	big := strings.Repeat("y", 300<<10)
	for range 4 {
		fmt.Fprintf(&sse, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", big)
	}
	srv := providertest.New(t, providertest.Reply{Handler: providertest.StreamEvents(sse.String())})
	m, _ := newTestModel(t, srv, "")
	_, err := m.Generate(context.Background(), userOnly, nil)
	if msg := agentd.ErrorMessage(err); !strings.Contains(msg, "too large") || !strings.Contains(msg, "bytes of text") {
		t.Fatalf("error %q", msg)
	}
}

// (d) Configuration errors name the field or the environment variable, no
// error contains the key, and an error the server echoes the key in is
// redacted.
func TestAnthropicConfigErrorsAndKey(t *testing.T) {
	withKey := env(map[string]string{"ANTHROPIC_API_KEY": testKey})
	for _, tt := range []struct {
		raw    string
		getenv func(string) string
		want   string
	}{
		{`{"provider":"anthropic","model":"m","max_token":5}`, withKey, `field "model.max_token": unknown field`},
		{`{"provider":"anthropic","model":""}`, withKey, `field "model.model": required`},
		{`{"provider":"anthropic","model":"m"}`, env(nil), `field "model.api_key_env": the environment variable ANTHROPIC_API_KEY is not set`},
		{`{"provider":"anthropic","model":"m","temperature":1.5}`, withKey, `field "model.temperature": must be between 0 and 1`},
		{`{"provider":"anthropic","model":"m","timeout":"-1s"}`, withKey, `field "model.timeout": must be greater than zero`},
	} {
		_, err := New(json.RawMessage(tt.raw), tt.getenv)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: error %v, want %q", tt.raw, err, tt.want)
		}
	}

	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	srv := providertest.New(t, providertest.Error(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: `+testKey+`"}}`, nil))
	m, _ := newTestModel(t, srv, "")
	_, err := m.Generate(context.Background(), userOnly, nil)
	if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v", err), testKey) {
		t.Fatalf("error %v", err)
	}
	if msg := agentd.ErrorMessage(err); msg != "anthropic: invalid x-api-key: [redacted] (HTTP 401)" {
		t.Fatalf("message %q", msg)
	}
	// The configured key and base_url won over the SDK's environment.
	if h := srv.Requests()[0].Header; strings.Contains(fmt.Sprint(h), "from-the-environment") {
		t.Fatalf("the SDK read ANTHROPIC_API_KEY: %v", h)
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
