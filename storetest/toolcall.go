package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

func testMessagesOrder(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	other := newConversation(t, s)
	run := startRun(t, s, conv)

	// Ids sort and times run opposite to insertion order, so only insertion
	// order passes.
	var want []string
	for i := range 5 {
		m := &agentd.Message{
			ID: fmt.Sprintf("msg_%d", 9-i), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleAssistant,
			Content: fmt.Sprintf("step %d", i), CreatedAt: at(-time.Duration(i) * time.Minute),
		}
		evs, err := s.AddMessage(ctx, m, []agentd.EventDraft{draft(conv.ID, agentd.EventMessage, fmt.Sprintf(`{"i":%d}`, i))})
		noErr(t, err, "AddMessage")
		wantSeqs(t, "AddMessage events", evs, int64(i+1))
		want = append(want, m.ID)
		_, err = s.AddMessage(ctx, &agentd.Message{ID: fmt.Sprintf("msg_other_%d", i), ConversationID: other.ID, Role: agentd.RoleUser}, nil)
		noErr(t, err, "AddMessage other")
	}
	msgs, err := s.Messages(ctx, conv.ID)
	noErr(t, err, "Messages")
	if len(msgs) != 6 {
		t.Fatalf("Messages = %d, want 6", len(msgs))
	}
	var got []string
	for i, m := range msgs[1:] {
		got = append(got, m.ID)
		if m.Content != fmt.Sprintf("step %d", i) || m.RunID != run.ID || m.Role != agentd.RoleAssistant {
			t.Errorf("message %d = %+v", i, m)
		}
		sameTime(t, "CreatedAt", m.CreatedAt, at(-time.Duration(i)*time.Minute))
	}
	wantIDs(t, "Messages", got, want...)

	msgs, err = s.Messages(ctx, other.ID)
	noErr(t, err, "Messages other")
	if len(msgs) != 5 || msgs[0].RunID != "" {
		t.Errorf("other conversation messages = %+v, want 5 without run", msgs)
	}
}

// MessagesAfter returns a conversation's messages after the one named, in
// insertion order, and only its own; an unknown cursor, or another
// conversation's message, is ENOTFOUND.
func testMessagesAfter(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv, other := newConversation(t, s), newConversation(t, s)
	var want, others []string
	for i := range 5 {
		// Ids sort against insertion order: only insertion order passes.
		m := &agentd.Message{ID: fmt.Sprintf("msg_%d", 9-i), ConversationID: conv.ID, Role: agentd.RoleUser, Content: fmt.Sprint(i), CreatedAt: t0}
		_, err := s.AddMessage(ctx, m, nil)
		noErr(t, err, "AddMessage")
		want = append(want, m.ID)
		o := &agentd.Message{ID: fmt.Sprintf("msg_other_%d", i), ConversationID: other.ID, Role: agentd.RoleUser, CreatedAt: t0}
		_, err = s.AddMessage(ctx, o, nil)
		noErr(t, err, "AddMessage other")
		others = append(others, o.ID)
	}
	for _, tc := range []struct {
		after string
		want  []string
	}{{"", want}, {want[0], want[1:]}, {want[2], want[3:]}, {want[3], want[4:]}, {want[4], nil}} {
		msgs, err := s.MessagesAfter(ctx, conv.ID, tc.after)
		noErr(t, err, "MessagesAfter")
		var got []string
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		wantIDs(t, fmt.Sprintf("MessagesAfter %q", tc.after), got, tc.want...)
	}
	msgs, err := s.MessagesAfter(ctx, conv.ID, want[3])
	noErr(t, err, "MessagesAfter")
	if len(msgs) != 1 || msgs[0].Content != "4" || msgs[0].ConversationID != conv.ID {
		t.Errorf("MessagesAfter %s = %+v", want[3], msgs)
	}
	for _, bad := range []string{"msg_unknown", others[0]} {
		_, err := s.MessagesAfter(ctx, conv.ID, bad)
		wantCode(t, err, agentd.ENOTFOUND)
	}
	// Messages added after a read come after its last message.
	_, err = s.AddMessage(ctx, &agentd.Message{ID: "msg_late", ConversationID: conv.ID, Role: agentd.RoleUser, CreatedAt: t0}, nil)
	noErr(t, err, "AddMessage late")
	msgs, err = s.MessagesAfter(ctx, conv.ID, want[4])
	noErr(t, err, "MessagesAfter late")
	wantIDs(t, "MessagesAfter late", func() (ids []string) {
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
		return ids
	}(), "msg_late")
}

