package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/agentd-dev/agentd"
)

// Limits of one response (one attempt of one model step).
const (
	MaxTextBytes = 1 << 20 // assembled assistant text
	MaxArgsBytes = 1 << 20 // assembled tool-call arguments, all calls together
	MaxToolCalls = 128     // tool calls in one step
)

// Budget counts what a response assembled so far against the limits.
type Budget struct {
	Provider   string
	text, args int
	calls      int
}

// Text counts n more bytes of text; past MaxTextBytes it returns an
// *agentd.Error that names the limit.
func (b *Budget) Text(n int) error {
	b.text += n
	if b.text > MaxTextBytes {
		return agentd.Errorf(agentd.EUNAVAILABLE, "%s: the model's response is too large: more than %d bytes of text", b.Provider, MaxTextBytes)
	}
	return nil
}

// Args counts n more bytes of tool-call arguments; past MaxArgsBytes it
// returns an *agentd.Error that names the limit.
func (b *Budget) Args(n int) error {
	b.args += n
	if b.args > MaxArgsBytes {
		return agentd.Errorf(agentd.EUNAVAILABLE, "%s: the model's response is too large: more than %d bytes of tool-call arguments", b.Provider, MaxArgsBytes)
	}
	return nil
}

// Call counts one more tool call; past MaxToolCalls it returns an
// *agentd.Error that names the limit.
func (b *Budget) Call() error {
	b.calls++
	if b.calls > MaxToolCalls {
		return agentd.Errorf(agentd.EUNAVAILABLE, "%s: the model's response has more than %d tool calls", b.Provider, MaxToolCalls)
	}
	return nil
}

// ResultText is the text a tool message of the history reads as: its
// Content (which the loop fills with the result JSON of a completed call
// and with a sentence for any other status), or, when Content is empty,
// the result JSON ("null" if none) of a completed call and
// "The call was <status>: <reason>" otherwise. It is never empty.
func ResultText(m agentd.ModelMessage) string {
	if m.Content != "" {
		return m.Content
	}
	if m.ToolStatus == agentd.StatusCompleted {
		if len(m.ToolResult) == 0 {
			return "null"
		}
		return string(m.ToolResult)
	}
	status := string(m.ToolStatus)
	if status == "" {
		status = "not completed"
	}
	if m.ToolReason == "" {
		return fmt.Sprintf("The call was %s.", status)
	}
	return fmt.Sprintf("The call was %s: %s", status, m.ToolReason)
}

// IsError reports whether a tool message reports anything but a completed
// call (failed, denied, expired, refused, cancelled).
func IsError(m agentd.ModelMessage) bool { return m.ToolStatus != agentd.StatusCompleted }

// ArgumentsObject returns args when it is a JSON object, else {}: what a
// provider that requires an object gets for a call whose stored arguments
// are a string or another non-object (an invalid call the loop refused).
func ArgumentsObject(args json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return args
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ToolCallID maps an id of the history to one a provider accepts: ids of
// at most maxLen bytes of [A-Za-z0-9_-] stay as they are, any other id
// becomes "call_" and a hex SHA-256 prefix of it, so the mapping is
// deterministic and the same for an assistant's tool call and its result.
func ToolCallID(id string, maxLen int) string {
	if id != "" && len(id) <= maxLen && safeID.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])
	n := min(max(maxLen-len("call_"), 8), len(h))
	return "call_" + h[:n]
}

// Schema returns a tool's parameters as a JSON object, or an empty object
// schema when the tool has none.
func Schema(params json.RawMessage) (map[string]any, error) {
	if len(params) == 0 || string(params) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(params, &m); err != nil || m == nil {
		return nil, fmt.Errorf("tool parameters are not a JSON object")
	}
	return m, nil
}
