package webhook

import (
	"crypto/sha256"
	"embed"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/google/uuid"
)

// The webhook events (SPEC §7), each made from one event type of the log.
const (
	EventApprovalRequired = "llm.tool_call_approval_required" // confirmation_required
	EventApprovalResolved = "llm.tool_call_approval_resolved" // confirmation_resolved
	EventApprovalReminder = "llm.tool_call_approval_reminder" // confirmation_reminder
	EventApprovalExtended = "llm.tool_call_approval_extended" // confirmation_extended
	EventStarted          = "llm.tool_call_started"           // tool_call_started
	EventCompleted        = "llm.tool_call_completed"         // tool_call_result
	EventRefused          = "llm.tool_call_refused"           // tool_call_refused
)

// EventNames are the webhook events, in the order of SPEC §7.
var EventNames = []string{EventApprovalRequired, EventApprovalResolved, EventStarted, EventCompleted, EventRefused,
	EventApprovalReminder, EventApprovalExtended}

// eventOf maps a log event type to its webhook event.
var eventOf = map[string]string{
	agentd.EventConfirmationRequired: EventApprovalRequired,
	agentd.EventConfirmationResolved: EventApprovalResolved,
	agentd.EventToolCallStarted:      EventStarted,
	agentd.EventToolCallResult:       EventCompleted,
	agentd.EventToolCallRefused:      EventRefused,
	agentd.EventConfirmationReminder: EventApprovalReminder,
	agentd.EventConfirmationExtended: EventApprovalExtended,
}

// PayloadVersion is event_context.version.
const PayloadVersion = "1.0"

// Payload is the body of every webhook: protobuf field names, enums as
// names, timestamps RFC 3339 (schemas/*.json pin it per event).
type Payload struct {
	EventContext EventContext `json:"event_context"`
	ToolCall     ToolCall     `json:"tool_call"`
	// DecisionLinks are the call's decision links, in
	// llm.tool_call_approval_required to an endpoint with
	// include_decision_links (Options.Links); absent otherwise.
	DecisionLinks *agentd.DecisionLinks `json:"decision_links,omitempty"`
}

// EventContext is the event's provenance and routing.
type EventContext struct {
	EventName string `json:"event_name"`
	Version   string `json:"version"`
	// EventID is derived from the log event (conversation and sequence
	// number): the same event always has the same id.
	EventID       string    `json:"event_id"`
	CorrelationID string    `json:"correlation_id"`
	EmittedAt     time.Time `json:"emitted_at"`
	// CallerKey is "<tenant>:<conversation>".
	CallerKey string `json:"caller_key"`
	TenantID  string `json:"tenant_id"`
	ProjectID string `json:"project_id"`
	// TraceID and TraceParent are the W3C trace id of the call's run and
	// the traceparent of its run's span, when traces are on
	// (Options.Traces); absent otherwise. The delivery's traceparent
	// header is TraceParent.
	TraceID     string `json:"trace_id,omitempty"`
	TraceParent string `json:"traceparent,omitempty"`
}

// ToolCall is the call as the event saw it.
type ToolCall struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	ServerID string `json:"server_id"`
	// ArgumentsJSON is the effective arguments, a JSON object.
	ArgumentsJSON json.RawMessage `json:"arguments_json"`
	// ArgumentsOmitted stands for arguments larger than
	// agentd.LargeValueBytes, which ArgumentsJSON leaves out ({}); nil
	// otherwise.
	ArgumentsOmitted *agentd.OmittedValue `json:"arguments_omitted,omitempty"`
	// Status is a TOOL_EXECUTION_STATUS_* name.
	Status string `json:"status"`
	// RequiresApprovalAt is the decision deadline (approval events).
	RequiresApprovalAt *time.Time `json:"requires_approval_at,omitempty"`
	// CardRevision is the card's number when the call was parked again
	// (llm.tool_call_approval_required; 2, 3, …): a decision sends it to
	// answer this card. Absent on a call's first card.
	CardRevision int `json:"card_revision,omitempty"`
	// ResultJSON is the tool's result (llm.tool_call_completed, completed).
	ResultJSON json.RawMessage `json:"result_json,omitempty"`
	// Error is a failed call's error message.
	Error string `json:"error,omitempty"`
	// Reason is a refusal's reason, or a decision's.
	Reason string `json:"reason,omitempty"`
	// ReminderOffset and RemainingMS are a reminder's
	// (llm.tool_call_approval_reminder); PreviousRequiresApprovalAt,
	// ExtendedBy (a key id) and ExtendedFor (the duration) an extension's
	// (llm.tool_call_approval_extended). SPEC §11.3.
	ReminderOffset             string     `json:"reminder_offset,omitempty"`
	RemainingMS                *int64     `json:"remaining_ms,omitempty"`
	PreviousRequiresApprovalAt *time.Time `json:"previous_requires_approval_at,omitempty"`
	ExtendedBy                 string     `json:"extended_by,omitempty"`
	ExtendedFor                string     `json:"extended_for,omitempty"`
	// Subagent and TaskToolCallID mark a subagent's call (started,
	// completed, refused): the subagent's name and the parent's task call
	// that ran it. Absent for the agent's own calls.
	Subagent       string `json:"subagent,omitempty"`
	TaskToolCallID string `json:"task_tool_call_id,omitempty"`
}