// MessageToolCalls lists the calls of the messages named, in ToolCalls'
// order, of the conversation named only; its ids are bounded.
func testMessageToolCalls(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	msg := func(c *agentd.Conversation) string {
		m := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c.ID, Role: agentd.RoleAssistant, CreatedAt: t0}
		_, err := s.AddMessage(ctx, m, nil)
		noErr(t, err, "AddMessage")
		return m.ID
	}
	m1, m2, m3 := msg(conv), msg(conv), msg(conv)
	call := func(r *agentd.Run, m string, step, index int) *agentd.ToolCall {
		c := newCall(r, step, index, agentd.StatusCompleted)
		c.MessageID = m
		return c
	}
	a1, a0, b0, c0 := call(run, m1, 1, 1), call(run, m1, 1, 0), call(run, m2, 2, 0), call(run, m3, 3, 0)
	createCalls(t, s, a1, a0, b0, c0)
	otherConv := newConversation(t, s)
	otherMsg := msg(otherConv)
	createCalls(t, s, call(startRun(t, s, otherConv), otherMsg, 1, 0))

	for _, tc := range []struct {
		what string
		ids  []string
		want []string
	}{
		{"one message", []string{m2}, []string{b0.ID}},
		{"two messages, named in any order", []string{m3, m1}, []string{a0.ID, a1.ID, c0.ID}},
		{"another conversation's message", []string{otherMsg}, nil},
		{"no message", nil, nil},
	} {
		calls, err := s.MessageToolCalls(ctx, conv.ID, tc.ids)
		noErr(t, err, "MessageToolCalls "+tc.what)
		wantIDs(t, "MessageToolCalls "+tc.what, ids(calls), tc.want...)
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = m1
	}
	_, err := s.MessageToolCalls(ctx, conv.ID, many)
	wantCode(t, err, agentd.EINVALID)
}

// ToolCallsAfter lists the calls of the messages after a cursor message, in
// ToolCalls' order, of the conversation named only; an empty cursor lists
// all of its calls; an unknown cursor, or another conversation's message,
// is ENOTFOUND.
func testToolCallsAfter(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv, otherConv := newConversation(t, s), newConversation(t, s)
	run, otherRun := startRun(t, s, conv), startRun(t, s, otherConv)
	msg := func(c *agentd.Conversation, role string) string {
		m := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c.ID, Role: role, CreatedAt: t0}
		_, err := s.AddMessage(ctx, m, nil)
		noErr(t, err, "AddMessage")
		return m.ID
	}
	call := func(r *agentd.Run, m string, step, index int) *agentd.ToolCall {
		c := newCall(r, step, index, agentd.StatusCompleted)
		c.MessageID = m
		return c
	}
	m1, m2 := msg(conv, agentd.RoleAssistant), msg(conv, agentd.RoleAssistant)
	o1 := msg(otherConv, agentd.RoleAssistant) // between m2 and m3 in insertion order
	m3, m4 := msg(conv, agentd.RoleUser), msg(conv, agentd.RoleAssistant)
	a1, a0, b0, d0 := call(run, m1, 1, 1), call(run, m1, 1, 0), call(run, m2, 2, 0), call(run, m4, 3, 0)
	createCalls(t, s, a1, a0, b0, d0, call(otherRun, o1, 1, 0))
	for _, tc := range []struct {
		after string
		want  []string
	}{
		{"", []string{a0.ID, a1.ID, b0.ID, d0.ID}},
		{m1, []string{b0.ID, d0.ID}},
		{m2, []string{d0.ID}},
		{m3, []string{d0.ID}},
		{m4, nil},
	} {
		calls, err := s.ToolCallsAfter(ctx, conv.ID, tc.after)
		noErr(t, err, "ToolCallsAfter "+tc.after)
		wantIDs(t, fmt.Sprintf("ToolCallsAfter %q", tc.after), ids(calls), tc.want...)
	}
	for _, bad := range []string{"msg_unknown", o1} {
		calls, err := s.ToolCallsAfter(ctx, conv.ID, bad)
		if wantCode(t, err, agentd.ENOTFOUND); len(calls) > 0 {
			t.Errorf("ToolCallsAfter %q = %v, want no calls", bad, ids(calls))
		}
	}
	// A message added after a read, with its call, comes after the read's
	// last message; the calls come with their decisions.
	m5 := msg(conv, agentd.RoleAssistant)
	e0 := newCall(run, 4, 0, agentd.StatusRequiresConfirmation)
	e0.MessageID = m5
	createCalls(t, s, e0)
	_, _, err := s.UpdateToolCall(ctx, decided(e0.ID, agentd.DecisionDenied, "k1", agentd.RoleOperator, agentd.ViaSingle, t0), nil)
	noErr(t, err, "UpdateToolCall")
	calls, err := s.ToolCallsAfter(ctx, conv.ID, m4)
	noErr(t, err, "ToolCallsAfter late")
	wantIDs(t, "ToolCallsAfter late", ids(calls), e0.ID)
	if len(calls) == 1 && (len(calls[0].Decisions) != 1 || calls[0].Decisions[0].Decision != agentd.DecisionDenied) {
		t.Errorf("ToolCallsAfter late: decisions %+v, want the denial", calls[0].Decisions)
	}
}

func testAddMessageErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	_, err := s.AddMessage(ctx, &agentd.Message{ConversationID: conv.ID}, nil)
	wantCode(t, err, agentd.EINVALID)
	_, err = s.AddMessage(ctx, &agentd.Message{ID: "msg_1", ConversationID: "conv_missing"}, nil)
	wantCode(t, err, agentd.ENOTFOUND)

	m := &agentd.Message{ID: "msg_1", ConversationID: conv.ID, Role: agentd.RoleUser, Content: "first"}
	_, err = s.AddMessage(ctx, m, nil)
	noErr(t, err, "AddMessage")
	_, err = s.AddMessage(ctx, &agentd.Message{ID: "msg_1", ConversationID: conv.ID, Content: "second"},
		[]agentd.EventDraft{draft(conv.ID, agentd.EventMessage, `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	msgs, err := s.Messages(ctx, conv.ID)
	noErr(t, err, "Messages")
	if len(msgs) != 1 || msgs[0].Content != "first" {
		t.Errorf("Messages = %+v, want only the first", msgs)
	}
	if n := len(allEvents(t, s, conv.ID)); n != 0 {
		t.Errorf("failed AddMessage appended %d events", n)
	}

	// Events for a missing conversation roll the message back.
	_, err = s.AddMessage(ctx, &agentd.Message{ID: "msg_2", ConversationID: conv.ID},
		[]agentd.EventDraft{draft("conv_missing", agentd.EventMessage, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	if msgs, _ := s.Messages(ctx, conv.ID); len(msgs) != 1 {
		t.Errorf("failed AddMessage stored its message: %d messages", len(msgs))
	}
}

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
// (CallUpdate.Card) applies only while the call shows that card. A decision
// planned on card 1 and committed after the call was approved and parked
// again is ECONFLICT and writes nothing; one planned on card 2 applies; an
// update without Card is unchanged.
func testUpdateToolCallCard(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	c := newCall(startRun(t, s, conv), 1, 0, agentd.StatusRequiresConfirmation)
	createCalls(t, s, c)
	first := approval(c.ID, "key-1", at(time.Minute))
	first.Status, first.Card = agentd.StatusApproved, 1
	late := approval(c.ID, "key-2", at(time.Minute)) // the same click, planned on card 1 too
	late.Status, late.Card = agentd.StatusApproved, 1
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
	second.Status, second.Card = agentd.StatusApproved, 2
	got, _, err := s.UpdateToolCall(ctx, second, nil)
	noErr(t, err, "approve card 2")
	if got.Status != agentd.StatusApproved || len(got.Decisions) != 2 || got.Decisions[1].DecidedBy != "key-2" {
		t.Fatalf("card 2's approval = %+v", got)
	}
}
