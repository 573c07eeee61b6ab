package agentd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// This file holds the data of every event type of the log (SPEC §6), one Go
// type per event type. The loop builds these values and turns them into
// drafts with NewEventDraft; readers (the SSE stream writes Event.Data as
// is; webhooks and protocol adapters) turn a stored Event back into its
// value with DecodeEvent. Nothing builds or reads an event as a map.
//
// A field tagged `event:"required"` must not be its zero value when the
// draft is built: NewEventDraft refuses it with an error naming the type
// and the field. The golden files in testdata/events pin the JSON of every
// type (`go test -update .` in the root package rewrites them).

// EventPayload is the data of one event: a pointer to one of the *Payload
// types of this file. Its JSON is the event's data.
type EventPayload interface {
	// EventType is the SPEC §6 type whose data this is.
	EventType() string
	// Header is the part every event's data carries; NewEventDraft fills it in.
	Header() *EventHeader
}

// EventHeader is what the data of every event carries: the event's type,
// its conversation and when it happened.
type EventHeader struct {
	Type           string `json:"type"`
	ConversationID string `json:"conversation_id"`
	// Timestamp is in UTC; its JSON is RFC 3339 with nanoseconds.
	Timestamp time.Time `json:"timestamp"`
}

// Header returns h, so that every payload type, which embeds an
// EventHeader, is an EventPayload.
func (h *EventHeader) Header() *EventHeader { return h }

// RunStartedPayload is the data of run_started: a user message started a run.
type RunStartedPayload struct {
	EventHeader
	RunID         string `json:"run_id" event:"required"`
	CorrelationID string `json:"correlation_id" event:"required"`
	// TraceID is the W3C trace id (32 hex digits) of the run's trace, for
	// a link to a trace viewer; absent when traces are off
	// (docs/observability.md).
	TraceID string `json:"trace_id,omitempty"`
}

// TextDeltaPayload is the data of text_delta: a piece of the assistant text
// of a model step, as the model streams it.
type TextDeltaPayload struct {
	EventHeader
	RunID     string `json:"run_id" event:"required"`
	MessageID string `json:"message_id" event:"required"`
	Delta     string `json:"delta" event:"required"`
}

// MessagePayload is the data of message: the whole assistant text of a step.
type MessagePayload struct {
	EventHeader
	RunID     string `json:"run_id" event:"required"`
	MessageID string `json:"message_id" event:"required"`
	Role      string `json:"role" event:"required"`
	Content   string `json:"content" event:"required"`
}

// ToolCallStartedPayload is the data of tool_call_started: a call cleared to
// run (auto, or approved) is running with these effective arguments.
type ToolCallStartedPayload struct {
	EventHeader
	RunID      string `json:"run_id" event:"required"`
	ToolCallID string `json:"tool_call_id" event:"required"`
	ToolName   string `json:"tool_name" event:"required"`
	ServerID   string `json:"server_id"`
	// Arguments are null when they are larger than LargeValueBytes:
	// Omitted says so, with their size and digest.
	Arguments json.RawMessage `json:"arguments"`
	Omitted   Omitted         `json:"omitted,omitempty"`
	// Intent is "confirmed_write" when an approved request-tool call runs
	// (SPEC §3), absent otherwise.
	Intent string `json:"intent,omitempty"`
	// GrantedBy names the remembered grant a call of tier confirm ran
	// under without a card (SPEC §11.2), absent otherwise.
	GrantedBy *GrantRef `json:"granted_by,omitempty"`
}

// ConfirmationRequiredPayload is the data of confirmation_required: a call
// is parked until a person decides or its deadline passes.
type ConfirmationRequiredPayload struct {
	EventHeader
	RunID         string `json:"run_id" event:"required"`
	CorrelationID string `json:"correlation_id" event:"required"`
	ToolCallID    string `json:"tool_call_id" event:"required"`
	ToolName      string `json:"tool_name" event:"required"`
	ServerID      string `json:"server_id"`
	// Endpoint and Method are the connection's path and HTTP method; for
	// other tools the tool name and "TOOL".
	Endpoint  string `json:"endpoint" event:"required"`
	Method    string `json:"method" event:"required"`
	Reason    string `json:"reason"`
	Escalated bool   `json:"escalated"`
	// Params are what a person approves: a connection call's grouped
	// arguments {path, query, header, body}, other tools' arguments.
	Params json.RawMessage `json:"params"`
	// ConnectionName is null for a call that is not a connection's.
	ConnectionName     *string   `json:"connection_name"`
	ArgumentsSHA256    string    `json:"arguments_sha256" event:"required"`
	RequiresApprovalAt time.Time `json:"requires_approval_at" event:"required"`
	AllowedDecisions   []string  `json:"allowed_decisions" event:"required"`
	Card               Card      `json:"card" event:"required"`
	// CardRevision is the card's number among the call's cards
	// (ToolCall.CardRevision) when the call was parked again (2, 3, …);
	// 0, and absent, on its first card.
	CardRevision int `json:"card_revision,omitempty"`
	// Omitted names the call's values (arguments, params, diff) larger
	// than LargeValueBytes, which params and the card leave out (null);
	// nil when none is (ToolCall.Announcement).
	Omitted Omitted `json:"omitted,omitempty"`
}

