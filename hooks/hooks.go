// Package hooks loads and runs a project's hooks (SPEC §4.3): a folder
// hooks/<name>/ with a hook.json that names the points it runs at
// (preToolUse, postToolUse), an RE2 matcher on the whole tool name and a
// command. A hook runs as command tools run — the same runner
// (process.Run): a minimal environment, the whole JSON request as its
// stdin, killed with the server — and answers on stdout. Set implements
// toolset.Hooks; package server wires it (docs/hooks.md).
package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/process"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// Hook points.
const (
	PreToolUse  = "preToolUse"
	PostToolUse = "postToolUse"
)

// Limits and defaults of a hook.
const (
	DefaultTimeout = 5 * time.Second
	maxTimeout     = 10 * time.Minute
	// maxReason bounds the reason a hook gives.
	maxReason = 1 << 10
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Hook is one loaded hook. It is immutable and safe for concurrent use.
type Hook struct {
	Name string
	Pre  bool // runs at preToolUse
	Post bool // runs at postToolUse
	// Matcher matches the whole tool name; nil matches every tool.
	Matcher *regexp.Regexp
	Command []string
	Env     []string
	Timeout time.Duration
	// FailOpen: a failing hook allows (fail_policy "open"); otherwise it
	// denies.
	FailOpen bool
	// Dir is the hook's folder; the command runs there.
	Dir string
}

type hookFile struct {
	Points     []string `json:"points"`
	Matcher    *string  `json:"matcher"`
	Command    []string `json:"command"`
	Env        []string `json:"env"`
	TimeoutMS  *int     `json:"timeout_ms"`
	FailPolicy *string  `json:"fail_policy"`
}

// LoadDir loads every hooks/<name>/hook.json under dir (a missing folder
// is no hooks), sorted by name: the order they run in. Errors name the
// file and the field.
func LoadDir(dir string) ([]*Hook, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	var out []*Hook
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		file := filepath.Join("hooks", e.Name(), "hook.json")
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "hook.json"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: not found (every folder under hooks/ is a hook)", file)
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		h, err := parse(e.Name(), data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		h.Dir = filepath.Join(dir, e.Name())
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func parse(name string, data []byte) (*Hook, error) {
	if !namePattern.MatchString(name) {
		return nil, fmt.Errorf("the folder name %q must be 1 to 64 letters, digits, '_' or '-'", name)
	}
	var f hookFile
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return nil, err
	}
	h := &Hook{Name: name, Command: f.Command, Env: f.Env, Timeout: DefaultTimeout}
	if len(f.Points) == 0 {
		return nil, strictjson.FieldErr("points", `required: ["preToolUse"], ["postToolUse"] or both`)
	}
	for i, p := range f.Points {
		switch p {
		case PreToolUse:
			h.Pre = true
		case PostToolUse:
			h.Post = true
		default:
			return nil, strictjson.FieldErr(fmt.Sprintf("points[%d]", i), "must be %q or %q, got %q", PreToolUse, PostToolUse, p)
		}
	}
	if f.Matcher != nil {
		re, err := regexp.Compile(`^(?:` + *f.Matcher + `)$`)
		if err != nil {
			return nil, strictjson.FieldErr("matcher", "not an RE2 expression: %v", err)
		}
		h.Matcher = re
	}
	if len(f.Command) == 0 || f.Command[0] == "" {
		return nil, strictjson.FieldErr("command", `required: the argv, e.g. ["./check.sh"]`)
	}
	if f.TimeoutMS != nil {
		d := time.Duration(*f.TimeoutMS) * time.Millisecond
		if d <= 0 || d > maxTimeout {
			return nil, strictjson.FieldErr("timeout_ms", "must be between 1 and %d, got %d", maxTimeout.Milliseconds(), *f.TimeoutMS)
		}
		h.Timeout = d
	}
	if f.FailPolicy != nil {
		switch *f.FailPolicy {
		case "closed":
		case "open":
			h.FailOpen = true
		default:
			return nil, strictjson.FieldErr("fail_policy", `must be "closed" or "open", got %q`, *f.FailPolicy)
		}
	}
	return h, nil
}

// matches reports whether the hook runs for a tool.
func (h *Hook) matches(tool string) bool { return h.Matcher == nil || h.Matcher.MatchString(tool) }

// Output is a preToolUse hook's answer on stdout.
type Output struct {
	Verdict string `json:"decision"`
	Reason  string `json:"reason,omitempty"`
	// UpdatedArguments replace the arguments when set.
	UpdatedArguments json.RawMessage `json:"updated_arguments,omitempty"`
}

// DecodeOutput reads a preToolUse hook's stdout: empty (or only white
// space) is allow with no change; otherwise exactly one JSON object
// {"decision": "allow"|"deny"|"ask", "reason"?, "updated_arguments"?: {…}}
// with no other key. Ambiguous JSON is refused as package strictjson
// refuses it everywhere (a key twice, keys that differ only by case, at any
// depth; invalid UTF-8), and keys must be spelled exactly so: which
// decision a hook gave never depends on which reader looks. Reasons longer
// than 1 KiB are cut.
func DecodeOutput(stdout []byte) (Output, error) {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return Output{Verdict: confirm.HookAllow}, nil
	}
	if err := strictjson.CheckKeys(trimmed); err != nil {
		return Output{}, fmt.Errorf("the output is not a decision object: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil || fields == nil {
		return Output{}, errors.New("the output is not a decision object: it must be one JSON object")
	}
	var out Output
	for k, v := range fields {
		var err error
		switch k {
		case "decision":
			err = json.Unmarshal(v, &out.Verdict)
		case "reason":
			err = json.Unmarshal(v, &out.Reason)
		case "updated_arguments":
			out.UpdatedArguments, err = objectArg(v)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return Output{}, fmt.Errorf("the output's %q: %v", k, err)
		}
	}
	switch out.Verdict {
	case confirm.HookAllow, confirm.HookAsk, confirm.HookDeny:
	case "":
		return Output{}, errors.New(`the output has no "decision"`)
	default:
		return Output{}, fmt.Errorf(`"decision" must be "allow", "deny" or "ask", got %q`, out.Verdict)
	}
	out.Reason = agentd.TruncateUTF8(out.Reason, maxReason)
	return out, nil
}

// objectArg is updated_arguments compacted: nil for null, an error for
// anything but an object.
func objectArg(v json.RawMessage) (json.RawMessage, error) {
	if strictjson.IsNull(v) {
		return nil, nil
	}
	if v[0] != '{' {
		return nil, errors.New("must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Set is a project's hooks, in name order (toolset.Hooks).
type Set struct {
	hooks []*Hook
	log   zerolog.Logger
}

var _ toolset.Hooks = (*Set)(nil)

// New returns the set of hooks; log gets hooks that fail open and
// postToolUse failures.
func New(hooks []*Hook, log zerolog.Logger) *Set { return &Set{hooks: hooks, log: log} }

// input is a hook's stdin (SPEC §4.3).
type input struct {
	Point          string          `json:"point"`
	ToolCallID     string          `json:"tool_call_id"`
	ToolName       string          `json:"tool_name"`
	ServerID       string          `json:"server_id"`
	Arguments      json.RawMessage `json:"arguments"`
	ConversationID string          `json:"conversation_id"`
	RunID          string          `json:"run_id"`
	Tier           agentd.Tier     `json:"tier"`
	Phase          string          `json:"phase"`
	// postToolUse only:
	Status agentd.CallStatus `json:"status,omitempty"`
	Result json.RawMessage   `json:"result,omitempty"`
	Error  string            `json:"error,omitempty"`
}

func newInput(point string, c toolset.HookCall) input {
	return input{Point: point, ToolCallID: c.ToolCallID, ToolName: c.ToolName, ServerID: c.ServerID, Arguments: c.Arguments,
		ConversationID: c.ConversationID, RunID: c.RunID, Tier: c.Tier, Phase: c.Phase}
}

// run runs one hook with in as its stdin and returns its stdout.
func (h *Hook) run(ctx context.Context, in input) ([]byte, error) {
	payload, err := process.StdinJSON(in)
	if err != nil {
		return nil, err
	}
	return process.Run(ctx, process.Spec{Name: fmt.Sprintf("hook %q", h.Name), Command: h.Command, Dir: h.Dir,
		Env: h.Env, Stdin: payload, Timeout: h.Timeout})
}

// PreToolUse runs the preToolUse hooks that match the tool, in name order,
// each given the arguments as the hooks before it rewrote them, and
// combines their answers: deny (which ends the chain) > ask > allow. A
// hook that fails — exits non-zero, times out, or prints something that is
// not a decision — denies, with a reason naming it, unless its fail_policy
// is open (then it allows, and the failure is logged). Nil when no hook
// matched.
func (s *Set) PreToolUse(ctx context.Context, c toolset.HookCall) *confirm.HookVerdict {
	var v *confirm.HookVerdict
	args := c.Arguments
	for _, h := range s.hooks {
		if !h.Pre || !h.matches(c.ToolName) {
			continue
		}
		if v == nil {
			v = &confirm.HookVerdict{Verdict: confirm.HookAllow}
		}
		in := newInput(PreToolUse, c)
		in.Arguments = args
		stdout, err := h.run(ctx, in)
		var out Output
		if err == nil {
			out, err = DecodeOutput(stdout)
			if err != nil {
				err = fmt.Errorf("hook %q: %v", h.Name, err)
			}
		}
		if err != nil {
			if h.FailOpen {
				s.log.Warn().Err(err).Str("hook", h.Name).Str("tool_call_id", c.ToolCallID).Msg("hook failed; fail_policy open allows the call")
				continue
			}
			return &confirm.HookVerdict{Verdict: confirm.HookDeny, Hook: h.Name,
				Reason: fmt.Sprintf("the hook failed and its fail_policy is closed (%v)", err)}
		}
		switch out.Verdict {
		case confirm.HookDeny:
			return &confirm.HookVerdict{Verdict: confirm.HookDeny, Hook: h.Name, Reason: out.Reason}
		case confirm.HookAsk:
			if v.Verdict != confirm.HookAsk {
				v.Verdict, v.Hook, v.Reason = confirm.HookAsk, h.Name, out.Reason
			}
		}
		if out.UpdatedArguments != nil {
			args = out.UpdatedArguments
			v.Arguments = args
			v.RewrittenBy = append(v.RewrittenBy, h.Name)
		}
	}
	return v
}

// PostToolUse runs the postToolUse hooks that match the tool with the
// call's outcome; their output is ignored and their failures returned
// (joined) for the log.
func (s *Set) PostToolUse(ctx context.Context, c toolset.HookCall, status agentd.CallStatus, result json.RawMessage, errText string) error {
	var errs []error
	for _, h := range s.hooks {
		if !h.Post || !h.matches(c.ToolName) {
			continue
		}
		in := newInput(PostToolUse, c)
		in.Status, in.Error = status, errText
		if status == agentd.StatusCompleted {
			in.Result = result
			if len(in.Result) == 0 {
				in.Result = json.RawMessage("null")
			}
		}
		if _, err := h.run(ctx, in); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
