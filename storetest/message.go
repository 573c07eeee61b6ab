package storetest

import (
	"context"
	"fmt"
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
