package agentd

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/events")

// Fixed ids and times of the golden events.
const (
	tConv   = "conv_0193a5b0-7e1a-7c3d-9f00-000000000001"
	tRun    = "run_0193a5b0-7e1a-7c3d-9f00-000000000002"
	tMsg    = "msg_0193a5b0-7e1a-7c3d-9f00-000000000003"
	tCall   = "call_0193a5b0-7e1a-7c3d-9f00-000000000004"
	tCall2  = "call_0193a5b0-7e1a-7c3d-9f00-000000000005"
	tCorr   = "0193a5b0-7e1a-7c3d-9f00-000000000006"
	tInput  = "inp_0193a5b0-7e1a-7c3d-9f00-000000000007"
	tDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tEdited = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

var (
	tAt       = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	tDeadline = time.Date(2026, 11, 30, 12, 15, 0, 123456789, time.UTC)
)

func ptr(s string) *string { return &s }

// noDiff is a card's diff where none applies: a nil Diff is written as
// null, and null decodes to this.
var noDiff = json.RawMessage("null")

// eventFixture is a fully populated payload of one event type (name is
// the type) or of one variant of it (name is type_variant); its golden
// file is testdata/events/<name>.json.
type eventFixture struct {
	name string
	new  func() EventPayload
}

func eventFixtures() []eventFixture {
	return []eventFixture{
		{"run_started", func() EventPayload { return &RunStartedPayload{RunID: tRun, CorrelationID: tCorr} }},
		{"run_started_traced", func() EventPayload {
			return &RunStartedPayload{RunID: tRun, CorrelationID: tCorr, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
		}},
		{"text_delta", func() EventPayload {
			return &TextDeltaPayload{RunID: tRun, MessageID: tMsg, Delta: "Refunding <order> & co"}
		}},
		{"message", func() EventPayload {
			return &MessagePayload{RunID: tRun, MessageID: tMsg, Role: RoleAssistant, Content: "I will refund the order."}
		}},
		{"tool_call_started", func() EventPayload {
			return &ToolCallStartedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "lookup_order", ServerID: "tools",
				Arguments: json.RawMessage(`{"order_id":"o_1"}`)}
		}},
		{"tool_call_started_large", func() EventPayload {
			return &ToolCallStartedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "write_file", ServerID: "files",
				Arguments: noDiff, Omitted: Omitted{"arguments": {Bytes: 811231, SHA256: tDigest}}}
		}},
		{"tool_call_started_confirmed_write", func() EventPayload {
			return &ToolCallStartedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "request", ServerID: "connections",
				Arguments: json.RawMessage(`{"connection":"billing","method":"POST","path":"/refunds","intent":"confirmed_write"}`),
				Intent:    "confirmed_write"}
		}},
		{"confirmation_required", confirmationRequiredConnection},
		{"confirmation_required_large", func() EventPayload {
			// A write over LargeValueBytes: the call's arguments and diff
			// are named by size and digest, not copied (ToolCall.Announcement).
			return &ConfirmationRequiredPayload{RunID: tRun, CorrelationID: tCorr, ToolCallID: tCall, ToolName: "write_file", ServerID: "files",
				Endpoint: "write_file", Method: "TOOL", Reason: `Tool "write_file" requires user confirmation`, Params: noDiff,
				ArgumentsSHA256: tDigest, RequiresApprovalAt: tDeadline, AllowedDecisions: []string{"approve", "deny"},
				Card: Card{Title: "Run write_file?", Summary: `Tool "write_file" requires user confirmation`, Method: "TOOL", Endpoint: "write_file",
					Diff: noDiff, Arguments: noDiff},
				Omitted: Omitted{"arguments": {Bytes: 811231, SHA256: tDigest}, "diff": {Bytes: 821648, SHA256: tEdited}}}
		}},
		{"confirmation_required_custom_tool", func() EventPayload {
			args := json.RawMessage(`{"amount":3}`)
			return &ConfirmationRequiredPayload{RunID: tRun, CorrelationID: tCorr, ToolCallID: tCall, ToolName: "pay", ServerID: "tools",
				Endpoint: "pay", Method: "TOOL", Reason: `Tool "pay" requires user confirmation`, Params: args,
				ArgumentsSHA256: tDigest, RequiresApprovalAt: tDeadline, AllowedDecisions: []string{"approve", "deny"},
				Card: Card{Title: "Run pay?", Summary: `Tool "pay" requires user confirmation`, Method: "TOOL", Endpoint: "pay", Diff: noDiff, Arguments: args}}
		}},
		{"confirmation_resolved", func() EventPayload {
			return &ConfirmationResolvedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "request", Decision: DecisionApproved,
				Reason: "fine, but 400", DecidedBy: "key_ops", ArgumentsSHA256: tDigest, EditedArgumentsSHA256: ptr(tEdited)}
		}},
		{"confirmation_resolved_denied", func() EventPayload {
			return &ConfirmationResolvedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "pay", Decision: DecisionDenied,
				Reason: "not this one", DecidedBy: "key_ops", ArgumentsSHA256: tDigest}
		}},
		{"confirmation_resolved_quorum", func() EventPayload {
			return &ConfirmationResolvedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "refund", Decision: DecisionApproved,
				DecidedBy: "key_ops2", ArgumentsSHA256: tDigest, ApprovedBy: []string{"key_ops1", "key_ops2"}}
		}},
		{"confirmation_progress", func() EventPayload {
			return &ConfirmationProgressPayload{RunID: tRun, ToolCallID: tCall, ToolName: "refund", Approvals: 1, Quorum: 2,
				ApprovedBy: []string{"key_ops1"}}
		}},
		{"confirmation_reminder", func() EventPayload {
			return &ConfirmationReminderPayload{RunID: tRun, ToolCallID: tCall, ToolName: "refund", RequiresApprovalAt: tDeadline,
				RemainingMS: 60000, Before: "1m"}
		}},
		{"confirmation_extended", func() EventPayload {
			return &ConfirmationExtendedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "refund", RequiresApprovalAt: tDeadline.Add(30 * time.Minute),
				PreviousRequiresApprovalAt: tDeadline, ExtendedBy: "key_ops1", Extension: "30m", Reason: "waiting for the invoice"}
		}},
		{"grant_created", func() EventPayload {
			return &GrantCreatedPayload{GrantID: "grant_01", Scope: GrantConversation, ToolName: "lookup", ExpiresAt: tDeadline,
				ToolCallID: tCall, CreatedBy: "key_ops1"}
		}},
		{"grant_revoked", func() EventPayload {
			return &GrantRevokedPayload{GrantID: "grant_01", Scope: GrantConversation, ToolName: "lookup", ExpiresAt: tDeadline, RevokedBy: "key_ops1"}
		}},
		{"tool_call_started_granted", func() EventPayload {
			return &ToolCallStartedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "lookup", ServerID: "tools",
				Arguments: json.RawMessage(`{"q":"x"}`), GrantedBy: &GrantRef{GrantID: "grant_01", KeyID: "key_ops1"}}
		}},
		{"confirmation_required_approval", func() EventPayload {
			args := json.RawMessage(`{"amount":900}`)
			return &ConfirmationRequiredPayload{RunID: tRun, CorrelationID: tCorr, ToolCallID: tCall, ToolName: "refund", ServerID: "tools",
				Endpoint: "refund", Method: "TOOL", Reason: `Tool "refund" requires user confirmation`, Params: args,
				ArgumentsSHA256: tDigest, RequiresApprovalAt: tDeadline, AllowedDecisions: []string{"approve", "deny"},
				Card: Card{Title: "Run refund?", Summary: `Tool "refund" requires user confirmation`, Method: "TOOL", Endpoint: "refund", Diff: noDiff, Arguments: args,
					Approval: &CardApproval{Approvers: []string{"operator", "group:finance"}, Quorum: 2, Approvals: 0, RequesterMayApprove: false}}}
		}},
		{"tool_call_refused", func() EventPayload {
			return &ToolCallRefusedPayload{RunID: tRun, ToolCallID: tCall, ToolName: "request", ServerID: "connections",
				Tier: TierNever, Reason: "The call was not performed: DELETE /customers/{id} on billing is never allowed", Escalated: true}
		}},
		{"tool_call_result", func() EventPayload {
			return &ToolCallResultPayload{RunID: tRun, ToolCallID: tCall, ToolName: "lookup_order", Status: StatusCompleted,
				Result: json.RawMessage(`{"ok":true}`)}
		}},
		{"tool_call_result_failed", func() EventPayload {
			return &ToolCallResultPayload{RunID: tRun, ToolCallID: tCall, ToolName: "lookup_order", Status: StatusFailed,
				Error: "the server stopped while the tool was running; its outcome is unknown"}
		}},
		{"tool_call_result_cancelled", func() EventPayload {
			return &ToolCallResultPayload{RunID: tRun, ToolCallID: tCall, ToolName: "lookup_order", Status: StatusCancelled,
				Error: "the run was cancelled before the call started; nothing was done"}
		}},
		{"run_waiting", func() EventPayload {
			return &RunWaitingPayload{RunID: tRun, CorrelationID: tCorr, Pending: []string{tCall, tCall2}}
		}},
		{"run_waiting_inputs", func() EventPayload {
			return &RunWaitingPayload{RunID: tRun, CorrelationID: tCorr, Pending: []string{tCall, tCall2}, Inputs: []string{tInput}}
		}},
		{"run_finished", func() EventPayload {
			return &RunFinishedPayload{RunID: tRun, CorrelationID: tCorr, Status: RunCompleted, Reason: "model_stop",
				Usage: Usage{InputTokens: 1200, OutputTokens: 85}, StopReason: "end_turn"}
		}},
		{"run_finished_failed", func() EventPayload {
			return &RunFinishedPayload{RunID: tRun, CorrelationID: tCorr, Status: RunFailed, Reason: "error",
				Usage: Usage{InputTokens: 10, OutputTokens: 0}, StopReason: "tool_calls", Error: "the provider is overloaded"}
		}},
		{"run_finished_cancelled", func() EventPayload {
			return &RunFinishedPayload{RunID: tRun, CorrelationID: tCorr, Status: RunCancelled, Reason: "cancelled",
				Usage: Usage{InputTokens: 10, OutputTokens: 2}}
		}},
		{"error", func() EventPayload {
			return &ErrorPayload{RunID: tRun, Code: "run_failed", Message: "the provider is overloaded"}
		}},
		{"input_required", func() EventPayload {
			return &InputRequiredPayload{InputID: tInput, ToolCallID: tCall, ToolName: "ask_user", ServerID: "inputs", RunID: tRun,
				Source: InputSourceAskUser, Key: "ask_user", Round: 1, Mode: InputModeForm, Message: "Which order should I refund?",
				Schema:    json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","title":"Order"}},"required":["order_id"]}`),
				ExpiresAt: tDeadline, Answerers: []string{ApproverOwner}}
		}},
		{"input_resolved", func() EventPayload {
			return &InputResolvedPayload{InputID: tInput, ToolCallID: tCall, Status: InputAnswered, Action: InputAccept,
				Content: json.RawMessage(`{"order_id":"o_1"}`), AnsweredBy: "key_c1", Via: ViaSingle}
		}},
		{"input_resolved_declined", func() EventPayload {
			return &InputResolvedPayload{InputID: tInput, ToolCallID: tCall, Status: InputAnswered, Action: InputDecline,
				AnsweredBy: "key_c1", Via: ViaSingle}
		}},
		{"input_resolved_cancelled", func() EventPayload {
			return &InputResolvedPayload{InputID: tInput, ToolCallID: tCall, Status: InputCancelled, Reason: InputReasonRunCancelled,
				Via: ViaCancel}
		}},
		{"subagent_event", func() EventPayload {
			return &SubagentEventPayload{ToolCallID: tCall, Subagent: "researcher",
				Event: json.RawMessage(`{"type":"text_delta","conversation_id":"` + tConv + `","timestamp":"2026-11-30T12:00:00.123456789Z","run_id":"` + tRun + `","message_id":"` + tMsg + `","delta":"Looking"}`)}
		}},
	}
}