// Card is the display summary of a parked call in confirmation_required.
type Card struct {
	Title   string `json:"title"`
	Summary string `json:"summary"`
	// ConnectionName and PathTemplate are null for a call that is not a
	// connection's.
	ConnectionName *string `json:"connection_name"`
	Method         string  `json:"method"`
	Endpoint       string  `json:"endpoint"`
	PathTemplate   *string `json:"path_template"`
	// Diff is the call's diff as a JSON string; null where none applies
	// or where it is left out (ConfirmationRequiredPayload.Omitted).
	Diff      json.RawMessage `json:"diff"`
	Arguments json.RawMessage `json:"arguments"`
	// Approval is the call's approval rule and how many approved so far
	// (SPEC §11.1); absent for a call parked before rules existed.
	Approval *CardApproval `json:"approval,omitempty"`
}

// CardApproval is a card's approval block: who may decide, how many
// approvals the call needs and has, and whether the requester may decide.
type CardApproval struct {
	Approvers           []string `json:"approvers"`
	Quorum              int      `json:"quorum"`
	Approvals           int      `json:"approvals"`
	RequesterMayApprove bool     `json:"requester_may_approve"`
}

// ConfirmationProgressPayload is the data of confirmation_progress: an
// approval of a call whose quorum it did not reach (SPEC §11.1); the call
// stays parked.
type ConfirmationProgressPayload struct {
	EventHeader
	RunID      string `json:"run_id" event:"required"`
	ToolCallID string `json:"tool_call_id" event:"required"`
	ToolName   string `json:"tool_name" event:"required"`
	// Approvals is the count so far, Quorum the count needed, ApprovedBy
	// the key ids so far.
	Approvals  int      `json:"approvals" event:"required"`
	Quorum     int      `json:"quorum" event:"required"`
	ApprovedBy []string `json:"approved_by" event:"required"`
}

// ConfirmationReminderPayload is the data of confirmation_reminder: a
// parked call is still pending Before its deadline (SPEC §11.3).
type ConfirmationReminderPayload struct {
	EventHeader
	RunID              string    `json:"run_id" event:"required"`
	ToolCallID         string    `json:"tool_call_id" event:"required"`
	ToolName           string    `json:"tool_name" event:"required"`
	RequiresApprovalAt time.Time `json:"requires_approval_at" event:"required"`
	// RemainingMS is the time left when the reminder was sent; Before the
	// reminder's offset as the rule writes it ("10m"; JSON "offset").
	RemainingMS int64  `json:"remaining_ms"`
	Before      string `json:"offset" event:"required"`
}

// ConfirmationExtendedPayload is the data of confirmation_extended: a
// parked call's deadline moved later (SPEC §11.3).
type ConfirmationExtendedPayload struct {
	EventHeader
	RunID                      string    `json:"run_id" event:"required"`
	ToolCallID                 string    `json:"tool_call_id" event:"required"`
	ToolName                   string    `json:"tool_name" event:"required"`
	RequiresApprovalAt         time.Time `json:"requires_approval_at" event:"required"`
	PreviousRequiresApprovalAt time.Time `json:"previous_requires_approval_at" event:"required"`
	// ExtendedBy is the key id that extended; Extension (JSON "by") how much later ("30m").
	ExtendedBy string `json:"extended_by" event:"required"`
	Extension  string `json:"by" event:"required"`
	Reason     string `json:"reason,omitempty"`
}

