package loop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/tools"
)

// readStore is the SQLite store recording how the engine reads histories.
type readStore struct {
	*sqlite.DB
	mu    sync.Mutex
	after []string // MessagesAfter's cursor, call by call
	whole int      // Messages and ToolCalls calls
	runs  int      // RunToolCalls calls
	msgs  int      // MessageToolCalls calls
	calls []string // ToolCallsAfter's cursor, call by call
}

func (s *readStore) ToolCallsAfter(ctx context.Context, conv, after string) ([]agentd.ToolCall, error) {
	s.mu.Lock()
	s.calls = append(s.calls, after)
	s.mu.Unlock()
	return s.DB.ToolCallsAfter(ctx, conv, after)
}

// cursors returns the cursors of the MessagesAfter and ToolCallsAfter
// reads so far.
func (s *readStore) cursors() (msgs, calls []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.after), slices.Clone(s.calls)
}

func (s *readStore) MessageToolCalls(ctx context.Context, conv string, ids []string) ([]agentd.ToolCall, error) {
	s.mu.Lock()
	s.msgs++
	s.mu.Unlock()
	return s.DB.MessageToolCalls(ctx, conv, ids)
}

func (s *readStore) RunToolCalls(ctx context.Context, run string) ([]agentd.ToolCall, error) {
	s.mu.Lock()
	s.runs++
	s.mu.Unlock()
	return s.DB.RunToolCalls(ctx, run)
}

func (s *readStore) MessagesAfter(ctx context.Context, conv, after string) ([]agentd.Message, error) {
	s.mu.Lock()
	s.after = append(s.after, after)
	s.mu.Unlock()
	return s.DB.MessagesAfter(ctx, conv, after)
}

func (s *readStore) Messages(ctx context.Context, conv string) ([]agentd.Message, error) {
	s.mu.Lock()
	s.whole++
	s.mu.Unlock()
	return s.DB.Messages(ctx, conv)
}

func (s *readStore) ToolCalls(ctx context.Context, conv string) ([]agentd.ToolCall, error) {
	s.mu.Lock()
	s.whole++
	s.mu.Unlock()
	return s.DB.ToolCalls(ctx, conv)
}

// A run's next model step reads only what is new in its conversation: the
// messages after those it read before (the step's own assistant message),
// with their calls; the model still gets the whole history, results
// included. The driver reads the calls of a step it recorded by the step's
// message, never all of the run's calls again, and the history takes a
// step's finished calls from that read instead of reading them again.
func TestHistoryReadIncrementally(t *testing.T) {
	ts, _ := writeTools(t)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	mustOK(t, err)
	st := &readStore{DB: db}
	rec := newRecorder()
	model := &stepModel{replies: []agentd.ModelResponse{
		{Text: "recording", ToolCalls: []agentd.ModelToolCall{{Name: "record", Arguments: json.RawMessage(`{}`)}}},
		{Text: "again", ToolCalls: []agentd.ModelToolCall{{Name: "record", Arguments: json.RawMessage(`{}`)}}},
		{Text: "done"},
	}}
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, tools.NewSource(ts)), ApprovalTimeout: 10 * time.Minute, MaxTurns: 5},
		loop.Options{ExpireEvery: -1})
	mustOK(t, e.Start(context.Background()))
	t.Cleanup(func() { e.Close(); db.Close() })
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := e.CreateConversation(context.Background(), p, "", nil)
	mustOK(t, err)
	_, err = e.Send(context.Background(), p, conv.ID, "go")
	mustOK(t, err)
	rec.wait(t, agentd.EventRunFinished, 1)

	st.mu.Lock()
	after, whole, runs, msgs, calls := slices.Clone(st.after), st.whole, st.runs, st.msgs, len(st.calls)
	st.mu.Unlock()
	held, err := db.Messages(context.Background(), conv.ID)
	mustOK(t, err)
	if len(held) < 2 || !slices.Equal(after, []string{"", held[0].ID, held[1].ID}) || whole != 0 || runs != 0 || msgs != 0 || calls != 0 {
		t.Errorf("reads: MessagesAfter %q, %d whole reads, %d of the run's calls, %d of messages' calls and %d after a message, want after none, the user's message and the first step's, and none of the others",
			after, whole, runs, msgs, calls)
	}
	last := model.request(2).Messages
	if n := len(last); n != 5 || last[2].ToolStatus != agentd.StatusCompleted || last[4].ToolStatus != agentd.StatusCompleted ||
		last[3].Content != "again" || len(last[3].ToolCalls) != 1 {
		t.Errorf("third step's history %+v, want user, two assistant steps each with its completed result", last)
	}
}

// historyEngine is an engine on st whose model answers with replies, with
// the record and pay tools.
func historyEngine(t *testing.T, st loop.Store, before func(*loop.Engine), replies ...agentd.ModelResponse) (*loop.Engine, *recorder, *stepModel) {
	t.Helper()
	ts, _ := writeTools(t)
	rec, model := newRecorder(), &stepModel{replies: replies}
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, tools.NewSource(ts)), ApprovalTimeout: 10 * time.Minute, MaxTurns: 5},
		loop.Options{ExpireEvery: -1})
	if before != nil {
		before(e)
	}
	mustOK(t, e.Start(context.Background()))
	t.Cleanup(e.Close)
	return e, rec, model
}

