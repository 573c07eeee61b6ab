package agui

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
)

// AG-UI event types agentd emits.
const (
	RunStarted         = "RUN_STARTED"
	RunFinished        = "RUN_FINISHED"
	RunError           = "RUN_ERROR"
	TextMessageStart   = "TEXT_MESSAGE_START"
	TextMessageContent = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     = "TEXT_MESSAGE_END"
	ToolCallStart      = "TOOL_CALL_START"
	ToolCallArgs       = "TOOL_CALL_ARGS"
	ToolCallEnd        = "TOOL_CALL_END"
	ToolCallResult     = "TOOL_CALL_RESULT"
)

// Frame is one AG-UI event. Its fields are those of @ag-ui/core's event
// schemas, each present only on the types that have it; Timestamp is in
// epoch milliseconds.
type Frame struct {
	Type            string   `json:"type"`
	Timestamp       int64    `json:"timestamp"`
	ThreadID        string   `json:"threadId,omitempty"`
	RunID           string   `json:"runId,omitempty"`
	MessageID       string   `json:"messageId,omitempty"`
	Role            string   `json:"role,omitempty"`
	Delta           *string  `json:"delta,omitempty"`
	ToolCallID      string   `json:"toolCallId,omitempty"`
	ToolCallName    string   `json:"toolCallName,omitempty"`
	ParentMessageID string   `json:"parentMessageId,omitempty"`
	Content         *string  `json:"content,omitempty"`
	Outcome         *Outcome `json:"outcome,omitempty"`
	Message         string   `json:"message,omitempty"`
	Code            string   `json:"code,omitempty"`
}

// Outcome is RUN_FINISHED's outcome: success, interrupt or cancelled.
type Outcome struct {
	Type       string      `json:"type"`
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is one parked call awaiting a decision.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	// ExpiresAt is the call's requires_approval_at, as the native API writes it.
	ExpiresAt string             `json:"expiresAt,omitempty"`
	Metadata  *InterruptMetadata `json:"metadata,omitempty"`
}

// InterruptMetadata is what agentd adds to an interrupt, under "agentd".
type InterruptMetadata struct {
	Agentd InterruptDetail `json:"agentd"`
}

// InterruptDetail identifies the parked call in the native API.
type InterruptDetail struct {
	ConversationID   string   `json:"conversation_id"`
	ToolName         string   `json:"tool_name"`
	ArgumentsSHA256  string   `json:"arguments_sha256"`
	AllowedDecisions []string `json:"allowed_decisions"`
}

// Interrupt reasons and RUN_ERROR codes of agentd.
const (
	ReasonToolCall = "tool_call"
	// CodeRunFailed is the RUN_ERROR code of a run that failed; other
	// RUN_ERROR codes are agentd's error codes (expired, not_found,
	// run_active, conflict, stale, forbidden, invalid, …).
	CodeRunFailed = "run_failed"
)

// Encoder maps one request's agentd events onto AG-UI events. It is pure:
// the same items give the same frames. Its zero value is not usable; use
// NewEncoder.
type Encoder struct {
	threadID, runID string
	open            string          // the text message being streamed
	streamed        map[string]bool // messages whose text was streamed
	announced       map[string]bool // calls whose TOOL_CALL_START was sent
}

// NewEncoder returns the encoder of a request with the client's threadId
// and runId.
func NewEncoder(threadID, runID string) *Encoder {
	return &Encoder{threadID: threadID, runID: runID, streamed: map[string]bool{}, announced: map[string]bool{}}
}

// Start is RUN_STARTED.
func (e *Encoder) Start(at time.Time) []Frame {
	return []Frame{{Type: RunStarted, Timestamp: at.UnixMilli(), ThreadID: e.threadID, RunID: e.runID}}
}

