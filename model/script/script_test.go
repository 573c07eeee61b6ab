package script

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

const testScript = `{"provider": "script", "script": {"rules": [
	{"when": {"user": "(?i)\\bboth\\b"}, "reply": {"text": "Checking and refunding.", "tool_calls": [
		{"name": "lookup_order", "arguments": {"order_id": "A-1001"}},
		{"name": "refund_payment", "arguments": {"order_id": "A-1001", "amount": 42.5}}]}},
	{"when": {"user": "(?i)refund"}, "reply": {"tool_calls": [{"name": "refund_payment", "arguments": { "order_id" : "A-1001", "amount": 42.5 }}]}},
	{"when": {"user": "(?i)order"}, "reply": {"text": "Let me look that order up for you.", "tool_calls": [{"name": "lookup_order"}]}},
	{"when": {"user": "^ping$"}, "reply": {"text": "pong"}},
	{"when": {"tool_result": "refund_payment", "status": "denied"}, "reply": {"text": "OK, I did not refund: {{reason}}"}},
	{"when": {"tool_result": "refund_payment", "status": "completed"}, "reply": {"text": "Refunded: {{result}} ({{status}})"}},
	{"when": {"tool_result": "refund_payment"}, "reply": {"text": "Refund {{status}}: {{reason}}{{result}}"}}
]}}`

func mustNew(t *testing.T, model string) *Model {
	t.Helper()
	m, err := New(json.RawMessage(model), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func user(text string) agentd.ModelMessage {
	return agentd.ModelMessage{Role: agentd.ModelRoleUser, Content: text}
}

func toolResult(name string, status agentd.CallStatus, result, reason string) agentd.ModelMessage {
	return agentd.ModelMessage{Role: agentd.ModelRoleTool, ToolCallID: "c1", ToolName: name, ToolStatus: status,
		ToolResult: json.RawMessage(result), ToolReason: reason}
}

func TestGenerate(t *testing.T) {
	m := mustNew(t, testScript)
	tests := []struct {
		name      string
		history   []agentd.ModelMessage
		wantText  string
		wantCalls []agentd.ModelToolCall
	}{
		{
			name:     "user regex, text and a call with default arguments",
			history:  []agentd.ModelMessage{user("Where is my ORDER?")},
			wantText: "Let me look that order up for you.",
			wantCalls: []agentd.ModelToolCall{
				{ID: "script_1", Name: "lookup_order", Arguments: json.RawMessage(`{}`)},
			},
		},
		{
			name:      "first matching rule wins, arguments compacted",
			history:   []agentd.ModelMessage{user("please refund order A-1001")},
			wantText:  "",
			wantCalls: []agentd.ModelToolCall{{ID: "script_1", Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`)}},
		},
		{
			name:     "parallel calls in one reply",
			history:  []agentd.ModelMessage{user("do both please")},
			wantText: "Checking and refunding.",
			wantCalls: []agentd.ModelToolCall{
				{ID: "script_1", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"A-1001"}`)},
				{ID: "script_2", Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`)},
			},
		},
		{
			name: "ids count the calls already in the history",
			history: []agentd.ModelMessage{
				user("order?"),
				{Role: agentd.ModelRoleAssistant, ToolCalls: []agentd.ModelToolCall{{ID: "script_1", Name: "lookup_order"}, {ID: "script_2", Name: "lookup_order"}}},
				toolResult("lookup_order", agentd.StatusCompleted, `{}`, ""),
				toolResult("lookup_order", agentd.StatusCompleted, `{}`, ""),
				user("and the order again"),
			},
			wantText:  "Let me look that order up for you.",
			wantCalls: []agentd.ModelToolCall{{ID: "script_3", Name: "lookup_order", Arguments: json.RawMessage(`{}`)}},
		},
		{
			name:     "tool result with status, reason filled",
			history:  []agentd.ModelMessage{user("refund"), toolResult("refund_payment", agentd.StatusDenied, "", "the customer changed their mind")},
			wantText: "OK, I did not refund: the customer changed their mind",
		},
		{
			name:     "completed result and status filled",
			history:  []agentd.ModelMessage{user("refund"), toolResult("refund_payment", agentd.StatusCompleted, `{"refund_id":"R-1"}`, "")},
			wantText: `Refunded: {"refund_id":"R-1"} (completed)`,
		},
		{
			name:     "rule without status matches any status; result empty unless completed",
			history:  []agentd.ModelMessage{user("refund"), toolResult("refund_payment", agentd.StatusExpired, `{"ignored":true}`, "approval expired")},
			wantText: "Refund expired: approval expired",
		},
		{
			name:     "the last message decides, not earlier ones",
			history:  []agentd.ModelMessage{user("refund"), toolResult("lookup_order", agentd.StatusCompleted, `{}`, "")},
			wantText: FallbackText,
		},
		{
			name:     "tool rules do not match user text",
			history:  []agentd.ModelMessage{user("refund_payment")},
			wantText: "",
			wantCalls: []agentd.ModelToolCall{
				{ID: "script_1", Name: "refund_payment", Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`)},
			},
		},
		{
			name:     "anchored regex",
			history:  []agentd.ModelMessage{user("ping pong")},
			wantText: FallbackText,
		},
		{
			name:     "no match",
			history:  []agentd.ModelMessage{user("what's the weather?")},
			wantText: FallbackText,
		},
		{
			name:     "empty history",
			wantText: FallbackText,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deltas []string
			resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: tt.history}, func(d string) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tt.wantText {
				t.Errorf("text = %q, want %q", resp.Text, tt.wantText)
			}
			if !reflect.DeepEqual(resp.ToolCalls, tt.wantCalls) {
				t.Errorf("tool calls = %s, want %s", dump(resp.ToolCalls), dump(tt.wantCalls))
			}
			if got := strings.Join(deltas, ""); got != resp.Text {
				t.Errorf("deltas %q join to %q, want the text %q", deltas, got, resp.Text)
			}
			wantStop := StopEndTurn
			if len(tt.wantCalls) > 0 {
				wantStop = StopToolUse
			}
			if resp.StopReason != wantStop {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, wantStop)
			}
			if resp.Usage.OutputTokens != int64(words(resp.Text)+countCallTokens(resp.ToolCalls)) {
				t.Errorf("output tokens = %d", resp.Usage.OutputTokens)
			}
		})
	}
}