// wantColdView fails unless got, a model request's history, is the model's
// view of the conversation read whole, but for its last reply messages.
func wantColdView(t *testing.T, e *loop.Engine, p agentd.Principal, conv string, got []agentd.ModelMessage, reply int) {
	t.Helper()
	cold, err := loop.ColdHistory(context.Background(), e, p.TenantID, conv)
	mustOK(t, err)
	if len(cold) != len(got)+reply || !reflect.DeepEqual(got, cold[:len(got)]) {
		t.Errorf("history from the cache:\n%+v\nwant the conversation read whole (but for its last %d messages):\n%+v", got, reply, cold)
	}
}

// The next run of a conversation takes its history from the run before
// (its driver kept it): it reads only the messages after those the cache
// holds and their calls, and its model gets the view a driver without a
// cache builds (denied and refused results alike). A run that waits for
// people keeps nothing: the driver after the decision reads the
// conversation whole.
func TestHistoryKeptAcrossRuns(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	mustOK(t, err)
	t.Cleanup(func() { db.Close() })
	st := &readStore{DB: db}
	retired := make(chan string, 1)
	e, rec, model := historyEngine(t, st, func(e *loop.Engine) {
		loop.SetRetireHook(e, func(_, stage string) {
			if stage == "after" {
				retired <- stage
			}
		})
	}, agentd.ModelResponse{Text: "both", ToolCalls: []agentd.ModelToolCall{
		{Name: "pay", Arguments: json.RawMessage(`{"amount":1}`)},
		{Name: "missing", Arguments: json.RawMessage(`{}`)},
	}})
	ctx := context.Background()
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := e.CreateConversation(ctx, p, "", nil)
	mustOK(t, err)
	_, err = e.Send(ctx, p, conv.ID, "go")
	mustOK(t, err)
	ev := rec.wait(t, agentd.EventConfirmationRequired, 1)
	<-retired
	var d struct {
		ID string `json:"tool_call_id"`
	}
	mustOK(t, json.Unmarshal(ev.Data, &d))
	_, err = e.Decide(ctx, p, d.ID, agentd.DecisionRequest{Decision: "deny", Reason: "not today"})
	mustOK(t, err)
	rec.wait(t, agentd.EventRunFinished, 1)
	_, err = e.Send(ctx, p, conv.ID, "again")
	mustOK(t, err)
	rec.wait(t, agentd.EventRunFinished, 2)

	after, _ := st.cursors()
	held, err := db.Messages(ctx, conv.ID)
	mustOK(t, err)
	if len(held) != 5 || !slices.Equal(after, []string{"", "", held[1].ID}) {
		t.Errorf("MessagesAfter cursors %q: want the conversation read whole twice (the first run, its driver after the decision), then after the first run's first step (%s)",
			after, held[1].ID)
	}
	wantColdView(t, e, p, conv.ID, model.request(2).Messages, 1)
}

// A conversation another engine on the same store moved on meanwhile is
// read again from where the cache ends: the next run's model sees the
// other engine's messages and results, as a driver without a cache would.
func TestHistoryReadAfterAnotherWriter(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	mustOK(t, err)
	t.Cleanup(func() { db.Close() })
	record := agentd.ModelResponse{Text: "recording", ToolCalls: []agentd.ModelToolCall{{Name: "record", Arguments: json.RawMessage(`{}`)}}}
	st := &readStore{DB: db}
	a, recA, modelA := historyEngine(t, st, nil, record, agentd.ModelResponse{Text: "one"})
	b, recB, _ := historyEngine(t, db, nil, record, agentd.ModelResponse{Text: "two"})
	ctx := context.Background()
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := a.CreateConversation(ctx, p, "", nil)
	mustOK(t, err)
	_, err = a.Send(ctx, p, conv.ID, "first")
	mustOK(t, err)
	recA.wait(t, agentd.EventRunFinished, 1)
	_, err = b.Send(ctx, p, conv.ID, "second")
	mustOK(t, err)
	recB.wait(t, agentd.EventRunFinished, 1)
	_, err = a.Send(ctx, p, conv.ID, "third")
	mustOK(t, err)
	recA.wait(t, agentd.EventRunFinished, 2)

	after, _ := st.cursors()
	got := modelA.request(2).Messages
	wantColdView(t, a, p, conv.ID, got, 1)
	var contents []string
	for _, m := range got {
		contents = append(contents, m.Content)
	}
	if !slices.Contains(contents, "second") || !slices.Contains(contents, "two") || len(got) != 9 {
		t.Errorf("third run's history %q, want both runs before it and its message (9 messages)", contents)
	}
	if slices.Index(after, "") != 0 || slices.Contains(after[1:], "") {
		t.Errorf("engine a's MessagesAfter cursors %q: want the conversation read whole once, then after the cache's last message", after)
	}
}