// Item returns the frames of one event of the run (none for those AG-UI has
// no event for).
func (e *Encoder) Item(it protocol.Item) []Frame {
	ts := it.Payload.Header().Timestamp.UnixMilli()
	switch p := it.Payload.(type) {
	case *agentd.TextDeltaPayload:
		if e.streamed[p.MessageID] && e.open != p.MessageID {
			return nil // its message has ended
		}
		var out []Frame
		if e.open != p.MessageID {
			out = append(e.closeText(ts), Frame{Type: TextMessageStart, Timestamp: ts, MessageID: p.MessageID, Role: "assistant"})
			e.open = p.MessageID
		}
		e.streamed[p.MessageID] = true
		return append(out, Frame{Type: TextMessageContent, Timestamp: ts, MessageID: p.MessageID, Delta: ptr(p.Delta)})
	case *agentd.MessagePayload:
		if e.streamed[p.MessageID] {
			if e.open == p.MessageID {
				return e.closeText(ts)
			}
			return nil
		}
		e.streamed[p.MessageID] = true
		return append(e.closeText(ts),
			Frame{Type: TextMessageStart, Timestamp: ts, MessageID: p.MessageID, Role: "assistant"},
			Frame{Type: TextMessageContent, Timestamp: ts, MessageID: p.MessageID, Delta: ptr(p.Content)},
			Frame{Type: TextMessageEnd, Timestamp: ts, MessageID: p.MessageID})
	case *agentd.ConfirmationRequiredPayload:
		return e.announce(it.Call, p.ToolCallID, p.ToolName, ts)
	case *agentd.ToolCallStartedPayload:
		if it.Decided || it.Call != nil && it.Call.Tier == agentd.TierConfirm {
			return e.closeText(ts) // announced when it parked, in this stream or an earlier one
		}
		return e.announce(it.Call, p.ToolCallID, p.ToolName, ts)
	case *agentd.ToolCallRefusedPayload:
		out := e.closeText(ts)
		if it.Call == nil || len(it.Call.Decisions) == 0 {
			// Refused when the model chose it, not after a refused edit
			// of a call announced when it parked.
			out = append(out, e.announce(it.Call, p.ToolCallID, p.ToolName, ts)...)
		}
		return append(out, result(p.ToolCallID, ts, outcomeJSON(string(agentd.StatusRefused), "reason", p.Reason)))
	case *agentd.ConfirmationResolvedPayload:
		if p.Decision == agentd.DecisionApproved {
			return nil // the call runs; its result follows
		}
		return append(e.closeText(ts), result(p.ToolCallID, ts, outcomeJSON(p.Decision, "reason", p.Reason)))
	case *agentd.ToolCallResultPayload:
		content := string(p.Result)
		if p.Status != agentd.StatusCompleted {
			content = outcomeJSON(string(p.Status), "error", p.Error)
		} else if content == "" {
			content = "null"
		}
		return append(e.closeText(ts), result(p.ToolCallID, ts, content))
	}
	return nil
}

// announce is TOOL_CALL_START/ARGS/END of a call not announced yet.
func (e *Encoder) announce(c *agentd.ToolCall, id, name string, ts int64) []Frame {
	out := e.closeText(ts)
	if e.announced[id] {
		return out
	}
	e.announced[id] = true
	args, parent := "{}", ""
	if c != nil {
		parent = c.MessageID
		if len(c.Arguments) > 0 {
			args = string(c.Arguments)
		}
	}
	return append(out,
		Frame{Type: ToolCallStart, Timestamp: ts, ToolCallID: id, ToolCallName: name, ParentMessageID: parent},
		Frame{Type: ToolCallArgs, Timestamp: ts, ToolCallID: id, Delta: ptr(args)},
		Frame{Type: ToolCallEnd, Timestamp: ts, ToolCallID: id})
}

func result(callID string, ts int64, content string) Frame {
	return Frame{Type: ToolCallResult, Timestamp: ts, MessageID: callID + ".result", ToolCallID: callID, Content: ptr(content)}
}

