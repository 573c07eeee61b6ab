// Package script is a deterministic, offline model provider for demos and
// tests. A script is a list of rules; at each step the last message of the
// history picks the first rule that matches it — a user message by regular
// expression, a tool result by tool name and status — and that rule's reply
// is the model's answer: text, streamed in several deltas, and any number
// of tool calls (docs/tools.md, "The script model").
//
//	{"rules": [
//	  {"when": {"user": "(?i)refund"},
//	   "reply": {"text": "Let me refund that.",
//	             "tool_calls": [{"name": "refund_payment", "arguments": {"order_id": "A-1001", "amount": 42.5}}]}},
//	  {"when": {"tool_result": "refund_payment", "status": "denied"},
//	   "reply": {"text": "OK, I did not refund: {{reason}}"}}
//	]}
package script

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/agentd-dev/agentd"
)

// FallbackText is the reply when no rule matches.
const FallbackText = "I have nothing more to do here."

// Stop reasons of a response.
const (
	StopEndTurn = "end_turn"
	StopToolUse = "tool_use"
)

// Model is a loaded script. It is immutable and safe for concurrent use.
type Model struct {
	rules []rule
	name  string // "script", or "script:" and the script file's path as written
}

// ModelName is "script" for an inline script, "script:<path>" for a
// script file (its path as agent.json gives it): gen_ai.request.model.
func (m *Model) ModelName() string { return m.name }

var _ agentd.Model = (*Model)(nil)

type rule struct {
	user     *regexp.Regexp // set for a user rule
	toolName string         // set for a tool_result rule
	status   agentd.CallStatus
	// below, when positive, is a tool_result rule's results_below: the
	// rule matches only while the history holds fewer results of its tool.
	below int
	text  string
	calls []agentd.ModelToolCall
	every time.Duration // the pause before each delta after the first
}

// MaxDeltaInterval bounds a reply's delta_interval.
const MaxDeltaInterval = 10 * time.Second

// The files as written.
type (
	modelFile struct {
		Provider string          `json:"provider"`
		Script   json.RawMessage `json:"script"`
	}
	scriptFile struct {
		Rules []json.RawMessage `json:"rules"`
	}
	ruleFile struct {
		When  json.RawMessage `json:"when"`
		Reply json.RawMessage `json:"reply"`
	}
	whenFile struct {
		User       *string `json:"user"`
		ToolResult *string `json:"tool_result"`
		Status     *string `json:"status"`
		// ResultsBelow: the rule matches only while the history holds
		// fewer than this many results of the tool.
		ResultsBelow *int `json:"results_below"`
	}
	replyFile struct {
		Text          string            `json:"text"`
		ToolCalls     []json.RawMessage `json:"tool_calls"`
		DeltaInterval string            `json:"delta_interval"`
	}
	callFile struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
)

var resultStatuses = []agentd.CallStatus{
	agentd.StatusCompleted, agentd.StatusFailed, agentd.StatusDenied,
	agentd.StatusExpired, agentd.StatusRefused, agentd.StatusCancelled,
}

