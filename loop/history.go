package loop

import (
	"context"

	"github.com/agentd-dev/agentd"
)

// historyCache is a conversation's messages and their calls as a run's
// driver last read them, so that the next model step reads only what is
// new: the messages after those it holds (messages are only appended) and
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
}

// history maps a conversation to model messages: each assistant message is
// followed by exactly one tool message per call it made. It reads the
// store incrementally through rs's cache.
func (e *Engine) history(ctx context.Context, rs *runState, convID string) ([]agentd.ModelMessage, error) {
	if rs.hist == nil {
		rs.hist = &historyCache{calls: map[string][]agentd.ToolCall{}, open: map[string]bool{}}
	}
	if err := rs.hist.refresh(ctx, e.store, convID); err != nil {
		return nil, err
	}
	return e.modelMessages(rs.hist), nil
}

// refresh reads what is new since the last read.
func (h *historyCache) refresh(ctx context.Context, st Store, convID string) error {
	msgs, err := st.MessagesAfter(ctx, convID, len(h.msgs))
	if err != nil {
		return err
	}
	stale := make([]string, 0, len(h.open)+len(msgs))
	for id := range h.open {
		stale = append(stale, id)
	}
	for _, m := range msgs {
		if m.Role != agentd.RoleUser {
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

// modelMessages builds the model's view of the cached history.
func (e *Engine) modelMessages(h *historyCache) []agentd.ModelMessage {
	out := make([]agentd.ModelMessage, 0, 2*len(h.msgs))
	for _, m := range h.msgs {
		if m.Role == agentd.RoleUser {
			out = append(out, agentd.ModelMessage{Role: agentd.ModelRoleUser, Content: m.Content})
			continue
		}
		calls := h.calls[m.ID]
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
	}
	return out
}
