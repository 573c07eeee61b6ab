package aisdk

import (
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
)

// Chunk types agentd emits.
const (
	Start               = "start"
	Finish              = "finish"
	Error               = "error"
	TextStart           = "text-start"
	TextDelta           = "text-delta"
	TextEnd             = "text-end"
	ToolInputStart      = "tool-input-start"
	ToolInputAvailable  = "tool-input-available"
	ToolApprovalRequest = "tool-approval-request"
	ToolOutputAvailable = "tool-output-available"
	ToolOutputError     = "tool-output-error"
	ToolOutputDenied    = "tool-output-denied"
)

// Done is the stream's last frame.
var Done = []byte("[DONE]")

// Chunk is one UI message chunk. Its fields are those of the SDK's chunk
// schema, each present only on the types that have it.
type Chunk struct {
	Type         string          `json:"type"`
	MessageID    string          `json:"messageId,omitempty"`
	ID           string          `json:"id,omitempty"`
	Delta        *string         `json:"delta,omitempty"`
	ToolCallID   string          `json:"toolCallId,omitempty"`
	ToolName     string          `json:"toolName,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ApprovalID   string          `json:"approvalId,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	ErrorText    string          `json:"errorText,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"`
}

// Encoder maps one request's agentd events onto UI message chunks. It is
// pure: the same items give the same chunks. Use NewEncoder.
type Encoder struct {
	open      string          // the text part being streamed
	streamed  map[string]bool // messages whose text was streamed
	announced map[string]bool // calls whose tool part was started
}

// NewEncoder returns the encoder of one request.
func NewEncoder() *Encoder {
	return &Encoder{streamed: map[string]bool{}, announced: map[string]bool{}}
}

// Start opens the assistant message: its id is the run's, so that the
// continuation after an approval streams into the same message.
func (e *Encoder) Start(runID string) []Chunk {
	return []Chunk{{Type: Start, MessageID: runID}}
}

// Expired reports a decision that came after the call's deadline: the
// call did not run.
func (e *Encoder) Expired(x protocol.Expired) []Chunk {
	return []Chunk{{Type: ToolOutputError, ToolCallID: x.ToolCallID, ErrorText: x.Message}}
}

// Item returns the chunks of one event of the run (none for those the
// stream has no chunk for).
func (e *Encoder) Item(it protocol.Item) []Chunk {
	switch p := it.Payload.(type) {
	case *agentd.TextDeltaPayload:
		if e.streamed[p.MessageID] && e.open != p.MessageID {
			return nil // its message has ended
		}
		var out []Chunk
		if e.open != p.MessageID {
			out = append(e.closeText(), Chunk{Type: TextStart, ID: p.MessageID})
			e.open = p.MessageID
		}
		e.streamed[p.MessageID] = true
		return append(out, Chunk{Type: TextDelta, ID: p.MessageID, Delta: ptr(p.Delta)})
	case *agentd.MessagePayload:
		if e.streamed[p.MessageID] {
			if e.open == p.MessageID {
				return e.closeText()
			}
			return nil
		}
		e.streamed[p.MessageID] = true
		return append(e.closeText(), Chunk{Type: TextStart, ID: p.MessageID},
			Chunk{Type: TextDelta, ID: p.MessageID, Delta: ptr(p.Content)}, Chunk{Type: TextEnd, ID: p.MessageID})
	case *agentd.ConfirmationRequiredPayload:
		return append(e.announce(it.Call, p.ToolCallID, p.ToolName),
			Chunk{Type: ToolApprovalRequest, ApprovalID: protocol.InterruptID(p.ToolCallID, p.CardRevision), ToolCallID: p.ToolCallID})
	case *agentd.ToolCallStartedPayload:
		if it.Decided || it.Call != nil && it.Call.Tier == agentd.TierConfirm {
			return e.closeText() // its part exists since it parked
		}
		return e.announce(it.Call, p.ToolCallID, p.ToolName)
	case *agentd.ToolCallRefusedPayload:
		out := e.closeText()
		if it.Call == nil || len(it.Call.Decisions) == 0 {
			out = append(out, e.announce(it.Call, p.ToolCallID, p.ToolName)...)
		}
		return append(out, Chunk{Type: ToolOutputError, ToolCallID: p.ToolCallID, ErrorText: nonEmpty(p.Reason, "refused")})
	case *agentd.ConfirmationResolvedPayload:
		switch p.Decision {
		case agentd.DecisionApproved:
			return nil // the call runs; its output follows
		case agentd.DecisionDenied:
			return append(e.closeText(), Chunk{Type: ToolOutputDenied, ToolCallID: p.ToolCallID})
		}
		return append(e.closeText(), Chunk{Type: ToolOutputError, ToolCallID: p.ToolCallID, ErrorText: nonEmpty(p.Reason, p.Decision)})
	case *agentd.ToolCallResultPayload:
		if p.Status != agentd.StatusCompleted {
			return append(e.closeText(), Chunk{Type: ToolOutputError, ToolCallID: p.ToolCallID, ErrorText: nonEmpty(p.Error, string(p.Status))})
		}
		out := p.Result
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return append(e.closeText(), Chunk{Type: ToolOutputAvailable, ToolCallID: p.ToolCallID, Output: out})
	}
	return nil
}

// announce starts the tool part of a call not announced yet, with its input.
func (e *Encoder) announce(c *agentd.ToolCall, id, name string) []Chunk {
	out := e.closeText()
	if e.announced[id] {
		return out
	}
	e.announced[id] = true
	input := json.RawMessage("{}")
	if c != nil && len(c.Arguments) > 0 {
		input = c.Arguments
	}
	return append(out, Chunk{Type: ToolInputStart, ToolCallID: id, ToolName: name},
		Chunk{Type: ToolInputAvailable, ToolCallID: id, ToolName: name, Input: input})
}

func (e *Encoder) closeText() []Chunk {
	if e.open == "" {
		return nil
	}
	id := e.open
	e.open = ""
	return []Chunk{{Type: TextEnd, ID: id}}
}

// End closes the message: finish (reason stop, tool-calls when calls
// parked, other when cancelled), or error for a failed run.
func (e *Encoder) End(end protocol.End) []Chunk {
	out := e.closeText()
	switch end.Status {
	case agentd.RunFailed:
		return append(out, Chunk{Type: Error, ErrorText: nonEmpty(end.Error, "the run failed")})
	case agentd.RunWaiting:
		return append(out, Chunk{Type: Finish, FinishReason: "tool-calls"})
	case agentd.RunCancelled:
		return append(out, Chunk{Type: Finish, FinishReason: "other"})
	}
	return append(out, Chunk{Type: Finish, FinishReason: "stop"})
}

// Fail is the error chunk of a stream that broke off.
func (e *Encoder) Fail(err error) []Chunk {
	_, msg := protocol.SafeError(err)
	return append(e.closeText(), Chunk{Type: Error, ErrorText: msg})
}

func nonEmpty(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func ptr(s string) *string { return &s }