// StatusName is the TOOL_EXECUTION_STATUS_* name of a call status.
func StatusName(s agentd.CallStatus) string {
	return "TOOL_EXECUTION_STATUS_" + strings.ToUpper(string(s))
}

// decisionStatus is the status a parked call has after a decision.
var decisionStatus = map[string]agentd.CallStatus{
	agentd.DecisionApproved:  agentd.StatusApproved,
	agentd.DecisionDenied:    agentd.StatusDenied,
	agentd.DecisionExpired:   agentd.StatusExpired,
	agentd.DecisionCancelled: agentd.StatusCancelled,
}

// EventName returns the webhook event of a log event type, and whether it
// has one.
func EventName(eventType string) (string, bool) {
	name, ok := eventOf[eventType]
	return name, ok
}

// toolCallID returns the id of the call a decoded webhook-worthy event is
// about.
func toolCallID(p agentd.EventPayload) string {
	switch p := p.(type) {
	case *agentd.ConfirmationRequiredPayload:
		return p.ToolCallID
	case *agentd.ConfirmationResolvedPayload:
		return p.ToolCallID
	case *agentd.ToolCallStartedPayload:
		return p.ToolCallID
	case *agentd.ToolCallResultPayload:
		return p.ToolCallID
	case *agentd.ToolCallRefusedPayload:
		return p.ToolCallID
	case *agentd.ConfirmationReminderPayload:
		return p.ToolCallID
	case *agentd.ConfirmationExtendedPayload:
		return p.ToolCallID
	}
	return ""
}

// Build returns the payload of the webhook event of e, a log event that has
// one (EventName), given e's decoded data p and the call it is about as the
// store holds it now (for its tenant, correlation and server). What the
// event itself carries wins over the call's current state.
func Build(e agentd.Event, p agentd.EventPayload, call *agentd.ToolCall) (Payload, error) {
	name, ok := eventOf[e.Type]
	if !ok {
		return Payload{}, fmt.Errorf("webhook: event type %s has no webhook event", e.Type)
	}
	h := p.Header()
	out := Payload{
		EventContext: EventContext{EventName: name, Version: PayloadVersion, EventID: EventID(e),
			CorrelationID: call.CorrelationID, EmittedAt: h.Timestamp,
			CallerKey: call.TenantID + ":" + e.ConversationID, TenantID: call.TenantID, ProjectID: call.ProjectID},
		ToolCall: ToolCall{ID: call.ID, Name: call.Name, ServerID: call.ServerID, ArgumentsJSON: call.Arguments},
	}
	tc := &out.ToolCall
	switch p := p.(type) {
	case *agentd.ConfirmationRequiredPayload:
		tc.Status = StatusName(agentd.StatusRequiresConfirmation)
		at := p.RequiresApprovalAt
		tc.RequiresApprovalAt, tc.CardRevision = &at, p.CardRevision
		if p.ArgumentsSHA256 != call.ArgumentsSHA256 { // edited since: the event's arguments
			tc.ArgumentsJSON, tc.ArgumentsOmitted = p.Params, omittedOf(p.Omitted, "params", "arguments")
		}
	case *agentd.ConfirmationResolvedPayload:
		st, ok := decisionStatus[p.Decision]
		if !ok {
			return Payload{}, fmt.Errorf("webhook: event %d: unknown decision %q", e.Seq, p.Decision)
		}
		tc.Status, tc.Reason, tc.RequiresApprovalAt = StatusName(st), p.Reason, call.RequiresApprovalAt
	case *agentd.ToolCallStartedPayload:
		tc.Status, tc.ArgumentsJSON = StatusName(agentd.StatusExecuting), p.Arguments
		tc.ArgumentsOmitted = omittedOf(p.Omitted, "arguments")
	case *agentd.ToolCallResultPayload:
		tc.Status = StatusName(p.Status)
		if p.Status == agentd.StatusCompleted {
			tc.ResultJSON = p.Result
			if len(tc.ResultJSON) == 0 {
				tc.ResultJSON = json.RawMessage("null")
			}
		} else {
			tc.Error = p.Error
		}
	case *agentd.ToolCallRefusedPayload:
		tc.Status, tc.Reason = StatusName(agentd.StatusRefused), p.Reason
	case *agentd.ConfirmationReminderPayload:
		at, ms := p.RequiresApprovalAt, p.RemainingMS
		tc.Status, tc.RequiresApprovalAt, tc.ReminderOffset, tc.RemainingMS = StatusName(agentd.StatusRequiresConfirmation), &at, p.Before, &ms
	case *agentd.ConfirmationExtendedPayload:
		at, prev := p.RequiresApprovalAt, p.PreviousRequiresApprovalAt
		tc.Status, tc.RequiresApprovalAt, tc.PreviousRequiresApprovalAt = StatusName(agentd.StatusRequiresConfirmation), &at, &prev
		tc.ExtendedBy, tc.ExtendedFor, tc.Reason = p.ExtendedBy, p.Extension, p.Reason
	}
	summarize(tc)
	if !isObject(tc.ArgumentsJSON) {
		tc.ArgumentsJSON = json.RawMessage("{}")
	}
	return out, nil
}

