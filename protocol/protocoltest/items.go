// Package protocoltest builds the event sequences the protocol encoders'
// golden, fuzz and benchmark tests feed them: typed agentd events, made
// with agentd.NewEventDraft and read back with agentd.DecodeEvent as the
// stream reads them.
package protocoltest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
)

// T0 is the time of the first event; each next one is a millisecond later.
var T0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// Fixed ids of the scenario.
const (
	Conv    = "conv_00000000-0000-7000-8000-000000000001"
	Run     = "run_00000000-0000-7000-8000-000000000002"
	Msg1    = "msg_00000000-0000-7000-8000-000000000003"
	Msg2    = "msg_00000000-0000-7000-8000-000000000004"
	Auto    = "call_00000000-0000-7000-8000-000000000005"
	Parked  = "call_00000000-0000-7000-8000-000000000006"
	Refused = "call_00000000-0000-7000-8000-000000000007"
	Denied  = "call_00000000-0000-7000-8000-000000000008"
)

// Deadline is the parked calls' requires_approval_at.
var Deadline = T0.Add(15 * time.Minute)

// Calls are the scenario's tool calls as the store holds them.
func Calls() map[string]*agentd.ToolCall {
	mk := func(id, name string, tier agentd.Tier, status agentd.CallStatus, args string) *agentd.ToolCall {
		return &agentd.ToolCall{ID: id, ConversationID: Conv, RunID: Run, MessageID: Msg1, Name: name, Tier: tier, Status: status,
			Arguments: json.RawMessage(args), ArgumentsSHA256: fmt.Sprintf("%064x", len(id)+len(name)), Method: "TOOL", Endpoint: name}
	}
	d := Deadline
	parked := mk(Parked, "pay", agentd.TierConfirm, agentd.StatusRequiresConfirmation, `{"amount":5}`)
	parked.RequiresApprovalAt, parked.Reason, parked.AllowedDecisions = &d, "payments need a person", []string{"approve", "deny"}
	denied := mk(Denied, "pay", agentd.TierConfirm, agentd.StatusRequiresConfirmation, `{"amount":7}`)
	denied.RequiresApprovalAt, denied.AllowedDecisions = &d, []string{"approve", "edit", "deny"}
	return map[string]*agentd.ToolCall{
		Auto:    mk(Auto, "lookup", agentd.TierAuto, agentd.StatusExecuting, `{"order_id":"A-1"}`),
		Parked:  parked,
		Refused: mk(Refused, "wipe", agentd.TierNever, agentd.StatusRefused, `{}`),
		Denied:  denied,
	}
}

// Scenario is one run's events in the order the loop commits them: a
// streamed step with four calls (auto, two parked, refused), the auto
// call's run and result, a denial, the approved call's run and a failure,
// then a step whose text was not streamed, and the end.
func Scenario() []protocol.Item {
	calls := Calls()
	payloads := []agentd.EventPayload{
		&agentd.RunStartedPayload{RunID: Run, CorrelationID: "corr"},
		&agentd.TextDeltaPayload{RunID: Run, MessageID: Msg1, Delta: "Looking "},
		&agentd.TextDeltaPayload{RunID: Run, MessageID: Msg1, Delta: "that up \"now\"\n"},
		&agentd.MessagePayload{RunID: Run, MessageID: Msg1, Role: "assistant", Content: "Looking that up \"now\"\n"},
		confirmation(calls[Parked]),
		confirmation(calls[Denied]),
		&agentd.ToolCallRefusedPayload{RunID: Run, ToolCallID: Refused, ToolName: "wipe", Tier: agentd.TierNever, Reason: "never wipes"},
		&agentd.RunWaitingPayload{RunID: Run, CorrelationID: "corr", Pending: []string{Parked, Denied}},
		&agentd.ToolCallStartedPayload{RunID: Run, ToolCallID: Auto, ToolName: "lookup", Arguments: calls[Auto].Arguments},
		&agentd.ToolCallResultPayload{RunID: Run, ToolCallID: Auto, ToolName: "lookup", Status: agentd.StatusCompleted, Result: json.RawMessage(`{"status":"shipped"}`)},
		&agentd.ConfirmationResolvedPayload{RunID: Run, ToolCallID: Denied, ToolName: "pay", Decision: agentd.DecisionDenied, Reason: "not today", DecidedBy: "k1", ArgumentsSHA256: calls[Denied].ArgumentsSHA256},
		&agentd.ConfirmationResolvedPayload{RunID: Run, ToolCallID: Parked, ToolName: "pay", Decision: agentd.DecisionApproved, DecidedBy: "k1", ArgumentsSHA256: calls[Parked].ArgumentsSHA256},
		&agentd.ToolCallStartedPayload{RunID: Run, ToolCallID: Parked, ToolName: "pay", Arguments: calls[Parked].Arguments},
		&agentd.ToolCallResultPayload{RunID: Run, ToolCallID: Parked, ToolName: "pay", Status: agentd.StatusFailed, Error: "card declined"},
		&agentd.MessagePayload{RunID: Run, MessageID: Msg2, Role: "assistant", Content: "The payment failed."},
		&agentd.RunFinishedPayload{RunID: Run, CorrelationID: "corr", Status: agentd.RunCompleted, Reason: "model_stop"},
	}
	var items []protocol.Item
	for i, p := range payloads {
		it, err := Item(int64(i+1), T0.Add(time.Duration(i)*time.Millisecond), p, calls)
		if err != nil {
			panic(err)
		}
		items = append(items, it)
	}
	return items
}

func confirmation(c *agentd.ToolCall) *agentd.ConfirmationRequiredPayload {
	return &agentd.ConfirmationRequiredPayload{RunID: Run, CorrelationID: "corr", ToolCallID: c.ID, ToolName: c.Name,
		Endpoint: c.Endpoint, Method: c.Method, Reason: c.Reason, Params: c.Arguments, ArgumentsSHA256: c.ArgumentsSHA256,
		RequiresApprovalAt: *c.RequiresApprovalAt, AllowedDecisions: c.AllowedDecisions, Card: c.Card()}
}

// Item makes the stream item of payload p as event seq at at: the draft,
// the stored event, the decoded payload, and the call from calls the
// event announces.
func Item(seq int64, at time.Time, p agentd.EventPayload, calls map[string]*agentd.ToolCall) (protocol.Item, error) {
	d, err := agentd.NewEventDraft(Conv, at, p)
	if err != nil {
		return protocol.Item{}, err
	}
	e := agentd.Event{ConversationID: Conv, Seq: seq, Position: seq, Type: d.Type, Data: d.Data}
	decoded, err := agentd.DecodeEvent(e)
	if err != nil {
		return protocol.Item{}, err
	}
	it := protocol.Item{Event: e, Payload: decoded}
	switch p := decoded.(type) {
	case *agentd.ToolCallStartedPayload:
		it.Call = calls[p.ToolCallID]
	case *agentd.ConfirmationRequiredPayload:
		it.Call = calls[p.ToolCallID]
	case *agentd.ToolCallRefusedPayload:
		it.Call = calls[p.ToolCallID]
	}
	return it, nil
}

// ParkedEnd is the end of a run that parked on the scenario's pay calls.
func ParkedEnd() protocol.End {
	calls := Calls()
	return protocol.End{Status: agentd.RunWaiting, Parked: []agentd.ToolCall{*calls[Parked], *calls[Denied]}}
}
