package loop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
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
	after, whole, runs, msgs := slices.Clone(st.after), st.whole, st.runs, st.msgs
	st.mu.Unlock()
	held, err := db.Messages(context.Background(), conv.ID)
	mustOK(t, err)
	if len(held) < 2 || !slices.Equal(after, []string{"", held[0].ID, held[1].ID}) || whole != 0 || runs != 0 || msgs != 0 {
		t.Errorf("reads: MessagesAfter %q, %d whole reads, %d of the run's calls and %d of messages' calls, want after none, the user's message and the first step's, and none of the others",
			after, whole, runs, msgs)
	}
	last := model.request(2).Messages
	if n := len(last); n != 5 || last[2].ToolStatus != agentd.StatusCompleted || last[4].ToolStatus != agentd.StatusCompleted ||
		last[3].Content != "again" || len(last[3].ToolCalls) != 1 {
		t.Errorf("third step's history %+v, want user, two assistant steps each with its completed result", last)
	}
}
