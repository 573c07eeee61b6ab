package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// sameCall compares every stored field of a call.
func sameCall(t *testing.T, what string, got agentd.ToolCall, want *agentd.ToolCall) {
	t.Helper()
	if got.ID != want.ID || got.TenantID != want.TenantID || got.ProjectID != want.ProjectID ||
		got.ConversationID != want.ConversationID || got.RunID != want.RunID || got.CorrelationID != want.CorrelationID ||
		got.MessageID != want.MessageID || got.Step != want.Step || got.Index != want.Index || got.Name != want.Name ||
		got.ServerID != want.ServerID || got.ArgumentsSHA256 != want.ArgumentsSHA256 || got.Tier != want.Tier ||
		got.Reason != want.Reason || got.Escalated != want.Escalated || got.Status != want.Status ||
		got.Method != want.Method || got.Endpoint != want.Endpoint || got.Error != want.Error ||
		got.ConnectionName != want.ConnectionName || got.PathTemplate != want.PathTemplate {
		t.Errorf("%s = %+v\nwant %+v", what, got, *want)
	}
	sameJSON(t, what+" Arguments", got.Arguments, want.Arguments)
	sameJSON(t, what+" Result", got.Result, want.Result)
	sameJSON(t, what+" Params", got.Params, want.Params)
	if !slices.Equal(got.AllowedDecisions, want.AllowedDecisions) || (got.AllowedDecisions == nil) != (want.AllowedDecisions == nil) {
		t.Errorf("%s AllowedDecisions = %#v, want %#v", what, got.AllowedDecisions, want.AllowedDecisions)
	}
	switch {
	case (got.RequiresApprovalAt == nil) != (want.RequiresApprovalAt == nil):
		t.Errorf("%s RequiresApprovalAt = %v, want %v", what, got.RequiresApprovalAt, want.RequiresApprovalAt)
	case got.RequiresApprovalAt != nil:
		sameTime(t, what+" RequiresApprovalAt", *got.RequiresApprovalAt, *want.RequiresApprovalAt)
	}
	sameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	sameTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	if len(got.Decisions) != 0 {
		t.Errorf("%s has %d decisions, want none", what, len(got.Decisions))
	}
}

func testToolCallRoundTrip(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	deadline := at(15*time.Minute + 7)
	full := &agentd.ToolCall{
		ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t1", ProjectID: "p1", ConversationID: conv.ID, RunID: run.ID,
		CorrelationID: "corr", MessageID: "msg_x", Step: 4, Index: 2, Name: "http_request", ServerID: "github",
		Arguments:       json.RawMessage("{ \"url\" : \"https://example.com/a?b=c\",\n\t\"n\": 1.50, \"u\": \"\\u2603\" }"),
		ArgumentsSHA256: "4f0c", Tier: agentd.TierConfirm, Reason: "writes to github", Escalated: true,
		Status: agentd.StatusRequiresConfirmation, Method: "POST", Endpoint: "/repos/o/issues",
		ConnectionName: "github", PathTemplate: "/repos/{owner}/issues", Params: json.RawMessage(`{"path": {"owner": "o"}, "body": {"t": 1}}`),
		RequiresApprovalAt: &deadline, AllowedDecisions: []string{"approve", "deny", "edit"},
		Result: json.RawMessage(`[ 1, {"b":2, "a":1} ]`), Error: "some error",
		CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Second),
	}
	bare := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), ConversationID: conv.ID, RunID: run.ID,
		Step: 5, Status: agentd.StatusExecuting, Tier: agentd.TierAuto, CreatedAt: at(3 * time.Second)} // UpdatedAt zero
	evs, err := s.CreateToolCalls(ctx, []*agentd.ToolCall{full, bare}, []agentd.EventDraft{
		draft(conv.ID, agentd.EventConfirmationRequired, `{"tool_call_id": "x"}`),
		draft(conv.ID, agentd.EventToolCallStarted, `{}`),
	})
	noErr(t, err, "CreateToolCalls")
	wantSeqs(t, "CreateToolCalls events", evs, 1, 2)

	got, err := s.ToolCall(ctx, full.ID)
	noErr(t, err, "ToolCall")
	sameCall(t, "ToolCall", *got, full)
	got, err = s.ToolCall(ctx, bare.ID)
	noErr(t, err, "ToolCall bare")
	sameCall(t, "ToolCall bare", *got, bare)

	list, err := s.ToolCalls(ctx, conv.ID)
	noErr(t, err, "ToolCalls")
	wantIDs(t, "ToolCalls", ids(list), full.ID, bare.ID)
	sameCall(t, "ToolCalls[0]", list[0], full)
	list, err = s.RunToolCalls(ctx, run.ID)
	noErr(t, err, "RunToolCalls")
	wantIDs(t, "RunToolCalls", ids(list), full.ID, bare.ID)
	sameCall(t, "RunToolCalls[0]", list[0], full)
	list, err = s.ToolCallsByStatus(ctx, agentd.StatusRequiresConfirmation)
	noErr(t, err, "ToolCallsByStatus")
	wantIDs(t, "ToolCallsByStatus", ids(list), full.ID)
	sameCall(t, "ToolCallsByStatus[0]", list[0], full)
	list, err = s.DueToolCalls(ctx, deadline, 0)
	noErr(t, err, "DueToolCalls")
	wantIDs(t, "DueToolCalls", ids(list), full.ID)
	sameCall(t, "DueToolCalls[0]", list[0], full)
}