// outcomeJSON is a TOOL_CALL_RESULT's content for a call that did not
// complete: {"status": status, key: text}.
func outcomeJSON(status, key, text string) string {
	b, _ := json.Marshal(map[string]string{"status": status, key: text})
	return string(b)
}

// closeText ends the text message being streamed, if any.
func (e *Encoder) closeText(ts int64) []Frame {
	if e.open == "" {
		return nil
	}
	id := e.open
	e.open = ""
	return []Frame{{Type: TextMessageEnd, Timestamp: ts, MessageID: id}}
}

// End is the last frame of a run's stream: RUN_FINISHED with the success,
// cancelled or interrupt outcome (one interrupt per parked call), or
// RUN_ERROR for a failed run.
func (e *Encoder) End(end protocol.End, conversationID string, at time.Time) []Frame {
	ts := at.UnixMilli()
	out := e.closeText(ts)
	switch end.Status {
	case agentd.RunFailed:
		msg := end.Error
		if msg == "" {
			msg = "the run failed"
		}
		return append(out, Frame{Type: RunError, Timestamp: ts, Message: msg, Code: CodeRunFailed})
	case agentd.RunCancelled:
		return append(out, e.finished(ts, &Outcome{Type: "cancelled"}))
	case agentd.RunWaiting:
		o := &Outcome{Type: "interrupt"}
		for _, c := range end.Parked {
			o.Interrupts = append(o.Interrupts, interrupt(c, conversationID))
		}
		return append(out, e.finished(ts, o))
	}
	return append(out, e.finished(ts, &Outcome{Type: "success"}))
}

// Error is the RUN_ERROR of a request that could not be applied.
func (e *Encoder) Error(err error, at time.Time) []Frame {
	code, msg := protocol.SafeError(err)
	ts := at.UnixMilli()
	return append(e.closeText(ts), Frame{Type: RunError, Timestamp: ts, Message: msg, Code: code})
}

func (e *Encoder) finished(ts int64, o *Outcome) Frame {
	return Frame{Type: RunFinished, Timestamp: ts, ThreadID: e.threadID, RunID: e.runID, Outcome: o}
}

func interrupt(c agentd.ToolCall, conversationID string) Interrupt {
	card := c.Card()
	msg := card.Title
	if card.Summary != "" {
		msg += " " + card.Summary
	}
	in := Interrupt{ID: protocol.InterruptID(c.ID, c.CardRevision()), Reason: ReasonToolCall, Message: msg, ToolCallID: c.ID,
		ResponseSchema: ResponseSchema(slices.Contains(c.AllowedDecisions, "edit")),
		Metadata: &InterruptMetadata{Agentd: InterruptDetail{ConversationID: conversationID, ToolName: c.Name,
			ArgumentsSHA256: c.ArgumentsSHA256, AllowedDecisions: c.AllowedDecisions}}}
	if in.Metadata.Agentd.AllowedDecisions == nil {
		in.Metadata.Agentd.AllowedDecisions = []string{}
	}
	if c.RequiresApprovalAt != nil {
		b, _ := c.RequiresApprovalAt.UTC().MarshalJSON()
		_ = json.Unmarshal(b, &in.ExpiresAt) // the native API's very string
	}
	return in
}

// The JSON Schemas of a resume payload, with and without editedArgs.
var (
	schemaApprove = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string","maxLength":4096},"argumentsSha256":{"type":"string","pattern":"^[0-9a-f]{64}$"}},"required":["approved"],"additionalProperties":false}`)
	schemaEdit    = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string","maxLength":4096},"argumentsSha256":{"type":"string","pattern":"^[0-9a-f]{64}$"},"editedArgs":{"type":"object"}},"required":["approved"],"additionalProperties":false}`)
)

// ResponseSchema is an interrupt's responseSchema: the resume payload, with
// editedArgs only where the call allows edit.
func ResponseSchema(edit bool) json.RawMessage {
	if edit {
		return schemaEdit
	}
	return schemaApprove
}

func ptr(s string) *string { return &s }
