package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd/internal/process"
)

// request is what a command reads on stdin.
type request struct {
	Tool   string          `json:"tool"`
	CallID string          `json:"call_id"`
	Input  json.RawMessage `json:"input"`
}

// Run executes one call of the tool: the command runs in the tool's folder
// (process.Run) with the whole request,
// {"tool": NAME, "call_id": ID, "input": ARGUMENTS} plus a newline, as its
// stdin. On exit status 0 the result is stdout: its JSON if it parses
// (compacted), else the trimmed text as a JSON string; the errors are
// process.Run's, naming the tool.
func (t *Tool) Run(ctx context.Context, callID string, args json.RawMessage) (json.RawMessage, error) {
	return t.run(ctx, callID, args, nil)
}

// run is Run with extra variables ("NAME=value") in the command's
// environment: its context endpoint's.
func (t *Tool) run(ctx context.Context, callID string, args json.RawMessage, extra []string) (json.RawMessage, error) {
	input := args
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	payload, err := process.StdinJSON(request{Tool: t.Name, CallID: callID, Input: input})
	if err != nil {
		return nil, fmt.Errorf("tool %q: arguments are not valid JSON: %v", t.Name, err)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	out, err := process.Run(ctx, process.Spec{Name: fmt.Sprintf("tool %q", t.Name), Command: t.Command, Dir: t.Dir, Env: t.Env,
		Extra: extra, Stdin: payload, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return parseOutput(out), nil
}

// parseOutput turns stdout into a result: compacted JSON if it is JSON,
// else the trimmed text as a JSON string.
func parseOutput(out []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(out)
	var buf bytes.Buffer
	if len(trimmed) > 0 && json.Compact(&buf, trimmed) == nil {
		return buf.Bytes()
	}
	text, _ := json.Marshal(strings.ToValidUTF8(string(trimmed), "\uFFFD"))
	return text
}
