package api_test

import (
	"context"
	"slices"
	"sync"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// fakeStore is an in-memory api.StoreReads: the conversations, messages, runs
// and calls the fake services record, each conversation's event log, the
// protocol threads' bindings; Ping answers down. Lookups by id answer
// ENOTFOUND for what it does not hold, as a store does, and leave the
// tenant checks to the caller.
type fakeStore struct {
	mu       sync.Mutex
	convs    map[string]*agentd.Conversation
	messages map[string][]agentd.Message // by conversation
	runs     map[string]*agentd.Run
	calls    map[string]*agentd.ToolCall
	events   map[string][]agentd.Event // by conversation, in Seq order
	threads  map[agentd.ThreadKey]string
	down     error // Ping answers it
}

func newFakeStore() *fakeStore {
	return &fakeStore{convs: map[string]*agentd.Conversation{}, messages: map[string][]agentd.Message{},
		runs: map[string]*agentd.Run{}, calls: map[string]*agentd.ToolCall{}, events: map[string][]agentd.Event{},
		threads: map[agentd.ThreadKey]string{}}
}

var _ api.StoreReads = (*fakeStore)(nil)

func (s *fakeStore) putConversation(c *agentd.Conversation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.convs[c.ID] = c
}

// reach returns conversation id if p reaches it, else the ENOTFOUND an
// engine answers for it whether or not it exists.
func (s *fakeStore) reach(p agentd.Principal, id string) (*agentd.Conversation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok || !p.Reaches(c) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "conversation not found")
	}
	return c, nil
}

func (s *fakeStore) Events(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]agentd.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []agentd.Event
	for _, e := range s.events[conversationID] {
		if e.Seq > afterSeq && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *fakeStore) LastSeq(ctx context.Context, conversationID string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.events[conversationID]
	if len(log) == 0 {
		return 0, nil
	}
	return log[len(log)-1].Seq, nil
}

func (s *fakeStore) BindThread(ctx context.Context, b agentd.ThreadBinding) (string, error) {
	k := b.ThreadKey
	if k.TenantID == "" || k.ProjectID == "" || k.KeyID == "" || k.Protocol == "" || k.ThreadID == "" || b.ConversationID == "" {
		return "", agentd.Errorf(agentd.EINVALID, "incomplete thread binding")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.convs[b.ConversationID]; !ok {
		return "", agentd.Errorf(agentd.ENOTFOUND, "conversation not found")
	}
	if conv, ok := s.threads[k]; ok {
		return conv, nil
	}
	s.threads[k] = b.ConversationID
	return b.ConversationID, nil
}

func (s *fakeStore) ThreadConversation(ctx context.Context, k agentd.ThreadKey) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conv, ok := s.threads[k]; ok {
		return conv, nil
	}
	return "", agentd.Errorf(agentd.ENOTFOUND, "thread not found")
}

func (s *fakeStore) Run(ctx context.Context, id string) (*agentd.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "run not found")
	}
	cp := *r
	return &cp, nil
}

func (s *fakeStore) RunToolCalls(ctx context.Context, runID string) ([]agentd.ToolCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.callsWhere(func(c *agentd.ToolCall) bool { return c.RunID == runID }), nil
}

func (s *fakeStore) ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.calls[id]
	if !ok {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call not found")
	}
	cp := *c
	cp.Decisions = slices.Clone(c.Decisions)
	return &cp, nil
}

func (s *fakeStore) Messages(ctx context.Context, conversationID string) ([]agentd.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.messages[conversationID]), nil
}

func (s *fakeStore) Ping(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// callsWhere returns copies of the calls that match, in ID order (ids are
// time-ordered: creation order). s.mu is held.
func (s *fakeStore) callsWhere(match func(*agentd.ToolCall) bool) []agentd.ToolCall {
	out := []agentd.ToolCall{}
	for _, c := range s.calls {
		if match(c) {
			cp := *c
			cp.Decisions = slices.Clone(c.Decisions)
			out = append(out, cp)
		}
	}
	slices.SortFunc(out, func(a, b agentd.ToolCall) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}
