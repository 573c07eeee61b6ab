package loop

import (
	"context"
	"slices"

	"github.com/agentd-dev/agentd"
)

// historyCache is a conversation's messages and their calls as a run's
// driver last read them, so that the next model step reads only what is
// new: the messages after the last it holds (messages are only appended;
// the store reads them from its index after that one, however many there
// are before) and
// the calls of the new messages and of the messages whose calls were not
// all terminal (a terminal call never changes again). A step's cost then
// stays flat as the conversation grows, where reading it whole grew with
// it. The cache lives as long as the driver: a new driver (the run resumed
// after a wait, another run, a restart) reads the conversation once whole.
type historyCache struct {
	msgs  []agentd.Message
	calls map[string][]agentd.ToolCall // by message id, in ToolCalls order
	// open lists the messages with a call that was not terminal.
	open map[string]bool
	// model is the model's view of msgs[:final], the longest prefix of
	// messages without an open call: it never changes again, so each step
	// builds only the model messages of what follows.
	model []agentd.ModelMessage
	final int
}

// history maps a conversation to model messages: each assistant message is
// followed by exactly one tool message per call it made. It reads the
// store incrementally through rs's cache.
func (e *Engine) history(ctx context.Context, rs *runState, convID string) ([]agentd.ModelMessage, error) {
	if rs.hist == nil {
		rs.hist = &historyCache{calls: map[string][]agentd.ToolCall{}, open: map[string]bool{}}
	}
	if err := rs.hist.refresh(ctx, e.store, convID, rs.step.final()); err != nil {
		return nil, err
	}
	return e.modelMessages(rs.hist), nil
}

// final returns the step's calls when each is terminal and as the store
// returned it, and they are of one message (a step's calls are all of its
// assistant message); else nil.
func (s *stepCache) final() []agentd.ToolCall {
	if !s.known || len(s.calls) == 0 {
		return nil
	}
	for i, c := range s.calls {
		if !s.read[i] || !c.Status.Terminal() || c.MessageID != s.calls[0].MessageID {
			return nil
		}
	}
	return s.calls
}

// refresh reads what is new since the last read. known, when not nil, is
// the calls of one message as the driver has just read them, all
// terminal: that message's calls are not read again.
func (h *historyCache) refresh(ctx context.Context, st Store, convID string, known []agentd.ToolCall) error {
	after := ""
	if len(h.msgs) > 0 {
		after = h.msgs[len(h.msgs)-1].ID
	}
	msgs, err := st.MessagesAfter(ctx, convID, after)
	if err != nil {
		return err
	}
	stale := make([]string, 0, len(h.open)+len(msgs))
	for id := range h.open {
		stale = append(stale, id)
	}
	for _, m := range msgs {
		switch {
		case m.Role == agentd.RoleUser:
		case len(known) > 0 && known[0].MessageID == m.ID:
			h.replace([]string{m.ID}, slices.Clone(known))
		default:
			stale = append(stale, m.ID)
		}
	}
	for len(stale) > 0 {
		n := min(len(stale), maxHistoryIDs)
		calls, err := st.MessageToolCalls(ctx, convID, stale[:n])
		if err != nil {
			return err
		}
		h.replace(stale[:n], calls)
		stale = stale[n:]
	}
	h.msgs = append(h.msgs, msgs...)
	return nil
}

// maxHistoryIDs is how many message ids one MessageToolCalls read names
// (the store's bound).
const maxHistoryIDs = 1000

// replace sets the calls of the messages ids to calls, as read now.
func (h *historyCache) replace(ids []string, calls []agentd.ToolCall) {
	for _, id := range ids {
		delete(h.calls, id)
		delete(h.open, id)
	}
	for _, c := range calls {
		h.calls[c.MessageID] = append(h.calls[c.MessageID], c)
		if !c.Status.Terminal() {
			h.open[c.MessageID] = true
		}
	}
}

// modelMessages builds the model's view of the cached history: the view
// of its final prefix as built before, extended, and the rest built anew.
// The slice shares the prefix with the cache (clipped, so that appending
// to it copies); a model reads its request's messages, never writes them.
func (e *Engine) modelMessages(h *historyCache) []agentd.ModelMessage {
	for h.final < len(h.msgs) && !h.open[h.msgs[h.final].ID] {
		h.model = e.appendModel(h.model, h.msgs[h.final], h.calls[h.msgs[h.final].ID])
		h.final++
	}
	out := slices.Clip(h.model)
	for _, m := range h.msgs[h.final:] {
		out = e.appendModel(out, m, h.calls[m.ID])
	}
	return out
}

// appendModel appends to out the model messages of m and its calls: a
// user message, or an assistant message followed by one tool message per
// call.
func (e *Engine) appendModel(out []agentd.ModelMessage, m agentd.Message, calls []agentd.ToolCall) []agentd.ModelMessage {
	if m.Role == agentd.RoleUser {
		return append(out, agentd.ModelMessage{Role: agentd.ModelRoleUser, Content: m.Content})
	}
	am := agentd.ModelMessage{Role: agentd.ModelRoleAssistant, Content: m.Content}
	for _, c := range calls {
		am.ToolCalls = append(am.ToolCalls, agentd.ModelToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	out = append(out, am)
	for _, c := range calls {
		content, reason := e.toolResultText(c)
		tm := agentd.ModelMessage{Role: agentd.ModelRoleTool, Content: content, ToolCallID: c.ID, ToolName: c.Name,
			ToolStatus: c.Status, ToolReason: reason}
		if c.Status == agentd.StatusCompleted {
			tm.ToolResult = c.Result
		}
		out = append(out, tm)
	}
	return out
}