func confirmationRequiredConnection() EventPayload {
	params := json.RawMessage(`{"path":{},"query":{},"header":{},"body":{"amount":500,"order_id":"o_1"}}`)
	return &ConfirmationRequiredPayload{RunID: tRun, CorrelationID: tCorr, ToolCallID: tCall, ToolName: "request",
		ServerID: "connections", Endpoint: "/refunds", Method: "POST", Reason: "Moves money back to the customer",
		Escalated: true, Params: params, ConnectionName: ptr("billing"), ArgumentsSHA256: tDigest,
		RequiresApprovalAt: tDeadline, AllowedDecisions: []string{"approve", "deny", "edit"},
		Card: Card{Title: "POST /refunds on billing?", Summary: "Moves money back to the customer",
			ConnectionName: ptr("billing"), Method: "POST", Endpoint: "/refunds", PathTemplate: ptr("/refunds"), Diff: noDiff, Arguments: params}}
}

func mustDraft(t *testing.T, p EventPayload) EventDraft {
	t.Helper()
	d, err := NewEventDraft(tConv, tAt, p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEventFixturesCoverEveryType: one fixture named after each event type.
func TestEventFixturesCoverEveryType(t *testing.T) {
	var names []string
	for _, f := range eventFixtures() {
		names = append(names, f.name)
		if typ := f.new().EventType(); f.name != typ && !strings.HasPrefix(f.name, typ+"_") {
			t.Errorf("fixture %s is a %s", f.name, typ)
		}
	}
	for typ := range eventPayloads {
		if !slices.Contains(names, typ) {
			t.Errorf("no fixture for %s", typ)
		}
		if got := eventPayloads[typ]().EventType(); got != typ {
			t.Errorf("eventPayloads[%q] makes a %s", typ, got)
		}
	}
}

// TestEventGolden pins the JSON of every type and variant; -update
// rewrites the files.
func TestEventGolden(t *testing.T) {
	dir := filepath.Join("testdata", "events")
	want := map[string]bool{}
	for _, f := range eventFixtures() {
		file := filepath.Join(dir, f.name+".json")
		want[filepath.Base(file)] = true
		d := mustDraft(t, f.new())
		var got bytes.Buffer
		if err := json.Indent(&got, d.Data, "", "  "); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		got.WriteByte('\n')
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		golden, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s (run go test -update to create it)", err)
		}
		if !bytes.Equal(got.Bytes(), golden) {
			t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", f.name, file, got.Bytes())
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, file := range files {
		if !want[filepath.Base(file)] {
			t.Errorf("%s has no fixture; delete it", file)
		}
	}
}

func TestEventHeaderAndDraft(t *testing.T) {
	local := time.Date(2026, 11, 30, 13, 0, 0, 500, time.FixedZone("CET", 3600))
	d, err := NewEventDraft(tConv, local, &TextDeltaPayload{RunID: tRun, MessageID: tMsg, Delta: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if d.ConversationID != tConv || d.Type != EventTextDelta {
		t.Fatalf("draft = %+v", d)
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(d.Data, &head); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"type": `"text_delta"`, "conversation_id": `"` + tConv + `"`, "timestamp": `"2026-11-30T12:00:00.0000005Z"`} {
		if string(head[k]) != v {
			t.Errorf("%s = %s, want %s", k, head[k], v)
		}
	}
}

// A completed call with no output has "result": null, and no "error"; any
// other status has "error" (even empty) and no "result".
func TestToolCallResultResultOrError(t *testing.T) {
	for _, tc := range []struct {
		p    *ToolCallResultPayload
		has  string
		not  string
		want string
	}{
		{&ToolCallResultPayload{Status: StatusCompleted, Error: "ignored"}, "result", "error", "null"},
		{&ToolCallResultPayload{Status: StatusFailed, Result: json.RawMessage(`1`)}, "error", "result", `""`},
	} {
		tc.p.RunID, tc.p.ToolCallID, tc.p.ToolName = tRun, tCall, "t"
		var m map[string]json.RawMessage
		if err := json.Unmarshal(mustDraft(t, tc.p).Data, &m); err != nil {
			t.Fatal(err)
		}
		if string(m[tc.has]) != tc.want {
			t.Errorf("%s: %s = %s, want %s", tc.p.Status, tc.has, m[tc.has], tc.want)
		}
		if _, ok := m[tc.not]; ok {
			t.Errorf("%s: has %s", tc.p.Status, tc.not)
		}
	}
}

func TestDecodeEventRoundTrip(t *testing.T) {
	for i, f := range eventFixtures() {
		want := f.new()
		d := mustDraft(t, want)
		got, err := DecodeEvent(Event{ConversationID: d.ConversationID, Seq: int64(i + 1), Type: d.Type, Data: d.Data})
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded\n%#v\nwant\n%#v", f.name, got, want)
		}
		if h := got.Header(); h.Type != f.new().EventType() || h.ConversationID != tConv || !h.Timestamp.Equal(tAt) {
			t.Errorf("%s: header %+v", f.name, h)
		}
	}
}

func TestDecodeEventUnknownType(t *testing.T) {
	_, err := DecodeEvent(Event{Seq: 7, Type: "run_paused", Data: json.RawMessage(`{"type":"run_paused"}`)})
	if err == nil || !strings.Contains(err.Error(), `unknown type "run_paused"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeEventMalformed(t *testing.T) {
	for _, data := range []string{
		``,
		`{`,
		`[]`,
		`null`,
		`"run_started"`,
		`{"run_id":"r"}`,                    // no type
		`{"type":"message","run_id":"r"}`,   // another type's data
		`{"type":"run_started","run_id":5}`, // a field of the wrong JSON type
		`{"type":"run_started","timestamp":"yesterday"}`,
	} {
		if p, err := DecodeEvent(Event{Seq: 1, Type: EventRunStarted, Data: json.RawMessage(data)}); err == nil {
			t.Errorf("DecodeEvent(%q) = %+v, want an error", data, p)
		}
	}
}

// requiredFields are the JSON names of the fields each type requires.
var requiredFields = map[string][]string{
	EventRunStarted:           {"run_id", "correlation_id"},
	EventTextDelta:            {"run_id", "message_id", "delta"},
	EventMessage:              {"run_id", "message_id", "role", "content"},
	EventToolCallStarted:      {"run_id", "tool_call_id", "tool_name"},
	EventConfirmationRequired: {"run_id", "correlation_id", "tool_call_id", "tool_name", "endpoint", "method", "arguments_sha256", "requires_approval_at", "allowed_decisions", "card"},
	EventConfirmationResolved: {"run_id", "tool_call_id", "tool_name", "decision", "decided_by", "arguments_sha256"},
	EventConfirmationProgress: {"run_id", "tool_call_id", "tool_name", "approvals", "quorum", "approved_by"},
	EventConfirmationReminder: {"run_id", "tool_call_id", "tool_name", "requires_approval_at", "offset"},
	EventConfirmationExtended: {"run_id", "tool_call_id", "tool_name", "requires_approval_at", "previous_requires_approval_at", "extended_by", "by"},
	EventToolCallRefused:      {"run_id", "tool_call_id", "tier", "reason"},
	EventToolCallResult:       {"run_id", "tool_call_id", "tool_name", "status"},
	EventRunWaiting:           {"run_id", "correlation_id", "pending"},
	EventRunFinished:          {"run_id", "correlation_id", "status", "reason"},
	EventError:                {"code", "message"},
	EventSubagentEvent:        {"tool_call_id", "subagent", "event"},
	EventGrantCreated:         {"grant_id", "scope", "tool_name", "expires_at"},
	EventGrantRevoked:         {"grant_id", "scope", "tool_name", "expires_at"},
	EventInputRequired:        {"input_id", "tool_call_id", "tool_name", "run_id", "source", "key", "round", "mode", "message", "expires_at", "answerers"},
	EventInputResolved:        {"input_id", "tool_call_id", "status"},
}

// TestNewEventDraftRequiredFields zeroes each required field of each type
// in turn and expects an error naming the type and the field.
func TestNewEventDraftRequiredFields(t *testing.T) {
	for _, f := range eventFixtures() {
		typ := f.new().EventType()
		if f.name != typ {
			continue // the variants share their type's fields
		}
		fields := requiredFields[typ]
		if fields == nil {
			t.Errorf("%s: no entry in requiredFields", typ)
		}
		var tagged []string
		rt := reflect.TypeOf(f.new()).Elem()
		for i := range rt.NumField() {
			if rt.Field(i).Tag.Get("event") == "required" {
				name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
				tagged = append(tagged, name)
			}
		}
		if !slices.Equal(sorted(tagged), sorted(fields)) {
			t.Errorf("%s: required fields are %v, want %v", typ, tagged, fields)
		}
		for _, field := range fields {
			p := f.new()
			zeroField(t, p, field)
			_, err := NewEventDraft(tConv, tAt, p)
			if err == nil || !strings.Contains(err.Error(), typ+" event: "+field+" is required") {
				t.Errorf("%s without %s: err = %v", typ, field, err)
			}
		}
	}
}

func TestNewEventDraftRefuses(t *testing.T) {
	ok := func() EventPayload { return &RunStartedPayload{RunID: tRun, CorrelationID: tCorr} }
	for name, build := range map[string]func() (EventDraft, error){
		"no conversation": func() (EventDraft, error) { return NewEventDraft("", tAt, ok()) },
		"no time":         func() (EventDraft, error) { return NewEventDraft(tConv, time.Time{}, ok()) },
		"nil payload":     func() (EventDraft, error) { return NewEventDraft(tConv, tAt, nil) },
		"typed nil":       func() (EventDraft, error) { return NewEventDraft(tConv, tAt, (*RunStartedPayload)(nil)) },
		"bad raw JSON": func() (EventDraft, error) {
			return NewEventDraft(tConv, tAt, &SubagentEventPayload{ToolCallID: tCall, Subagent: "s", Event: json.RawMessage(`{`)})
		},
	} {
		if d, err := build(); err == nil {
			t.Errorf("%s: draft %+v, want an error", name, d)
		}
	}
}

func zeroField(t *testing.T, p EventPayload, jsonName string) {
	t.Helper()
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); name == jsonName {
			v.Field(i).SetZero()
			return
		}
	}
	t.Fatalf("%s has no field %s", p.EventType(), jsonName)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