func countCallTokens(calls []agentd.ModelToolCall) int {
	n := 0
	for _, c := range calls {
		n += 1 + words(string(c.Arguments))
	}
	return n
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGenerateStreamsSeveralDeltas(t *testing.T) {
	tests := []struct {
		text      string
		minDeltas int
	}{
		{"pong", 1},
		{"two words", 2},
		{"exactly three words", 3},
		{"  leading and trailing spaces, then\nnewlines\n", 3},
		{strings.Repeat("word ", 100), 20},
	}
	for _, tt := range tests {
		rules, _ := json.Marshal(map[string]any{"provider": "script", "script": map[string]any{"rules": []any{
			map[string]any{"when": map[string]any{"user": ""}, "reply": map[string]any{"text": tt.text}},
		}}})
		m := mustNew(t, string(rules))
		var deltas []string
		resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: []agentd.ModelMessage{user("x")}}, func(d string) { deltas = append(deltas, d) })
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(deltas, "") != tt.text || resp.Text != tt.text {
			t.Errorf("%q: deltas %q, text %q", tt.text, deltas, resp.Text)
		}
		if len(deltas) < tt.minDeltas {
			t.Errorf("%q: %d deltas, want at least %d", tt.text, len(deltas), tt.minDeltas)
		}
		for _, d := range deltas[:len(deltas)-1] {
			if words(d) > 4 || strings.TrimSpace(d) == "" {
				t.Errorf("%q: delta %q is not 1 to 4 whole words", tt.text, d)
			}
		}
	}
}

func TestGenerateRespectsCancellation(t *testing.T) {
	m := mustNew(t, testScript)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := m.Generate(ctx, agentd.ModelRequest{Messages: []agentd.ModelMessage{user("order")}}, func(string) { called = true })
	if err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if called {
		t.Error("streamed after cancellation")
	}

	// Cancelled mid-stream: the step fails rather than returning a partial text.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	n := 0
	_, err = m.Generate(ctx, agentd.ModelRequest{Messages: []agentd.ModelMessage{user("order")}}, func(string) {
		n++
		cancel()
	})
	if err != context.Canceled || n != 1 {
		t.Errorf("err = %v after %d deltas, want context.Canceled after 1", err, n)
	}
}

