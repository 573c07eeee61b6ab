package webhook_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// TestBuildLeavesLargeArgumentsOut: every webhook of a call whose arguments
// are over agentd.LargeValueBytes carries arguments_json {} and
// arguments_omitted (size and digest) instead of a copy, valid under its
// schema — also for the event's own (edited) arguments and for an event
// that already left them out; small arguments are copied as before.
func TestBuildLeavesLargeArgumentsOut(t *testing.T) {
	big := json.RawMessage(`{"content":"` + strings.Repeat("x", agentd.LargeValueBytes) + `"}`)
	digest, err := agentd.DigestJSON(big)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	call := &agentd.ToolCall{ID: "call_1", TenantID: "t", ProjectID: "p", ConversationID: "conv_1", Name: "write_file",
		ServerID: "files", Arguments: big, ArgumentsSHA256: digest, CorrelationID: "corr", RequiresApprovalAt: &at}
	marker := agentd.OmittedValue{Bytes: len(big), SHA256: digest}
	for _, tc := range []struct {
		name string
		typ  string
		p    agentd.EventPayload
	}{
		{"approval required", agentd.EventConfirmationRequired, &agentd.ConfirmationRequiredPayload{ToolCallID: "call_1",
			ArgumentsSHA256: digest, RequiresApprovalAt: at, Omitted: agentd.Omitted{"arguments": marker}}},
		{"approval required, edited since", agentd.EventConfirmationRequired, &agentd.ConfirmationRequiredPayload{ToolCallID: "call_1",
			ArgumentsSHA256: "other", RequiresApprovalAt: at, Omitted: agentd.Omitted{"arguments": marker}}},
		{"resolved", agentd.EventConfirmationResolved, &agentd.ConfirmationResolvedPayload{ToolCallID: "call_1", Decision: agentd.DecisionApproved}},
		{"started, left out by the event", agentd.EventToolCallStarted, &agentd.ToolCallStartedPayload{ToolCallID: "call_1",
			Omitted: agentd.Omitted{"arguments": marker}}},
		{"started, copied by an older event", agentd.EventToolCallStarted, &agentd.ToolCallStartedPayload{ToolCallID: "call_1", Arguments: big}},
		{"completed", agentd.EventToolCallResult, &agentd.ToolCallResultPayload{ToolCallID: "call_1", Status: agentd.StatusCompleted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Header().Timestamp = at
			out, err := webhook.Build(agentd.Event{ConversationID: "conv_1", Seq: 3, Type: tc.typ}, tc.p, call)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(out)
			webhooktest.Validate(t, body)
			if string(out.ToolCall.ArgumentsJSON) != "{}" || out.ToolCall.ArgumentsOmitted == nil || *out.ToolCall.ArgumentsOmitted != marker {
				t.Errorf("arguments_json %d bytes, arguments_omitted %v; want {} and %v", len(out.ToolCall.ArgumentsJSON), out.ToolCall.ArgumentsOmitted, marker)
			}
			if len(body) > 4096 {
				t.Errorf("body is %d bytes", len(body))
			}
		})
	}
	small := *call
	small.Arguments = json.RawMessage(`{"content":"x"}`)
	out, err := webhook.Build(agentd.Event{ConversationID: "conv_1", Seq: 4, Type: agentd.EventToolCallResult},
		&agentd.ToolCallResultPayload{ToolCallID: "call_1", Status: agentd.StatusCompleted}, &small)
	if err != nil || string(out.ToolCall.ArgumentsJSON) != `{"content":"x"}` || out.ToolCall.ArgumentsOmitted != nil {
		t.Errorf("small arguments: %s, %v, %v", out.ToolCall.ArgumentsJSON, out.ToolCall.ArgumentsOmitted, err)
	}
}

// TestBuildNamesTheCard: the approval-required webhook of a call parked
// again carries the card's card_revision (what a back office sends with its
// decision, api.md "What binds a decision"), valid under its schema; a first
// card carries none.
func TestBuildNamesTheCard(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	call := &agentd.ToolCall{ID: "call_1", TenantID: "t", ProjectID: "p", ConversationID: "conv_1", Name: "write_file",
		ServerID: "files", Arguments: json.RawMessage(`{"path":"notes.md"}`), CorrelationID: "corr", RequiresApprovalAt: &at}
	for _, rev := range []int{0, 2, 3} {
		p := &agentd.ConfirmationRequiredPayload{ToolCallID: "call_1", RequiresApprovalAt: at, CardRevision: rev}
		p.Header().Timestamp = at
		out, err := webhook.Build(agentd.Event{ConversationID: "conv_1", Seq: 3, Type: agentd.EventConfirmationRequired}, p, call)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(out)
		webhooktest.Validate(t, body)
		var got struct {
			ToolCall map[string]json.RawMessage `json:"tool_call"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		raw, ok := got.ToolCall["card_revision"]
		switch {
		case rev == 0 && ok:
			t.Errorf("a first card names card_revision %s", raw)
		case rev > 0 && string(raw) != strconv.Itoa(rev):
			t.Errorf("card %d: card_revision %q", rev, raw)
		}
	}
}
