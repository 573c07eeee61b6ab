package agentd

import (
	"context"
	"encoding/json"
	"regexp"
)

// Model is a model provider: given the history and the tools it returns the
// next assistant step. Text is streamed through onDelta as it arrives; the
// returned response carries the whole text and every tool call of the step.
type Model interface {
	Generate(ctx context.Context, req ModelRequest, onDelta func(delta string)) (*ModelResponse, error)
}

// ModelNamer is a Model that names the model it asks: the provider's
// model id ("gpt-4o"), "script" for an inline script. Traces carry it as
// gen_ai.request.model (docs/observability.md).
type ModelNamer interface {
	ModelName() string
}

// ModelName is m's name when it names itself (ModelNamer), else "".
func ModelName(m Model) string {
	if n, ok := m.(ModelNamer); ok {
		return n.ModelName()
	}
	return ""
}

// ModelRequest is the input of one model step.
type ModelRequest struct {
	System   string
	Messages []ModelMessage
	Tools    []ToolSpec
}

// Roles of a ModelMessage.
const (
	ModelRoleUser      = "user"
	ModelRoleAssistant = "assistant"
	ModelRoleTool      = "tool"
)

// ModelMessage is one entry of the history sent to a model. Every tool call
// of an assistant message is followed by exactly one tool message.
type ModelMessage struct {
	Role      string
	Content   string          // user text, assistant text, or the text a tool result reads as
	ToolCalls []ModelToolCall // assistant only
	// Tool result fields (Role == tool).
	ToolCallID string
	ToolName   string
	ToolStatus CallStatus      // completed, failed, denied, expired, refused, cancelled
	ToolResult json.RawMessage // completed: the result
	ToolReason string          // failed/denied/expired/refused/cancelled: why
}

// ModelToolCall is a call the model selected.
type ModelToolCall struct {
	ID        string          // provider's id, if any
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// toolNamePattern is the form of a tool name a model is offered: what
// model providers accept (^[a-zA-Z0-9_-]{1,64}$).
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidToolName reports whether name may be offered to a model as a tool
// name: 1 to 64 ASCII letters, digits, '_' or '-'. Every tool source
// checks its names with it.
func ValidToolName(name string) bool { return toolNamePattern.MatchString(name) }

// ToolSpec is a tool as the model sees it.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ModelResponse is one assistant step.
type ModelResponse struct {
	Text       string
	ToolCalls  []ModelToolCall
	Usage      Usage
	StopReason string
}
