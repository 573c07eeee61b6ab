package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// approval returns the update that approves a parked call.
func approval(id, by string, now time.Time) agentd.CallUpdate {
	return agentd.CallUpdate{
		ID: id, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusExecuting,
		Decision: &agentd.Decision{
			ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: id, Decision: agentd.DecisionApproved,
			Reason: "looks fine", DecidedBy: by, ArgumentsSHA256: "digest", CreatedAt: now,
		},
		Now: now,
	}
}

func testUpdateToolCallApplies(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)

	u := approval(c.ID, "key-1", at(time.Minute))
	got, evs, err := s.UpdateToolCall(ctx, u, []agentd.EventDraft{
		draft(conv.ID, agentd.EventConfirmationResolved, `{"decision": "approved"}`),
		draft(conv.ID, agentd.EventToolCallStarted, `{}`),
	})
	noErr(t, err, "UpdateToolCall")
	wantSeqs(t, "UpdateToolCall events", evs, 1, 2)
	if got.Status != agentd.StatusExecuting || len(got.Decisions) != 1 {
		t.Fatalf("UpdateToolCall returned %+v, want executing with one decision", got)
	}
	sameTime(t, "UpdatedAt", got.UpdatedAt, at(time.Minute))
	sameTime(t, "CreatedAt", got.CreatedAt, c.CreatedAt)
	d := got.Decisions[0]
	if d.ID != u.Decision.ID || d.ToolCallID != c.ID || d.Decision != agentd.DecisionApproved || d.Reason != "looks fine" ||
		d.DecidedBy != "key-1" || d.ArgumentsSHA256 != "digest" {
		t.Errorf("decision = %+v, want %+v", d, *u.Decision)
	}
	sameTime(t, "decision CreatedAt", d.CreatedAt, at(time.Minute))
	stored, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if stored.Status != agentd.StatusExecuting || len(stored.Decisions) != 1 || stored.Decisions[0].ID != d.ID {
		t.Errorf("stored call = %+v", stored)
	}
	sameJSON(t, "Arguments", stored.Arguments, c.Arguments)

	// Result is set when given; an empty Error leaves the error as it was.
	result := json.RawMessage("{\"ok\": true,  \"rows\": [3, 1]}")
	got, _, err = s.UpdateToolCall(ctx, agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusExecuting},
		Status: agentd.StatusCompleted, Result: result, Now: at(2 * time.Minute)}, nil)
	noErr(t, err, "UpdateToolCall to completed")
	if got.Status != agentd.StatusCompleted || got.Error != "" || len(got.Decisions) != 1 {
		t.Errorf("completed call = %+v", got)
	}
	sameJSON(t, "Result", got.Result, result)
	stored, err = s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	sameJSON(t, "stored Result", stored.Result, result)

	// Error is set when given; an empty Result leaves the result as it was.
	f := newCall(run, 1, 1, agentd.StatusExecuting)
	f.Result = json.RawMessage(`{"partial":1}`)
	createCalls(t, s, f)
	got, _, err = s.UpdateToolCall(ctx, agentd.CallUpdate{ID: f.ID, From: []agentd.CallStatus{agentd.StatusExecuting},
		Status: agentd.StatusFailed, Error: "boom", Now: at(3 * time.Minute)}, nil)
	noErr(t, err, "UpdateToolCall to failed")
	if got.Status != agentd.StatusFailed || got.Error != "boom" || len(got.Decisions) != 0 {
		t.Errorf("failed call = %+v", got)
	}
	sameJSON(t, "Result kept", got.Result, f.Result)
}