// New loads the script of an agent's "model" object:
// {"provider": "script", "script": {...}} with the script inline, or
// {"provider": "script", "script": "script.json"} with a file path relative
// to projectDir. Errors name the field, and the file when there is one.
func New(model json.RawMessage, projectDir string) (*Model, error) {
	var mf modelFile
	if err := strictjson.DecodeStrict(model, &mf, "model"); err != nil {
		return nil, err
	}
	if mf.Provider != "script" {
		return nil, strictjson.FieldErr("model.provider", `must be "script", got %q`, mf.Provider)
	}
	if strictjson.IsNull(mf.Script) {
		return nil, strictjson.FieldErr("model.script", `required: the script object, or the path of a script file`)
	}
	var path string
	if err := json.Unmarshal(mf.Script, &path); err == nil {
		if path == "" {
			return nil, strictjson.FieldErr("model.script", "empty path")
		}
		full := path
		if !filepath.IsAbs(full) {
			full = filepath.Join(projectDir, full)
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m, err := parse(data, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m.name = "script:" + path
		return m, nil
	}
	m, err := parse(mf.Script, "model.script")
	if err != nil {
		return nil, err
	}
	m.name = "script"
	return m, nil
}

func parse(data []byte, prefix string) (*Model, error) {
	var sf scriptFile
	if err := strictjson.DecodeStrict(data, &sf, prefix); err != nil {
		return nil, err
	}
	m := &Model{}
	for i, raw := range sf.Rules {
		r, err := parseRule(raw, strictjson.Join(prefix, fmt.Sprintf("rules[%d]", i)))
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

func parseRule(raw json.RawMessage, prefix string) (rule, error) {
	var rf ruleFile
	if err := strictjson.DecodeStrict(raw, &rf, prefix); err != nil {
		return rule{}, err
	}
	var r rule
	if err := parseWhen(rf.When, prefix+".when", &r); err != nil {
		return rule{}, err
	}
	if err := parseReply(rf.Reply, prefix+".reply", &r); err != nil {
		return rule{}, err
	}
	return r, nil
}

// parseWhen reads a rule's "when" (at field) into r.
func parseWhen(raw json.RawMessage, field string, r *rule) error {
	if strictjson.IsNull(raw) {
		return strictjson.FieldErr(field, `required: {"user": REGEXP} or {"tool_result": TOOL, "status"?: STATUS}`)
	}
	var w whenFile
	if err := strictjson.DecodeStrict(raw, &w, field); err != nil {
		return err
	}
	switch {
	case (w.User == nil) == (w.ToolResult == nil):
		return strictjson.FieldErr(field, `needs exactly one of "user" and "tool_result"`)
	case w.User != nil:
		if w.Status != nil {
			return strictjson.FieldErr(field+".status", `only applies to "tool_result"`)
		}
		if w.ResultsBelow != nil {
			return strictjson.FieldErr(field+".results_below", `only applies to "tool_result"`)
		}
		re, err := regexp.Compile(*w.User)
		if err != nil {
			return strictjson.FieldErr(field+".user", "%v", err)
		}
		r.user = re
	default:
		if *w.ToolResult == "" {
			return strictjson.FieldErr(field+".tool_result", "must name a tool")
		}
		r.toolName = *w.ToolResult
		if w.Status != nil {
			r.status = agentd.CallStatus(*w.Status)
			if !validStatus(r.status) {
				return strictjson.FieldErr(field+".status", "must be one of completed, failed, denied, expired, refused, cancelled, got %q", *w.Status)
			}
		}
		if w.ResultsBelow != nil {
			if *w.ResultsBelow < 1 {
				return strictjson.FieldErr(field+".results_below", "must be at least 1, got %d", *w.ResultsBelow)
			}
			r.below = *w.ResultsBelow
		}
	}
	return nil
}

// parseReply reads a rule's "reply" (at field) into r.
func parseReply(raw json.RawMessage, field string, r *rule) error {
	if strictjson.IsNull(raw) {
		return strictjson.FieldErr(field, `required: {"text"?: TEXT, "tool_calls"?: [...]}`)
	}
	var rp replyFile
	if err := strictjson.DecodeStrict(raw, &rp, field); err != nil {
		return err
	}
	if rp.Text == "" && len(rp.ToolCalls) == 0 {
		return strictjson.FieldErr(field, `needs "text" or "tool_calls"`)
	}
	r.text = rp.Text
	if rp.DeltaInterval != "" {
		d, err := time.ParseDuration(rp.DeltaInterval)
		if err != nil || d <= 0 || d > MaxDeltaInterval {
			return strictjson.FieldErr(field+".delta_interval", "must be a positive Go duration of at most %s, got %q", MaxDeltaInterval, rp.DeltaInterval)
		}
		r.every = d
	}
	for i, raw := range rp.ToolCalls {
		f := fmt.Sprintf("%s.tool_calls[%d]", field, i)
		var cf callFile
		if err := strictjson.DecodeStrict(raw, &cf, f); err != nil {
			return err
		}
		if cf.Name == "" {
			return strictjson.FieldErr(f+".name", "required")
		}
		args := json.RawMessage("{}")
		if !strictjson.IsNull(cf.Arguments) {
			var obj map[string]json.RawMessage
			if json.Unmarshal(cf.Arguments, &obj) != nil {
				return strictjson.FieldErr(f+".arguments", "must be an object")
			}
			args = compact(cf.Arguments)
		}
		r.calls = append(r.calls, agentd.ModelToolCall{Name: cf.Name, Arguments: args})
	}
	return nil
}

// stream sends text's deltas to onDelta, every apart after the first.
func stream(ctx context.Context, text string, every time.Duration, onDelta func(string)) error {
	var tick *time.Ticker
	if every > 0 {
		tick = time.NewTicker(every)
		defer tick.Stop()
	}
	for i, delta := range chunks(text) {
		if tick != nil && i > 0 {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if onDelta != nil {
			onDelta(delta)
		}
	}
	return ctx.Err()
}

func validStatus(s agentd.CallStatus) bool {
	for _, v := range resultStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Generate answers with the reply of the first rule that matches the last
// message of req.Messages, or FallbackText. Text is streamed through
// onDelta in several word-aligned deltas whose concatenation is the text.
// Tool calls get ids "script_<n>", n counting every tool call in the
// history. Usage counts words as tokens.
func (m *Model) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(delta string)) (*agentd.ModelResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var last agentd.ModelMessage
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1]
	}
	resp := &agentd.ModelResponse{Text: FallbackText, StopReason: StopEndTurn}
	var every time.Duration
	if r := m.match(req.Messages); r != nil {
		every = r.every
		resp.Text = fill(r.text, last, req.Tools)
		prior := 0
		for _, msg := range req.Messages {
			prior += len(msg.ToolCalls)
		}
		for i, c := range r.calls {
			resp.ToolCalls = append(resp.ToolCalls, agentd.ModelToolCall{
				ID:        fmt.Sprintf("script_%d", prior+i+1),
				Name:      c.Name,
				Arguments: append(json.RawMessage(nil), c.Arguments...),
			})
		}
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = StopToolUse
		}
	}
	if err := stream(ctx, resp.Text, every, onDelta); err != nil {
		return nil, err
	}
	resp.Usage = usage(req, resp)
	return resp, nil
}

// match returns the first rule that answers the last message of history,
// or nil.
func (m *Model) match(history []agentd.ModelMessage) *rule {
	if len(history) == 0 {
		return nil
	}
	msg := history[len(history)-1]
	for i := range m.rules {
		r := &m.rules[i]
		switch msg.Role {
		case agentd.ModelRoleUser:
			if r.user != nil && r.user.MatchString(msg.Content) {
				return r
			}
		case agentd.ModelRoleTool:
			if r.user == nil && r.toolName == msg.ToolName && (r.status == "" || r.status == msg.ToolStatus) &&
				(r.below == 0 || results(history, r.toolName) < r.below) {
				return r
			}
		}
	}
	return nil
}

// results counts the results of the tool name in history.
func results(history []agentd.ModelMessage, name string) int {
	n := 0
	for _, msg := range history {
		if msg.Role == agentd.ModelRoleTool && msg.ToolName == name {
			n++
		}
	}
	return n
}

// fill replaces {{status}}, {{result}} and {{reason}} with the fields of a
// tool result message (they are empty for other messages) and {{tools}}
// with the names of the tools the model was offered, comma-separated.
func fill(text string, msg agentd.ModelMessage, tools []agentd.ToolSpec) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	var status, result, reason string
	if msg.Role == agentd.ModelRoleTool {
		status, reason = string(msg.ToolStatus), msg.ToolReason
		if msg.ToolStatus == agentd.StatusCompleted {
			result = string(msg.ToolResult)
		}
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return strings.NewReplacer("{{status}}", status, "{{result}}", result, "{{reason}}", reason,
		"{{tools}}", strings.Join(names, ",")).Replace(text)
}

var wordPattern = regexp.MustCompile(`\S+`)

// chunks splits text on word boundaries into at least three deltas (when
// it has that many words) of at most four words each; their concatenation
// is text.
func chunks(text string) []string {
	if text == "" {
		return nil
	}
	starts := wordPattern.FindAllStringIndex(text, -1)
	if len(starts) <= 1 {
		return []string{text}
	}
	per := min(max(len(starts)/3, 1), 4)
	var out []string
	from := 0
	for i := per; i < len(starts); i += per {
		out = append(out, text[from:starts[i][0]])
		from = starts[i][0]
	}
	return append(out, text[from:])
}

func usage(req agentd.ModelRequest, resp *agentd.ModelResponse) agentd.Usage {
	in := words(req.System)
	for _, msg := range req.Messages {
		in += words(msg.Content) + words(string(msg.ToolResult)) + words(msg.ToolReason)
		for _, c := range msg.ToolCalls {
			in += 1 + words(string(c.Arguments))
		}
	}
	out := words(resp.Text)
	for _, c := range resp.ToolCalls {
		out += 1 + words(string(c.Arguments))
	}
	return agentd.Usage{InputTokens: int64(in), OutputTokens: int64(out)}
}

// words is len(strings.Fields(s)), without building the fields: usage
// counts the whole history at every step.
func words(s string) int {
	n, in := 0, false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			in = false
		case !in:
			in, n = true, n+1
		}
	}
	return n
}

// compact returns raw compacted.
func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
