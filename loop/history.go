package loop

import (
	"context"
	"slices"
	"sync"

	"github.com/agentd-dev/agentd"
)

// historyCache is a conversation's messages and their calls as a driver
// last read them, so that the next model step reads only what is new: the
// messages after the last it holds (messages are only appended; the store
// reads them from its index after that one, however many there are
// before) with their calls (ToolCallsAfter, one read), and the calls of
// the messages whose calls were not all terminal (a terminal call never
// changes again). A step's cost then stays flat as the conversation
// grows, where reading it whole grew with it.
//
// A cache belongs to one driver at a time. When the driver finishes its
// run or exits, the cache goes to the engine's histories, keyed by tenant
// and conversation, for the conversation's next driver (the next run, say: users make many
// short runs in one conversation), unless the run waits for people (a
// parked run holds nothing). Whoever takes it reads what came after it
// before using it, so what another engine or replica appended meanwhile
// is read, never skipped.
type historyCache struct {
	tenant, conv string
	msgs         []agentd.Message
	calls        map[string][]agentd.ToolCall // by message id, in ToolCalls order
	// open lists the messages with a call that was not terminal.
	open map[string]bool
	// model is the model's view of msgs[:final], the longest prefix of
	// messages without an open call: it never changes again, so each step
	// builds only the model messages of what follows.
	model []agentd.ModelMessage
	final int
}

func newHistoryCache(tenant, conv string) *historyCache {
	return &historyCache{tenant: tenant, conv: conv, calls: map[string][]agentd.ToolCall{}, open: map[string]bool{}}
}

// history maps the conversation of run to model messages: each assistant
// message is followed by exactly one tool message per call it made. It
// reads the store incrementally through rs's cache, which it takes from
// the engine's histories on the driver's first step.
func (e *runner) history(ctx context.Context, rs *runState, run *agentd.Run) ([]agentd.ModelMessage, error) {
	if rs.hist == nil {
		rs.hist = e.histories.take(run.TenantID, run.ConversationID)
	}
	if rs.hist == nil {
		rs.hist = newHistoryCache(run.TenantID, run.ConversationID)
	}
	err := rs.hist.refresh(ctx, e.store, rs.step.final())
	if agentd.ErrorCode(err) == agentd.ENOTFOUND && len(rs.hist.msgs) > 0 {
		// The cursor is not the conversation's any more: read it whole.
		rs.hist = newHistoryCache(run.TenantID, run.ConversationID)
		err = rs.hist.refresh(ctx, e.store, rs.step.final())
	}
	if err != nil {
		rs.hist = nil // half read: the next step reads it whole
		return nil, err
	}
	return e.modelMessages(rs.hist), nil
}

// exited is what a driver's exit leaves: the run's lease freed
// (releaseLease) and its history kept for the conversation's next driver.
func (e *runner) exited(rs *runState) {
	e.leases.releaseLease(rs)
	e.histories.put(rs.hist)
}

// keepHistory hands the history of rs's driver to the engine's histories
// before the driver finishes its run: the conversation's next run, which
// can start as soon as this one's end is committed, finds it there. Were
// the driver to need it again (the end was not committed), history takes
// it back.
func (e *runner) keepHistory(rs *runState) {
	e.histories.put(rs.hist)
	rs.hist = nil
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

// refresh reads what is new since the last read: the messages after the
// last held, their calls in one read (all of the conversation's on the
// first), and again the calls of the messages with an open call. known,
// when not nil, is the calls of one message as the driver has just read
// them, all terminal: that message's calls are taken from it.
func (h *historyCache) refresh(ctx context.Context, st historyStore, known []agentd.ToolCall) error {
	after := ""
	if len(h.msgs) > 0 {
		after = h.msgs[len(h.msgs)-1].ID
	}
	msgs, err := st.MessagesAfter(ctx, h.conv, after)
	if err != nil {
		return err
	}
	var fresh []string // the new messages whose calls are read
	isFresh := map[string]bool{}
	for _, m := range msgs {
		switch {
		case m.Role == agentd.RoleUser:
		case len(known) > 0 && known[0].MessageID == m.ID:
			h.replace([]string{m.ID}, slices.Clone(known))
		default:
			fresh = append(fresh, m.ID)
			isFresh[m.ID] = true
		}
	}
	if len(fresh) > 0 {
		calls, err := st.ToolCallsAfter(ctx, h.conv, after)
		if err != nil {
			return err
		}
		// Only the calls of the messages read: a step committed since
		// is read with its message, next time.
		h.replace(fresh, slices.DeleteFunc(calls, func(c agentd.ToolCall) bool { return !isFresh[c.MessageID] }))
	}
	stale := make([]string, 0, len(h.open))
	for id := range h.open {
		if !isFresh[id] {
			stale = append(stale, id)
		}
	}
	for len(stale) > 0 {
		n := min(len(stale), maxHistoryIDs)
		calls, err := st.MessageToolCalls(ctx, h.conv, stale[:n])
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
func (e *runner) modelMessages(h *historyCache) []agentd.ModelMessage {
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
func (e *runner) appendModel(out []agentd.ModelMessage, m agentd.Message, calls []agentd.ToolCall) []agentd.ModelMessage {
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

// defaultHistories is how many conversations' histories an engine keeps
// for their next driver (Options.Histories).
const defaultHistories = 16

// historySet is the histories of conversations whose driver exited, for
// the conversation's next driver: at most max, the least recently put
// dropped first. A history is in it or with one driver, never both.
type historySet struct {
	mu   sync.Mutex
	max  int
	idle []*historyCache // least recently put first
}

// take removes and returns the history of the tenant's conversation, or
// nil.
func (s *historySet) take(tenant, conv string) *historyCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.idle {
		if h.conv == conv && h.tenant == tenant {
			s.idle = slices.Delete(s.idle, i, i+1)
			return h
		}
	}
	return nil
}

// put keeps h for its conversation's next driver, in place of any other
// of the conversation, dropping the least recently put beyond max.
func (s *historySet) put(h *historyCache) {
	if h == nil || s.max <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle = slices.DeleteFunc(s.idle, func(o *historyCache) bool { return o.conv == h.conv && o.tenant == h.tenant })
	if len(s.idle) >= s.max {
		s.idle[0] = nil
		s.idle = s.idle[1:]
	}
	s.idle = append(s.idle, h)
}

// len returns how many histories s holds.
func (s *historySet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}