func testUpdateToolCallConflict(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)
	_, _, err := s.UpdateToolCall(ctx, agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusDenied, Error: "denied", Now: at(time.Minute),
		Decision: &agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: c.ID, Decision: agentd.DecisionDenied, DecidedBy: "a", CreatedAt: at(time.Minute)},
	}, []agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, `{}`)})
	noErr(t, err, "UpdateToolCall deny")

	got, evs, err := s.UpdateToolCall(ctx, approval(c.ID, "b", at(2*time.Minute)),
		[]agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, `{}`), draft(conv.ID, agentd.EventToolCallStarted, `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	if got == nil || got.ID != c.ID || got.Status != agentd.StatusDenied || got.Error != "denied" ||
		len(got.Decisions) != 1 || got.Decisions[0].Decision != agentd.DecisionDenied {
		t.Fatalf("ECONFLICT returned %+v, want the current denied call with its decision", got)
	}
	sameTime(t, "current UpdatedAt", got.UpdatedAt, at(time.Minute))
	if len(evs) != 0 {
		t.Errorf("ECONFLICT returned events %v", evs)
	}
	stored, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if stored.Status != agentd.StatusDenied || len(stored.Decisions) != 1 {
		t.Errorf("ECONFLICT changed the call: %+v", stored)
	}
	wantSeqs(t, "events after conflict", allEvents(t, s, conv.ID), 1)

	// The rolled-back events left no gap.
	evs, err = s.AppendEvents(ctx, []agentd.EventDraft{draft(conv.ID, agentd.EventError, `{}`)})
	noErr(t, err, "AppendEvents")
	wantSeqs(t, "next event", evs, 2)
}

func testUpdateToolCallDecisionsInOrder(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)

	// Decision ids sort against the order they are made.
	first := approval(c.ID, "alice", at(time.Minute))
	first.Status, first.Decision.ID = agentd.StatusApproved, "dec_z"
	_, _, err := s.UpdateToolCall(ctx, first, nil)
	noErr(t, err, "UpdateToolCall approve")
	second := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusCancelled,
		Error: "cancelled", Now: at(2 * time.Minute),
		Decision: &agentd.Decision{ID: "dec_a", ToolCallID: c.ID, Decision: agentd.DecisionCancelled, DecidedBy: "system", CreatedAt: at(2 * time.Minute)}}
	_, _, err = s.UpdateToolCall(ctx, second, nil)
	noErr(t, err, "UpdateToolCall cancel")

	check := func(what string, got agentd.ToolCall) {
		t.Helper()
		if len(got.Decisions) != 2 || got.Decisions[0].ID != "dec_z" || got.Decisions[1].ID != "dec_a" ||
			got.Decisions[0].DecidedBy != "alice" || got.Decisions[1].Decision != agentd.DecisionCancelled {
			t.Errorf("%s decisions = %+v, want dec_z then dec_a", what, got.Decisions)
		}
	}
	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	check("ToolCall", *got)
	list, err := s.ToolCalls(ctx, conv.ID)
	noErr(t, err, "ToolCalls")
	wantIDs(t, "ToolCalls", ids(list), c.ID)
	check("ToolCalls", list[0])
}

func testUpdateToolCallErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)

	_, _, err := s.UpdateToolCall(ctx, approval("call_missing", "a", t0), nil)
	wantCode(t, err, agentd.ENOTFOUND)

	noFrom := approval(c.ID, "a", t0)
	noFrom.From = nil
	_, _, err = s.UpdateToolCall(ctx, noFrom, nil)
	wantCode(t, err, agentd.EINVALID)

	badStatus := approval(c.ID, "a", t0)
	badStatus.Status = "bogus"
	_, _, err = s.UpdateToolCall(ctx, badStatus, nil)
	wantCode(t, err, agentd.EINVALID)

	badResult := approval(c.ID, "a", t0)
	badResult.Result = json.RawMessage(`{`)
	_, _, err = s.UpdateToolCall(ctx, badResult, nil)
	wantCode(t, err, agentd.EINVALID)

	// Events for a missing conversation roll back transition and decision.
	_, _, err = s.UpdateToolCall(ctx, approval(c.ID, "a", t0), []agentd.EventDraft{draft("conv_missing", agentd.EventConfirmationResolved, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)

	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if got.Status != agentd.StatusRequiresConfirmation || len(got.Decisions) != 0 {
		t.Errorf("failed updates changed the call: %+v", got)
	}
}

func testConcurrentApprovals(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)

	const n = 20
	type outcome struct {
		call *agentd.ToolCall
		evs  []agentd.Event
		err  error
	}
	out := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			by := fmt.Sprintf("approver-%d", i)
			call, evs, err := s.UpdateToolCall(ctx, approval(c.ID, by, at(time.Minute)),
				[]agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, fmt.Sprintf(`{"by":%q}`, by))})
			out[i] = outcome{call, evs, err}
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, o := range out {
		switch {
		case o.err == nil:
			if winner >= 0 {
				t.Fatalf("approvals %d and %d both succeeded", winner, i)
			}
			winner = i
			if o.call.Status != agentd.StatusExecuting || len(o.evs) != 1 {
				t.Errorf("winner got call %+v and events %v", o.call, o.evs)
			}
		case agentd.ErrorCode(o.err) == agentd.ECONFLICT:
			if o.call == nil || o.call.ID != c.ID || o.call.Status != agentd.StatusExecuting || len(o.call.Decisions) != 1 {
				t.Errorf("loser %d got call %+v, want the current executing call with one decision", i, o.call)
			}
			if len(o.evs) != 0 {
				t.Errorf("loser %d got events %v", i, o.evs)
			}
		default:
			t.Errorf("approval %d: %v, want nil or %s", i, o.err, agentd.ECONFLICT)
		}
	}
	if winner < 0 {
		t.Fatal("no approval succeeded")
	}
	by := fmt.Sprintf("approver-%d", winner)

	got, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if got.Status != agentd.StatusExecuting || len(got.Decisions) != 1 || got.Decisions[0].DecidedBy != by {
		t.Fatalf("stored call = %+v with decisions %+v, want one decision by %s", got, got.Decisions, by)
	}
	evs := allEvents(t, s, conv.ID)
	wantSeqs(t, "events", evs, 1)
	sameJSON(t, "event data", evs[0].Data, json.RawMessage(fmt.Sprintf(`{"by":%q}`, by)))
}

func testPendingToolCalls(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	var parked []*agentd.ToolCall
	for i := range 3 {
		parked = append(parked, newCall(run, 1, i, agentd.StatusRequiresConfirmation))
	}
	done := newCall(run, 1, 3, agentd.StatusCompleted)
	createCalls(t, s, append(parked, done)...)
	other := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "other-tenant", ProjectID: conv.ProjectID, Agent: "a", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, other), "CreateConversation")
	otherCall := newCall(startRun(t, s, other), 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, otherCall)

	pending := func(f agentd.PendingFilter, what string) []agentd.ToolCall {
		t.Helper()
		if f.TenantID == "" {
			f.TenantID, f.ProjectID = conv.TenantID, conv.ProjectID
		}
		calls, err := s.PendingToolCalls(ctx, f)
		noErr(t, err, "PendingToolCalls "+what)
		return calls
	}
	wantIDs(t, "pending", ids(pending(agentd.PendingFilter{Limit: 10}, "all")), parked[0].ID, parked[1].ID, parked[2].ID)
	page := pending(agentd.PendingFilter{Limit: 2}, "page 1")
	wantIDs(t, "page 1", ids(page), parked[0].ID, parked[1].ID)
	wantIDs(t, "page 2", ids(pending(agentd.PendingFilter{After: page[1].ID, Limit: 2}, "page 2")), parked[2].ID)
	if none := pending(agentd.PendingFilter{TenantID: conv.TenantID, ProjectID: "another-project", Limit: 10}, "other project"); len(none) != 0 {
		t.Errorf("another project sees %d pending calls", len(none))
	}

	// CreatedBy keeps the calls of the conversations one key created.
	mine := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: conv.TenantID, ProjectID: conv.ProjectID,
		Agent: "a", CreatedBy: "key-mine", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, mine), "CreateConversation mine")
	myCall := newCall(startRun(t, s, mine), 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, myCall)
	wantIDs(t, "created by key-mine", ids(pending(agentd.PendingFilter{CreatedBy: "key-mine", Limit: 10}, "mine")), myCall.ID)
	if other := pending(agentd.PendingFilter{CreatedBy: "key-other", Limit: 10}, "key-other"); len(other) != 0 {
		t.Errorf("a key that created no conversation sees %d pending calls", len(other))
	}
	wantIDs(t, "all after CreatedBy", ids(pending(agentd.PendingFilter{Limit: 10}, "all again")),
		parked[0].ID, parked[1].ID, parked[2].ID, myCall.ID)
}

func testUpdateToolCallEdit(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	c.ConnectionName, c.PathTemplate, c.Params = "billing", "/refunds", json.RawMessage(`{"body":{"amount":500}}`)
	createCalls(t, s, c)

	edited := json.RawMessage(`{"amount": 400}`)
	u := approval(c.ID, "key-1", at(time.Minute))
	u.Status = agentd.StatusApproved
	u.Decision.EditedArguments, u.Decision.EditedArgumentsSHA256 = edited, "edited-digest"
	u.Edit = &agentd.CallEdit{Arguments: edited, ArgumentsSHA256: "edited-digest", Tier: agentd.TierAuto, Reason: "cheaper",
		Escalated: false, Method: "POST", Endpoint: "/refunds", PathTemplate: "/refunds", Params: json.RawMessage(`{"body":{"amount":400}}`)}
	got, _, err := s.UpdateToolCall(ctx, u, nil)
	noErr(t, err, "UpdateToolCall with edit")
	if got.Status != agentd.StatusApproved || got.ArgumentsSHA256 != "edited-digest" || got.Tier != agentd.TierAuto || got.Reason != "cheaper" {
		t.Fatalf("edited call = %+v", got)
	}
	sameJSON(t, "edited Arguments", got.Arguments, edited)
	sameJSON(t, "edited Params", got.Params, json.RawMessage(`{"body":{"amount":400}}`))
	d := got.Decisions[0]
	if d.ArgumentsSHA256 != "digest" || d.EditedArgumentsSHA256 != "edited-digest" {
		t.Errorf("decision digests = %q, %q; want both recorded", d.ArgumentsSHA256, d.EditedArgumentsSHA256)
	}
	sameJSON(t, "decision EditedArguments", d.EditedArguments, edited)

	// A conflicting update with an edit changes nothing.
	u2 := approval(c.ID, "key-2", at(2*time.Minute))
	u2.Edit = &agentd.CallEdit{Arguments: json.RawMessage(`{"amount": 1}`), ArgumentsSHA256: "x"}
	if _, _, err := s.UpdateToolCall(ctx, u2, nil); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Fatalf("second edit: %v, want conflict", err)
	}
	stored, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if stored.ArgumentsSHA256 != "edited-digest" || len(stored.Decisions) != 1 {
		t.Errorf("a refused edit changed the call: %+v", stored)
	}
	// Bad JSON in an edit is refused before anything is written.
	c2 := newCall(run, 1, 1, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c2)
	u3 := approval(c2.ID, "key-1", at(time.Minute))
	u3.Edit = &agentd.CallEdit{Arguments: json.RawMessage(`{bad`)}
	if _, _, err := s.UpdateToolCall(ctx, u3, nil); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("bad edit JSON: %v, want invalid", err)
	}
	stored, _ = s.ToolCall(ctx, c2.ID)
	if stored.Status != agentd.StatusRequiresConfirmation || len(stored.Decisions) != 0 {
		t.Errorf("bad edit changed the call: %+v", stored)
	}
}

// A call cleared to run is parked again with a new classification, card
// diff, state digest and deadline; its earlier decision stays; a repark
// that does not match the status, or that is malformed, changes nothing.
func testUpdateToolCallRepark(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresConfirmation)
	c.Diff, c.StateSHA256 = "--- a/x\n+++ b/x\n", "state-1"
	createCalls(t, s, c)
	stored, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if stored.Diff != c.Diff || stored.StateSHA256 != "state-1" {
		t.Fatalf("stored diff/state = %q, %q", stored.Diff, stored.StateSHA256)
	}
	u := approval(c.ID, "key-1", at(time.Minute))
	u.Status = agentd.StatusApproved
	_, _, err = s.UpdateToolCall(ctx, u, nil)
	noErr(t, err, "approve")

	deadline := at(20 * time.Minute)
	rp := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusRequiresConfirmation,
		Repark: &agentd.CallRepark{Arguments: json.RawMessage(`{"amount": 9}`), ArgumentsSHA256: "digest-2", Tier: agentd.TierConfirm,
			Reason: "changed", Escalated: true, AllowedDecisions: []string{"approve", "deny"}, Diff: "--- a/x\n+++ b/x\n@@ new", StateSHA256: "state-2",
			RequiresApprovalAt: deadline, Method: "TOOL", Endpoint: "pay"},
		Now: at(2 * time.Minute)}
	got, evs, err := s.UpdateToolCall(ctx, rp, []agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationRequired, `{}`)})
	noErr(t, err, "repark")
	if len(evs) != 1 {
		t.Fatalf("repark events = %d, want 1", len(evs))
	}
	if got.Status != agentd.StatusRequiresConfirmation || got.ArgumentsSHA256 != "digest-2" || got.Reason != "changed" || !got.Escalated ||
		got.Diff != rp.Repark.Diff || got.StateSHA256 != "state-2" || len(got.Decisions) != 1 || got.Decisions[0].ArgumentsSHA256 != "digest" ||
		len(got.AllowedDecisions) != 2 || got.RequiresApprovalAt == nil || got.Endpoint != "pay" {
		t.Fatalf("reparked call = %+v", got)
	}
	sameTime(t, "reparked deadline", *got.RequiresApprovalAt, deadline)
	sameJSON(t, "reparked Arguments", got.Arguments, rp.Repark.Arguments)
	due, err := s.DueToolCalls(ctx, deadline, 0)
	noErr(t, err, "DueToolCalls")
	if len(due) != 1 || due[0].ID != c.ID {
		t.Errorf("the reparked call is not due at its new deadline: %+v", due)
	}

	// Not approved any more: a second repark conflicts and changes nothing.
	if _, _, err := s.UpdateToolCall(ctx, rp, nil); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Fatalf("second repark: %v, want conflict", err)
	}
	// Malformed reparks are refused before anything is written.
	for name, bad := range map[string]agentd.CallUpdate{
		"status":   {ID: c.ID, From: rp.From, Status: agentd.StatusApproved, Repark: rp.Repark, Now: rp.Now},
		"digest":   {ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusRequiresConfirmation, Repark: &agentd.CallRepark{RequiresApprovalAt: deadline}, Now: rp.Now},
		"deadline": {ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusRequiresConfirmation, Repark: &agentd.CallRepark{ArgumentsSHA256: "d"}, Now: rp.Now},
	} {
		if _, _, err := s.UpdateToolCall(ctx, bad, nil); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("repark with bad %s: %v, want invalid", name, err)
		}
	}
	stored, _ = s.ToolCall(ctx, c.ID)
	if stored.ArgumentsSHA256 != "digest-2" || stored.Status != agentd.StatusRequiresConfirmation {
		t.Errorf("a refused repark changed the call: %+v", stored)
	}
}

// testUpdateToolCallCard: an update that names the card it was planned on
// (CallUpdate.CardRevision) applies only while the call shows that card. A decision
// planned on card 1 and committed after the call was approved and parked
// again is ECONFLICT and writes nothing; one planned on card 2 applies; an
// update without Card is unchanged.
func testUpdateToolCallCard(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	c := newCall(startRun(t, s, conv), 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)
	first := approval(c.ID, "key-1", at(time.Minute))
	first.Status, first.CardRevision = agentd.StatusApproved, 1
	late := approval(c.ID, "key-2", at(time.Minute)) // the same click, planned on card 1 too
	late.Status, late.CardRevision = agentd.StatusApproved, 1
	_, _, err := s.UpdateToolCall(ctx, first, nil)
	noErr(t, err, "approve card 1")
	rp := agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusApproved}, Status: agentd.StatusRequiresConfirmation,
		Repark: &agentd.CallRepark{Arguments: json.RawMessage(`{"amount": 5}`), ArgumentsSHA256: "digest", Tier: agentd.TierConfirm,
			StateSHA256: "state-2", RequiresApprovalAt: at(20 * time.Minute)}, Now: at(2 * time.Minute)}
	_, _, err = s.UpdateToolCall(ctx, rp, nil)
	noErr(t, err, "repark")

	cur, evs, err := s.UpdateToolCall(ctx, late, []agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, `{}`)})
	if agentd.ErrorCode(err) != agentd.ECONFLICT || len(evs) != 0 {
		t.Fatalf("a decision planned on card 1, after the re-park: %v (%d events), want ECONFLICT", err, len(evs))
	}
	if cur == nil || cur.Status != agentd.StatusRequiresConfirmation || len(cur.Decisions) != 1 || cur.CardRevision() != 2 {
		t.Fatalf("the current call with the conflict = %+v, want card 2 pending", cur)
	}
	second := approval(c.ID, "key-2", at(3*time.Minute))
	second.Status, second.CardRevision = agentd.StatusApproved, 2
	got, _, err := s.UpdateToolCall(ctx, second, nil)
	noErr(t, err, "approve card 2")
	if got.Status != agentd.StatusApproved || len(got.Decisions) != 2 || got.Decisions[1].DecidedBy != "key-2" {
		t.Fatalf("card 2's approval = %+v", got)
	}
}