// summarize leaves arguments larger than agentd.LargeValueBytes out of tc
// (arguments_json {}) and names them by size and digest in
// arguments_omitted; the whole call is GET /v1/tool-calls/{id}.
func summarize(tc *ToolCall) {
	if tc.ArgumentsOmitted != nil || len(tc.ArgumentsJSON) <= agentd.LargeValueBytes {
		return
	}
	d, err := agentd.DigestJSON(tc.ArgumentsJSON)
	if err != nil {
		return // not JSON: isObject replaces it
	}
	tc.ArgumentsOmitted = &agentd.OmittedValue{Bytes: len(tc.ArgumentsJSON), SHA256: d}
	tc.ArgumentsJSON = nil
}

// omittedOf is the first of an event's omitted values named by fields,
// nil if it has none of them.
func omittedOf(om agentd.Omitted, fields ...string) *agentd.OmittedValue {
	for _, f := range fields {
		if v, ok := om[f]; ok {
			return &v
		}
	}
	return nil
}

// innerEvent returns the event a subagent_event wraps, with the outer
// event's conversation, sequence number and position (so its event_id is
// the outer event's), and the subagent_event's data.
func innerEvent(e agentd.Event) (agentd.Event, *agentd.SubagentEventPayload, error) {
	p, err := agentd.DecodeEvent(e)
	if err != nil {
		return e, nil, err
	}
	sub, ok := p.(*agentd.SubagentEventPayload)
	if !ok {
		return e, nil, fmt.Errorf("webhook: event %d is not a subagent_event", e.Seq)
	}
	var h agentd.EventHeader
	if err := json.Unmarshal(sub.Event, &h); err != nil {
		return e, nil, fmt.Errorf("webhook: subagent_event %d: %w", e.Seq, err)
	}
	return agentd.Event{ConversationID: e.ConversationID, Seq: e.Seq, Position: e.Position, Type: h.Type, Data: sub.Event}, sub, nil
}

// BuildSubagent returns the payload of the webhook event of a subagent's
// call: e is the event a subagent_event sub wraps (innerEvent), p its
// decoded data, and task the parent's task call that ran the subagent,
// whose tenant, project and correlation it has. The subagent's call is
// not stored: its id, name and server come from the event itself, its
// arguments_json from tool_call_started only ({} on the other events),
// and the payload names the subagent and the task call.
func BuildSubagent(e agentd.Event, p agentd.EventPayload, sub *agentd.SubagentEventPayload, task *agentd.ToolCall) (Payload, error) {
	c := agentd.ToolCall{ID: toolCallID(p), TenantID: task.TenantID, ProjectID: task.ProjectID, CorrelationID: task.CorrelationID}
	switch p := p.(type) {
	case *agentd.ToolCallStartedPayload:
		c.Name, c.ServerID = p.ToolName, p.ServerID
	case *agentd.ToolCallResultPayload:
		c.Name = p.ToolName
	case *agentd.ToolCallRefusedPayload:
		c.Name, c.ServerID = p.ToolName, p.ServerID
	default: // a subagent asks no person: it has no approval events
		return Payload{}, fmt.Errorf("webhook: event %d: a subagent's %s has no webhook event", e.Seq, e.Type)
	}
	out, err := Build(e, p, &c)
	if err != nil {
		return out, err
	}
	out.ToolCall.Subagent, out.ToolCall.TaskToolCallID = sub.Subagent, sub.ToolCallID
	return out, nil
}

func isObject(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return strings.HasPrefix(t, "{")
}

// eventNamespace namespaces the event ids (UUID v5) of agentd's events.
var eventNamespace = uuid.MustParse("6f1d3c7e-3a52-4c1e-9a37-8f0e7c2b5d41")

// EventID is the event_id of a log event: a UUID derived from its
// conversation and sequence number, so it is the same after any restart.
func EventID(e agentd.Event) string {
	return uuid.NewSHA1(eventNamespace, fmt.Appendf(nil, "%s/%d", e.ConversationID, e.Seq)).String()
}

// DeliveryID is the webhook-id of an event for an endpoint: derived from
// both, so a delivery re-created after a crash has the same id, and
// different endpoints see different ids.
func DeliveryID(eventID, endpointID string) string {
	sum := sha256.Sum256([]byte(eventID + "\x00" + endpointID))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// Schemas holds the JSON Schema of each event's body, schemas/<event>.json
// (draft 2020-12); tests validate every delivered body against them.
//
//go:embed schemas/*.json
var Schemas embed.FS