// GrantCreatedPayload is the data of grant_created: an approval made a
// remembered grant (SPEC §11.2).
type GrantCreatedPayload struct {
	EventHeader
	GrantID   string    `json:"grant_id" event:"required"`
	Scope     string    `json:"scope" event:"required"`
	ToolName  string    `json:"tool_name" event:"required"`
	ExpiresAt time.Time `json:"expires_at" event:"required"`
	// ToolCallID is the call whose approval made it; CreatedBy its key.
	ToolCallID string `json:"tool_call_id,omitempty"`
	CreatedBy  string `json:"created_by,omitempty"`
}

// GrantRevokedPayload is the data of grant_revoked: a grant was revoked
// and applies to no call classified after it.
type GrantRevokedPayload struct {
	EventHeader
	GrantID   string    `json:"grant_id" event:"required"`
	Scope     string    `json:"scope" event:"required"`
	ToolName  string    `json:"tool_name" event:"required"`
	ExpiresAt time.Time `json:"expires_at" event:"required"`
	RevokedBy string    `json:"revoked_by,omitempty"`
}

// ConfirmationResolvedPayload is the data of confirmation_resolved: a parked
// call was approved, denied, expired or cancelled.
type ConfirmationResolvedPayload struct {
	EventHeader
	RunID      string `json:"run_id" event:"required"`
	ToolCallID string `json:"tool_call_id" event:"required"`
	ToolName   string `json:"tool_name" event:"required"`
	// Decision is one of the Decision* values.
	Decision        string `json:"decision" event:"required"`
	Reason          string `json:"reason"`
	DecidedBy       string `json:"decided_by" event:"required"`
	ArgumentsSHA256 string `json:"arguments_sha256" event:"required"`
	// EditedArgumentsSHA256 is the digest of an approval's edited
	// arguments, null without an edit.
	EditedArgumentsSHA256 *string `json:"edited_arguments_sha256"`
	// ApprovedBy lists every key whose approval ran the call, in order
	// (one for a quorum of 1); absent for other decisions.
	ApprovedBy []string `json:"approved_by,omitempty"`
}

// ToolCallRefusedPayload is the data of tool_call_refused: a call was not
// run (review, never, unknown tool, invalid arguments, a refused edit).
type ToolCallRefusedPayload struct {
	EventHeader
	RunID      string `json:"run_id" event:"required"`
	ToolCallID string `json:"tool_call_id" event:"required"`
	ToolName   string `json:"tool_name"`
	ServerID   string `json:"server_id"`
	Tier       Tier   `json:"tier" event:"required"`
	Reason     string `json:"reason" event:"required"`
	Escalated  bool   `json:"escalated"`
}

