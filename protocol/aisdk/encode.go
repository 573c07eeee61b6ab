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
	StartStep           = "start-step"
	FinishStep          = "finish-step"
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
	// inStep is set while a model step's chunks are open (start-step
	// sent); results marks a step whose tool outputs have begun, and step
	// is the step number of its calls (0 before the first), so that the
	// next step's output closes it.
	inStep, results bool
	step            int
	open            string          // the text part being streamed
	streamed        map[string]bool // messages whose text was streamed
	announced       map[string]bool // calls whose tool part was started
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
// stream has no chunk for), within start-step / finish-step around each
// model step: a step opens at the model's first output (text, or a tool
// call it chose) and closes when the next step's output comes after tool
// outputs, or at the end. A tool output that comes with no step open (the
// continuation after an approval) opens none.
func (e *Encoder) Item(it protocol.Item) []Chunk {
	var pre []Chunk
	model := modelOutput(it)
	if model && e.inStep && e.nextStep(it) {
		pre = append(e.closeText(), Chunk{Type: FinishStep})
		e.inStep = false
	}
	out := e.item(it)
	switch {
	case len(out) == 0:
		return pre
	case model && !e.inStep:
		pre = append(pre, Chunk{Type: StartStep})
		e.inStep, e.results, e.step = true, false, 0
	}
	switch it.Payload.(type) {
	case *agentd.ToolCallResultPayload, *agentd.ConfirmationResolvedPayload:
		e.results = true
	}
	if model && it.Call != nil {
		e.step = it.Call.Step
	}
	return append(pre, out...)
}

// nextStep reports whether the model output it, in a step, is of the next
// step: a tool call of another step than the step's calls, or text after
// the step's tool outputs (a step's text comes before its calls).
func (e *Encoder) nextStep(it protocol.Item) bool {
	if it.Call != nil {
		return e.step != 0 && it.Call.Step != e.step
	}
	switch it.Payload.(type) {
	case *agentd.TextDeltaPayload, *agentd.MessagePayload:
		return e.results
	}
	return false
}

// modelOutput reports whether it is the model's output: text, or a tool
// call announced as the model chose it.
func modelOutput(it protocol.Item) bool {
	switch p := it.Payload.(type) {
	case *agentd.TextDeltaPayload, *agentd.MessagePayload:
		return true
	case *agentd.ConfirmationRequiredPayload:
		return p.CardRevision < 2
	case *agentd.ToolCallStartedPayload:
		return !it.Decided && (it.Call == nil || it.Call.Tier != agentd.TierConfirm)
	case *agentd.ToolCallRefusedPayload:
		return it.Call == nil || len(it.Call.Decisions) == 0
	}
	return false
}

func (e *Encoder) item(it protocol.Item) []Chunk {
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

// End closes the step and the message: finish (reason stop, tool-calls
// when calls parked — as the SDK's own stream ends a step whose calls
// await approval: finish-step, then finish without error —, other when
// cancelled), or error for a failed run.
func (e *Encoder) End(end protocol.End) []Chunk {
	out := e.closeStep()
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
	return append(e.closeStep(), Chunk{Type: Error, ErrorText: msg})
}

// closeStep closes the open text part and the open step.
func (e *Encoder) closeStep() []Chunk {
	out := e.closeText()
	if e.inStep {
		e.inStep = false
		out = append(out, Chunk{Type: FinishStep})
	}
	return out
}

func nonEmpty(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func ptr(s string) *string { return &s }