func TestGenerateUsageIsDeterministic(t *testing.T) {
	m := mustNew(t, testScript)
	req := agentd.ModelRequest{System: "You are a helpful agent.", Messages: []agentd.ModelMessage{user("refund my order please")}}
	a, _ := m.Generate(context.Background(), req, nil)
	b, _ := m.Generate(context.Background(), req, nil)
	if a.Usage != b.Usage {
		t.Errorf("usage differs between identical calls: %+v vs %+v", a.Usage, b.Usage)
	}
	if a.Usage.InputTokens != 9 { // 5 system words + 4 user words
		t.Errorf("input tokens = %d, want 9", a.Usage.InputTokens)
	}
}

func TestGenerateDoesNotShareArguments(t *testing.T) {
	m := mustNew(t, testScript)
	req := agentd.ModelRequest{Messages: []agentd.ModelMessage{user("refund")}}
	a, _ := m.Generate(context.Background(), req, nil)
	a.ToolCalls[0].Arguments[2] = 'X'
	b, _ := m.Generate(context.Background(), req, nil)
	if string(b.ToolCalls[0].Arguments) != `{"order_id":"A-1001","amount":42.5}` {
		t.Errorf("a caller's edit leaked into the script: %s", b.ToolCalls[0].Arguments)
	}
}

func TestNewFromFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"rules": [{"when": {"user": "hi"}, "reply": {"text": "hello there"}}]}`
	if err := os.WriteFile(filepath.Join(dir, "scripts", "s.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := New(json.RawMessage(`{"provider": "script", "script": "scripts/s.json"}`), dir)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: []agentd.ModelMessage{user("hi")}}, nil)
	if err != nil || resp.Text != "hello there" {
		t.Errorf("Generate = %+v, %v", resp, err)
	}

	bad := "{\"rules\": [\n  {\"when\": {\"user\": \"(\"}, \"reply\": {\"text\": \"x\"}}\n]}"
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(json.RawMessage(`{"provider": "script", "script": "bad.json"}`), dir)
	want := "bad.json: field \"rules[0].when.user\": error parsing regexp: missing closing ): `(`"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}

	_, err = New(json.RawMessage(`{"provider": "script", "script": "missing.json"}`), dir)
	if err == nil || !strings.HasPrefix(err.Error(), "missing.json: open ") {
		t.Errorf("err = %v, want it to name missing.json", err)
	}

	if err := os.WriteFile(filepath.Join(dir, "syntax.json"), []byte("{\"rules\": [\n  {\"when\": }\n]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(json.RawMessage(`{"provider": "script", "script": "syntax.json"}`), dir)
	if err == nil || !strings.HasPrefix(err.Error(), "syntax.json: line 2, column 12: invalid character '}'") {
		t.Errorf("err = %v, want the line and column", err)
	}
}

func TestNewErrors(t *testing.T) {
	rule := func(r string) string { return `{"provider": "script", "script": {"rules": [` + r + `]}}` }
	tests := []struct {
		name, model, want string
	}{
		{"not an object", `[]`, `field "model": must be an object`},
		{"wrong provider", `{"provider": "openai", "script": {"rules": []}}`, `field "model.provider": must be "script", got "openai"`},
		{"unknown model field", `{"provider": "script", "script": {"rules": []}, "temperature": 0}`, `field "model.temperature": unknown field`},
		{"no script", `{"provider": "script"}`, `field "model.script": required`},
		{"empty path", `{"provider": "script", "script": ""}`, `field "model.script": empty path`},
		{"script not object", `{"provider": "script", "script": 5}`, `field "model.script": must be an object`},
		{"unknown script field", `{"provider": "script", "script": {"rule": []}}`, `field "model.script.rule": unknown field`},
		{"rules type", `{"provider": "script", "script": {"rules": {}}}`, `field "model.script.rules": must be an array, got object`},
		{"no when", rule(`{"reply": {"text": "x"}}`), `field "model.script.rules[0].when": required`},
		{"no reply", rule(`{"when": {"user": "x"}}`), `field "model.script.rules[0].reply": required`},
		{"both user and tool_result", rule(`{"when": {"user": "x", "tool_result": "t"}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when": needs exactly one of "user" and "tool_result"`},
		{"neither", rule(`{"when": {}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when": needs exactly one of "user" and "tool_result"`},
		{"bad regex", rule(`{"when": {"user": "[a-"}, "reply": {"text": "x"}}`), "field \"model.script.rules[0].when.user\": error parsing regexp: missing closing ]: `[a-`"},
		{"status on user rule", rule(`{"when": {"user": "x", "status": "denied"}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.status": only applies to "tool_result"`},
		{"bad status", rule(`{"when": {"tool_result": "t", "status": "approved"}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.status": must be one of completed, failed, denied, expired, refused, cancelled, got "approved"`},
		{"empty tool name", rule(`{"when": {"tool_result": ""}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.tool_result": must name a tool`},
		{"unknown when field", rule(`{"when": {"assistant": "x"}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.assistant": unknown field`},
		{"empty reply", rule(`{"when": {"user": "x"}, "reply": {}}`), `field "model.script.rules[0].reply": needs "text" or "tool_calls"`},
		{"bad delta interval", rule(`{"when": {"user": "x"}, "reply": {"text": "x", "delta_interval": "soon"}}`), `field "model.script.rules[0].reply.delta_interval": must be a positive Go duration of at most 10s, got "soon"`},
		{"negative delta interval", rule(`{"when": {"user": "x"}, "reply": {"text": "x", "delta_interval": "-1ms"}}`), `field "model.script.rules[0].reply.delta_interval": must be a positive Go duration of at most 10s, got "-1ms"`},
		{"long delta interval", rule(`{"when": {"user": "x"}, "reply": {"text": "x", "delta_interval": "1m"}}`), `field "model.script.rules[0].reply.delta_interval": must be a positive Go duration of at most 10s, got "1m"`},
		{"empty text and calls", rule(`{"when": {"user": "x"}, "reply": {"text": "", "tool_calls": []}}`), `field "model.script.rules[0].reply": needs "text" or "tool_calls"`},
		{"call without name", rule(`{"when": {"user": "x"}, "reply": {"tool_calls": [{"arguments": {}}]}}`), `field "model.script.rules[0].reply.tool_calls[0].name": required`},
		{"arguments not object", rule(`{"when": {"user": "x"}, "reply": {"tool_calls": [{"name": "t", "arguments": [1]}]}}`), `field "model.script.rules[0].reply.tool_calls[0].arguments": must be an object`},
		{"unknown call field", rule(`{"when": {"user": "x"}, "reply": {"tool_calls": [{"name": "t", "args": {}}]}}`), `field "model.script.rules[0].reply.tool_calls[0].args": unknown field`},
		{"results_below on user rule", rule(`{"when": {"user": "x", "results_below": 3}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.results_below": only applies to "tool_result"`},
		{"results_below zero", rule(`{"when": {"tool_result": "t", "results_below": 0}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.results_below": must be at least 1, got 0`},
		{"results_below not a number", rule(`{"when": {"tool_result": "t", "results_below": "3"}, "reply": {"text": "x"}}`), `field "model.script.rules[0].when.results_below": must be an integer, got string`},
		{"second rule", rule(`{"when": {"user": "x"}, "reply": {"text": "x"}}, {"when": {"user": "x"}, "reply": {"text": 1}}`), `field "model.script.rules[1].reply.text": must be a string, got number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(json.RawMessage(tt.model), t.TempDir())
			if err == nil {
				t.Fatalf("New succeeded, want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %q\nwant prefix %q", err, tt.want)
			}
		})
	}
}

// TestResultsBelow: a rule with results_below calls its tool again while
// the history holds fewer results of that tool than the bound, counting
// only that tool's results, and the next rule answers once it holds as
// many.
func TestResultsBelow(t *testing.T) {
	m := mustNew(t, `{"provider": "script", "script": {"rules": [
		{"when": {"user": "go"}, "reply": {"tool_calls": [{"name": "tick"}]}},
		{"when": {"tool_result": "tick", "results_below": 3}, "reply": {"tool_calls": [{"name": "tick"}]}},
		{"when": {"tool_result": "tick"}, "reply": {"text": "ticked enough"}}
	]}}`)
	// Results of another tool do not count toward tick's bound.
	history := []agentd.ModelMessage{toolResult("other", agentd.StatusCompleted, `1`, ""),
		toolResult("other", agentd.StatusCompleted, `2`, ""), user("go")}
	var texts []string
	for step := 1; step <= 10; step++ {
		resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: history}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) == 0 {
			texts = append(texts, resp.Text)
			break
		}
		history = append(history, agentd.ModelMessage{Role: agentd.ModelRoleAssistant, ToolCalls: resp.ToolCalls},
			toolResult("tick", agentd.StatusCompleted, `{}`, ""))
	}
	ticks := 0
	for _, msg := range history {
		if msg.ToolName == "tick" {
			ticks++
		}
	}
	if ticks != 3 || !reflect.DeepEqual(texts, []string{"ticked enough"}) {
		t.Errorf("after %d tick results the model said %q; want 3 results, then \"ticked enough\"", ticks, texts)
	}
}

func TestModelIsConcurrencySafe(t *testing.T) {
	m := mustNew(t, testScript)
	done := make(chan string)
	for range 8 {
		go func() {
			resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: []agentd.ModelMessage{user("both")}}, func(string) {})
			if err != nil {
				done <- err.Error()
				return
			}
			done <- dump(resp.ToolCalls)
		}()
	}
	first := <-done
	for range 7 {
		if got := <-done; got != first {
			t.Errorf("concurrent results differ: %s vs %s", got, first)
		}
	}
}

// TestGeneratePacedDeltas: a reply with delta_interval streams the same
// deltas, and a cancellation during a pause ends Generate at once with the
// context's error and no more deltas (a 10 s pause would hang the test).
func TestGeneratePacedDeltas(t *testing.T) {
	m := mustNew(t, `{"provider": "script", "script": {"rules": [
		{"when": {"user": "fast"}, "reply": {"text": "one two three four", "delta_interval": "1ms"}},
		{"when": {"user": "slow"}, "reply": {"text": "one two three four", "delta_interval": "10s"}}]}}`)
	var got []string
	resp, err := m.Generate(context.Background(), agentd.ModelRequest{Messages: []agentd.ModelMessage{{Role: agentd.RoleUser, Content: "fast"}}},
		func(d string) { got = append(got, d) })
	if err != nil || strings.Join(got, "") != "one two three four" || len(got) < 3 || resp.Text != "one two three four" {
		t.Fatalf("paced Generate = %v, %v, deltas %q", resp, err, got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	_, err = m.Generate(ctx, agentd.ModelRequest{Messages: []agentd.ModelMessage{{Role: agentd.RoleUser, Content: "slow"}}},
		func(string) { n++; cancel() })
	if err != context.Canceled || n != 1 {
		t.Fatalf("cancelled during a pause: %v after %d deltas, want context.Canceled after 1", err, n)
	}
}

// words counts as strings.Fields splits, Unicode spaces and invalid UTF-8
// included.
func TestWordsIsFieldsCount(t *testing.T) {
	for _, s := range []string{"", " ", "one", " two  words ", "a\tb\nc\u00a0d\u2003e", "\xff \xfe\xfd x", `{"order_id": "A-1001", "amount": 42.5}`} {
		if got, want := words(s), len(strings.Fields(s)); got != want {
			t.Errorf("words(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestModelName: an inline script names itself "script", a script file
// "script:" and its path as agent.json gives it (gen_ai.request.model).
func TestModelName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.json"), []byte(`{"rules":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		`{"provider":"script","script":{"rules":[]}}`: "script",
		`{"provider":"script","script":"rules.json"}`: "script:rules.json",
	} {
		m, err := New(json.RawMessage(raw), dir)
		if err != nil || m.ModelName() != want || agentd.ModelName(m) != want {
			t.Errorf("%s: %v, %v; want %q", raw, m, err, want)
		}
	}
}