// ToolCallResultPayload is the data of tool_call_result: a call that was
// cleared to run ended (completed or failed) or was cancelled before it
// started. Its JSON has "result" when Status is completed (null for a tool
// that gave none) and "error" otherwise.
type ToolCallResultPayload struct {
	EventHeader
	RunID      string          `json:"run_id" event:"required"`
	ToolCallID string          `json:"tool_call_id" event:"required"`
	ToolName   string          `json:"tool_name" event:"required"`
	Status     CallStatus      `json:"status" event:"required"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// MarshalJSON writes the payload with "result" for a completed call and
// "error" for any other, whatever their values.
func (p ToolCallResultPayload) MarshalJSON() ([]byte, error) {
	type fields ToolCallResultPayload // the same fields, without this method
	w := struct {
		fields
		Result *json.RawMessage `json:"result,omitempty"` // shadows fields.Result
		Error  *string          `json:"error,omitempty"`  // shadows fields.Error
	}{fields: fields(p)}
	if p.Status == StatusCompleted {
		w.Result = &p.Result
	} else {
		w.Error = &p.Error
	}
	return json.Marshal(w)
}

// RunWaitingPayload is the data of run_waiting: the run waits for decisions
// on its parked calls.
type RunWaitingPayload struct {
	EventHeader
	RunID         string `json:"run_id" event:"required"`
	CorrelationID string `json:"correlation_id" event:"required"`
	// Pending are the ids of the parked calls, those waiting on an input
	// request too; Inputs the ids of those inputs (SPEC §12.2), absent
	// when none.
	Pending []string `json:"pending" event:"required"`
	Inputs  []string `json:"inputs,omitempty"`
}

// RunFinishedPayload is the data of run_finished: the run ended.
type RunFinishedPayload struct {
	EventHeader
	RunID         string    `json:"run_id" event:"required"`
	CorrelationID string    `json:"correlation_id" event:"required"`
	Status        RunStatus `json:"status" event:"required"`
	// Reason is one word: model_stop, max_turns, error or cancelled.
	Reason string `json:"reason" event:"required"`
	Usage  Usage  `json:"usage"`
	// StopReason is the provider's stop reason of the last model step,
	// absent when there is none (and on cancel).
	StopReason string `json:"stop_reason,omitempty"`
	// Error is a failed run's message, absent otherwise.
	Error string `json:"error,omitempty"`
}

// ErrorPayload is the data of error: the run failed; Message is safe to show.
type ErrorPayload struct {
	EventHeader
	RunID   string `json:"run_id"`
	Code    string `json:"code" event:"required"`
	Message string `json:"message" event:"required"`
}

// SubagentEventPayload is the data of subagent_event (SPEC §4.5): an event
// of a subagent's loop, relayed to the parent's stream, durable like every event.
type SubagentEventPayload struct {
	EventHeader
	// ToolCallID is the parent's task call that started the subagent.
	ToolCallID string `json:"tool_call_id" event:"required"`
	Subagent   string `json:"subagent" event:"required"`
	// Event is the inner event's data.
	Event json.RawMessage `json:"event" event:"required"`
}

// InputRequiredPayload is the data of input_required: a call asks a person
// for input and waits (SPEC §12.2); the input is Input.
type InputRequiredPayload struct {
	EventHeader
	InputID    string `json:"input_id" event:"required"`
	ToolCallID string `json:"tool_call_id" event:"required"`
	ToolName   string `json:"tool_name" event:"required"`
	ServerID   string `json:"server_id"`
	RunID      string `json:"run_id" event:"required"`
	// Source is InputSource*; Key and Round name the request within its
	// call; Mode is InputModeForm (with Schema) or InputModeURL.
	Source    string          `json:"source" event:"required"`
	Key       string          `json:"key" event:"required"`
	Round     int             `json:"round" event:"required"`
	Mode      string          `json:"mode" event:"required"`
	Message   string          `json:"message" event:"required"`
	Schema    json.RawMessage `json:"schema,omitempty"`
	ExpiresAt time.Time       `json:"expires_at" event:"required"`
	Answerers []string        `json:"answerers" event:"required"`
}

// InputResolvedPayload is the data of input_resolved: an input was
// answered (Action, with Content for an accepted form), or expired,
// cancelled (Reason) or lost (SPEC §12.2).
type InputResolvedPayload struct {
	EventHeader
	InputID    string          `json:"input_id" event:"required"`
	ToolCallID string          `json:"tool_call_id" event:"required"`
	Status     InputStatus     `json:"status" event:"required"`
	Action     string          `json:"action,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	AnsweredBy string          `json:"answered_by,omitempty"`
	Via        string          `json:"via,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// EventType returns input_required.
func (InputRequiredPayload) EventType() string { return EventInputRequired }

// EventType returns input_resolved.
func (InputResolvedPayload) EventType() string { return EventInputResolved }

// EventType returns run_started.
func (RunStartedPayload) EventType() string { return EventRunStarted }

// EventType returns text_delta.
func (TextDeltaPayload) EventType() string { return EventTextDelta }

// EventType returns message.
func (MessagePayload) EventType() string { return EventMessage }

// EventType returns tool_call_started.
func (ToolCallStartedPayload) EventType() string { return EventToolCallStarted }

// EventType returns confirmation_required.
func (ConfirmationRequiredPayload) EventType() string { return EventConfirmationRequired }

// EventType returns confirmation_resolved.
func (ConfirmationResolvedPayload) EventType() string { return EventConfirmationResolved }

// EventType returns confirmation_progress.
func (ConfirmationProgressPayload) EventType() string { return EventConfirmationProgress }

// EventType returns confirmation_reminder.
func (ConfirmationReminderPayload) EventType() string { return EventConfirmationReminder }

// EventType returns confirmation_extended.
func (ConfirmationExtendedPayload) EventType() string { return EventConfirmationExtended }

// EventType returns grant_created.
func (GrantCreatedPayload) EventType() string { return EventGrantCreated }

// EventType returns grant_revoked.
func (GrantRevokedPayload) EventType() string { return EventGrantRevoked }

// EventType returns tool_call_refused.
func (ToolCallRefusedPayload) EventType() string { return EventToolCallRefused }

// EventType returns tool_call_result.
func (ToolCallResultPayload) EventType() string { return EventToolCallResult }

// EventType returns run_waiting.
func (RunWaitingPayload) EventType() string { return EventRunWaiting }

// EventType returns run_finished.
func (RunFinishedPayload) EventType() string { return EventRunFinished }

// EventType returns error.
func (ErrorPayload) EventType() string { return EventError }

// EventType returns subagent_event.
func (SubagentEventPayload) EventType() string { return EventSubagentEvent }

// eventPayloads makes an empty payload of each event type; it is the one
// list DecodeEvent and the tests read.
var eventPayloads = map[string]func() EventPayload{
	EventRunStarted:           func() EventPayload { return new(RunStartedPayload) },
	EventTextDelta:            func() EventPayload { return new(TextDeltaPayload) },
	EventMessage:              func() EventPayload { return new(MessagePayload) },
	EventToolCallStarted:      func() EventPayload { return new(ToolCallStartedPayload) },
	EventConfirmationRequired: func() EventPayload { return new(ConfirmationRequiredPayload) },
	EventConfirmationResolved: func() EventPayload { return new(ConfirmationResolvedPayload) },
	EventConfirmationProgress: func() EventPayload { return new(ConfirmationProgressPayload) },
	EventConfirmationReminder: func() EventPayload { return new(ConfirmationReminderPayload) },
	EventConfirmationExtended: func() EventPayload { return new(ConfirmationExtendedPayload) },
	EventToolCallRefused:      func() EventPayload { return new(ToolCallRefusedPayload) },
	EventToolCallResult:       func() EventPayload { return new(ToolCallResultPayload) },
	EventRunWaiting:           func() EventPayload { return new(RunWaitingPayload) },
	EventRunFinished:          func() EventPayload { return new(RunFinishedPayload) },
	EventError:                func() EventPayload { return new(ErrorPayload) },
	EventSubagentEvent:        func() EventPayload { return new(SubagentEventPayload) },
	EventGrantCreated:         func() EventPayload { return new(GrantCreatedPayload) },
	EventGrantRevoked:         func() EventPayload { return new(GrantRevokedPayload) },
	EventInputRequired:        func() EventPayload { return new(InputRequiredPayload) },
	EventInputResolved:        func() EventPayload { return new(InputResolvedPayload) },
}

// NewEventDraft returns the draft of an event of conversationID that
// happened at at, with p as its data. It fills in p's header (type,
// conversation, at in UTC). It fails, naming the type and the field, when
// a required field of p is its zero value.
func NewEventDraft(conversationID string, at time.Time, p EventPayload) (EventDraft, error) {
	if p == nil || reflect.ValueOf(p).IsNil() {
		return EventDraft{}, fmt.Errorf("agentd: new event: no payload")
	}
	typ := p.EventType()
	switch {
	case conversationID == "":
		return EventDraft{}, fmt.Errorf("agentd: %s event: conversation_id is required", typ)
	case at.IsZero():
		return EventDraft{}, fmt.Errorf("agentd: %s event: timestamp is required", typ)
	}
	*p.Header() = EventHeader{Type: typ, ConversationID: conversationID, Timestamp: at.UTC()}
	if err := checkRequired(p); err != nil {
		return EventDraft{}, err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return EventDraft{}, fmt.Errorf("agentd: marshal %s event: %w", typ, err)
	}
	return EventDraft{ConversationID: conversationID, Type: typ, Data: data}, nil
}

// checkRequired reports the first field of p tagged `event:"required"`
// that holds its zero value.
func checkRequired(p EventPayload) error {
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Tag.Get("event") == "required" && v.Field(i).IsZero() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			return fmt.Errorf("agentd: %s event: %s is required", p.EventType(), name)
		}
	}
	return nil
}

// DecodeEvent returns the data of e as the payload of its type (a pointer,
// e.g. *RunStartedPayload; switch on its type). It fails for an unknown
// type, data that is not a JSON object of that type, and data whose "type"
// is not e's.
func DecodeEvent(e Event) (EventPayload, error) {
	newPayload, ok := eventPayloads[e.Type]
	if !ok {
		return nil, fmt.Errorf("agentd: event %d: unknown type %q", e.Seq, e.Type)
	}
	p := newPayload()
	if err := json.Unmarshal(e.Data, p); err != nil {
		return nil, fmt.Errorf("agentd: decode %s event %d: %w", e.Type, e.Seq, err)
	}
	if got := p.Header().Type; got != e.Type {
		return nil, fmt.Errorf("agentd: decode %s event %d: its data has type %q", e.Type, e.Seq, got)
	}
	return p, nil
}