func testToolCallNotFound(t *testing.T, s agentd.Store) {
	_, err := s.ToolCall(context.Background(), "call_missing")
	wantCode(t, err, agentd.ENOTFOUND)
}

func testCreateToolCallsAtomic(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	existing := newCall(run, 1, 0, agentd.StatusExecuting)
	createCalls(t, s, existing)

	fresh := newCall(run, 1, 1, agentd.StatusExecuting)
	dup := newCall(run, 1, 2, agentd.StatusRequiresConfirmation)
	dup.ID = existing.ID
	_, err := s.CreateToolCalls(ctx, []*agentd.ToolCall{fresh, dup}, []agentd.EventDraft{draft(conv.ID, agentd.EventToolCallStarted, `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	_, err = s.ToolCall(ctx, fresh.ID)
	wantCode(t, err, agentd.ENOTFOUND)
	got, err := s.ToolCall(ctx, existing.ID)
	noErr(t, err, "ToolCall")
	if got.Status != agentd.StatusExecuting || got.Index != 0 {
		t.Errorf("duplicate insert changed the call: %+v", got)
	}
	if n := len(allEvents(t, s, conv.ID)); n != 0 {
		t.Errorf("failed CreateToolCalls appended %d events", n)
	}

	orphan := newCall(run, 1, 3, agentd.StatusExecuting)
	orphan.RunID = "run_missing"
	_, err = s.CreateToolCalls(ctx, []*agentd.ToolCall{fresh, orphan}, nil)
	wantCode(t, err, agentd.ENOTFOUND)
	_, err = s.ToolCall(ctx, fresh.ID)
	wantCode(t, err, agentd.ENOTFOUND)

	// Events for a missing conversation roll the calls back.
	_, err = s.CreateToolCalls(ctx, []*agentd.ToolCall{fresh}, []agentd.EventDraft{draft("conv_missing", agentd.EventToolCallStarted, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	_, err = s.ToolCall(ctx, fresh.ID)
	wantCode(t, err, agentd.ENOTFOUND)
}

func testCreateToolCallsErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)

	noID := newCall(run, 1, 0, agentd.StatusExecuting)
	noID.ID = ""
	badArgs := newCall(run, 1, 0, agentd.StatusExecuting)
	badArgs.Arguments = json.RawMessage(`{"a":}`)
	badResult := newCall(run, 1, 0, agentd.StatusCompleted)
	badResult.Result = json.RawMessage(`nope`)
	badStatus := newCall(run, 1, 0, "bogus")
	for name, c := range map[string]*agentd.ToolCall{"no id": noID, "bad arguments": badArgs, "bad result": badResult, "bad status": badStatus} {
		_, err := s.CreateToolCalls(ctx, []*agentd.ToolCall{c}, nil)
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("%s: error %v, want %s", name, err, agentd.EINVALID)
		}
	}
	if calls, _ := s.RunToolCalls(ctx, run.ID); len(calls) != 0 {
		t.Errorf("invalid calls were stored: %d", len(calls))
	}

	noConv := newCall(run, 1, 0, agentd.StatusExecuting)
	noConv.ConversationID = "conv_missing"
	_, err := s.CreateToolCalls(ctx, []*agentd.ToolCall{noConv}, nil)
	wantCode(t, err, agentd.ENOTFOUND)
}

func testToolCallsOrder(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run1 := startRun(t, s, conv)
	finishRun(t, s, run1)
	run2 := startRun(t, s, conv)

	// A later call inserted first: creation time comes before insertion.
	late := newCall(run2, 0, 0, agentd.StatusExecuting)
	late.CreatedAt = at(time.Minute)
	createCalls(t, s, late)
	// One batch of run1, same creation time, inserted out of (step, index) order.
	s1i1, s1i0, s0i0 := newCall(run1, 1, 1, agentd.StatusCompleted), newCall(run1, 1, 0, agentd.StatusCompleted), newCall(run1, 0, 0, agentd.StatusCompleted)
	createCalls(t, s, s1i1, s1i0, s0i0)
	// Another conversation's calls are not listed.
	createCalls(t, s, newCall(startRun(t, s, newConversation(t, s)), 0, 0, agentd.StatusExecuting))

	calls, err := s.ToolCalls(ctx, conv.ID)
	noErr(t, err, "ToolCalls")
	wantIDs(t, "ToolCalls", ids(calls), s0i0.ID, s1i0.ID, s1i1.ID, late.ID)

	empty, err := s.ToolCalls(ctx, newConversation(t, s).ID)
	noErr(t, err, "ToolCalls of a conversation without calls")
	if len(empty) != 0 {
		t.Errorf("ToolCalls of a new conversation = %d calls", len(empty))
	}
}

func testRunToolCallsOrder(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	// Creation times run against (step, index): only (step, index) order passes.
	s2i0 := newCall(run, 2, 0, agentd.StatusExecuting)
	s1i1 := newCall(run, 1, 1, agentd.StatusCompleted)
	s1i1.CreatedAt = at(time.Second)
	s1i0 := newCall(run, 1, 0, agentd.StatusCompleted)
	s1i0.CreatedAt = at(2 * time.Second)
	createCalls(t, s, s2i0, s1i1)
	createCalls(t, s, s1i0)
	finishRun(t, s, run)
	otherRun := startRun(t, s, conv)
	createCalls(t, s, newCall(otherRun, 0, 0, agentd.StatusExecuting))

	calls, err := s.RunToolCalls(ctx, run.ID)
	noErr(t, err, "RunToolCalls")
	wantIDs(t, "RunToolCalls", ids(calls), s1i0.ID, s1i1.ID, s2i0.ID)
}

func testToolCallsByStatus(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run := startRun(t, s, newConversation(t, s))
	byStatus := map[agentd.CallStatus][]string{}
	for i, st := range []agentd.CallStatus{
		agentd.StatusExecuting, agentd.StatusApproved, agentd.StatusRequiresConfirmation, agentd.StatusExecuting,
		agentd.StatusCompleted, agentd.StatusFailed, agentd.StatusDenied,
	} {
		c := newCall(run, 1, i, st)
		createCalls(t, s, c)
		byStatus[st] = append(byStatus[st], c.ID)
	}
	check := func(want []string, statuses ...agentd.CallStatus) {
		t.Helper()
		calls, err := s.ToolCallsByStatus(ctx, statuses...)
		noErr(t, err, "ToolCallsByStatus")
		got := ids(calls)
		slices.Sort(got)
		want = slices.Clone(want)
		slices.Sort(want)
		wantIDs(t, fmt.Sprintf("ToolCallsByStatus(%v)", statuses), got, want...)
		for _, c := range calls {
			if !slices.Contains(statuses, c.Status) {
				t.Errorf("ToolCallsByStatus(%v) returned a %s call", statuses, c.Status)
			}
		}
	}
	check(append(slices.Clone(byStatus[agentd.StatusExecuting]), byStatus[agentd.StatusApproved]...), agentd.StatusExecuting, agentd.StatusApproved)
	check(byStatus[agentd.StatusRequiresConfirmation], agentd.StatusRequiresConfirmation)
	check(nil, agentd.StatusExpired)
}

func testDueToolCalls(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run := startRun(t, s, newConversation(t, s))
	parked := func(index int, deadline *time.Time, status agentd.CallStatus) *agentd.ToolCall {
		return deadlineCall(t, s, run, index, deadline, status)
	}
	past := parked(0, ptr(at(-time.Second)), agentd.StatusRequiresConfirmation)
	exact := parked(1, ptr(t0), agentd.StatusRequiresConfirmation)
	nanoLater := parked(2, ptr(at(1)), agentd.StatusRequiresConfirmation)
	later := parked(3, ptr(at(time.Hour)), agentd.StatusRequiresConfirmation)
	parked(4, nil, agentd.StatusRequiresConfirmation)
	parked(5, ptr(at(-time.Hour)), agentd.StatusApproved)
	parked(6, ptr(at(-time.Hour)), agentd.StatusExpired)

	due := func(now time.Time, want ...string) {
		t.Helper()
		calls, err := s.DueToolCalls(ctx, now, 0)
		noErr(t, err, "DueToolCalls")
		got := ids(calls)
		slices.Sort(got)
		want = slices.Clone(want)
		slices.Sort(want)
		wantIDs(t, "DueToolCalls("+now.Format(time.RFC3339Nano)+")", got, want...)
	}
	due(at(-time.Hour))
	due(at(-time.Second), past.ID)
	// now in another zone: the comparison is between instants.
	due(t0.In(time.UTC), past.ID, exact.ID)
	due(t0.In(time.FixedZone("UTC-8", -8*3600)).Add(1), past.ID, exact.ID, nanoLater.ID)
	due(at(2*time.Hour), past.ID, exact.ID, nanoLater.ID, later.ID)

	// A page: the earliest limit of them, in deadline order.
	for limit, want := range map[int][]string{1: {past.ID}, 3: {past.ID, exact.ID, nanoLater.ID}, agentd.MaxDuePage + 1: {past.ID, exact.ID, nanoLater.ID, later.ID}} {
		calls, err := s.DueToolCalls(ctx, at(2*time.Hour), limit)
		noErr(t, err, "DueToolCalls")
		wantIDs(t, fmt.Sprintf("DueToolCalls(limit %d)", limit), ids(calls), want...)
	}

	// A call that leaves requires_confirmation is no longer due.
	_, _, err := s.UpdateToolCall(ctx, agentd.CallUpdate{ID: past.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusExpired, Now: t0}, nil)
	noErr(t, err, "UpdateToolCall")
	due(at(2*time.Hour), exact.ID, nanoLater.ID, later.ID)
}

// ToolCallsDueBetween is a half-open range (after, until] of parked
// deadlines, earliest first; a call no longer parked or without a deadline
// is never in it; a zero or inverted range is EINVALID.
func testToolCallsDueBetween(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run := startRun(t, s, newConversation(t, s))
	parked := func(index int, deadline *time.Time, status agentd.CallStatus) *agentd.ToolCall {
		return deadlineCall(t, s, run, index, deadline, status)
	}
	early := parked(0, ptr(at(-time.Second)), agentd.StatusRequiresConfirmation)
	exact := parked(1, ptr(t0), agentd.StatusRequiresConfirmation)
	nanoLater := parked(2, ptr(at(1)), agentd.StatusRequiresConfirmation)
	later := parked(3, ptr(at(time.Hour)), agentd.StatusRequiresConfirmation)
	parked(4, nil, agentd.StatusRequiresConfirmation)
	parked(5, ptr(at(time.Minute)), agentd.StatusApproved)
	parked(6, ptr(at(time.Minute)), agentd.StatusExpired)

	between := func(after, until time.Time, want ...string) {
		t.Helper()
		calls, err := s.ToolCallsDueBetween(ctx, after, until)
		noErr(t, err, "ToolCallsDueBetween")
		wantIDs(t, "ToolCallsDueBetween("+after.Format(time.RFC3339Nano)+", "+until.Format(time.RFC3339Nano)+"]", ids(calls), want...)
	}
	between(at(-time.Hour), at(-2*time.Second))
	between(at(-time.Hour), at(2*time.Hour), early.ID, exact.ID, nanoLater.ID, later.ID)
	// after is excluded, until included; bounds in another zone compare as instants.
	between(t0.In(time.UTC), at(1).In(time.FixedZone("UTC-8", -8*3600)), nanoLater.ID)
	between(at(-time.Second), t0, exact.ID)
	between(t0, t0)
	between(at(2), at(time.Hour), later.ID)

	for _, r := range [][2]time.Time{{t0, at(-1)}, {{}, t0}, {t0, {}}} {
		_, err := s.ToolCallsDueBetween(ctx, r[0], r[1])
		wantCode(t, err, agentd.EINVALID)
	}
}
