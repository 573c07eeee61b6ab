package loop_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/tools"
)

// transitionStore is the SQLite store recording each call's conditional
// transitions (from → to) as the engine asks for them.
type transitionStore struct {
	*sqlite.DB
	mu  sync.Mutex
	log map[string][]string
}

func (s *transitionStore) UpdateToolCall(ctx context.Context, u agentd.CallUpdate, drafts []agentd.EventDraft) (*agentd.ToolCall, []agentd.Event, error) {
	c, evs, err := s.DB.UpdateToolCall(ctx, u, drafts)
	if err == nil {
		s.mu.Lock()
		s.log[u.ID] = append(s.log[u.ID], string(u.From[0])+"→"+string(u.Status))
		s.mu.Unlock()
	}
	return c, evs, err
}

func (s *transitionStore) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log[id])
}

// An approval of an idempotent tool's call claims it in the decision's own
// commit (requires_confirmation → executing, confirmation_resolved then
// tool_call_started); a tool that is not idempotent keeps the two commits
// (→ approved, then approved → executing) that make "approved but certainly
// not started" exact after a crash.
func TestApprovalCommitsOnceForIdempotentTools(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "exec.log")
	for name, def := range map[string]string{
		"pay":  `{"name":"pay","description":"pay","exposure":{"kind":"requires-confirmation"},"command":["/bin/sh","./run.sh"],"env":["LOOP_TEST_LOG"]}`,
		"sync": `{"name":"sync","description":"sync","idempotent":true,"exposure":{"kind":"requires-confirmation"},"command":["/bin/sh","./run.sh"],"env":["LOOP_TEST_LOG"]}`,
	} {
		td := filepath.Join(dir, "tools", name)
		mustOK(t, os.MkdirAll(td, 0o755))
		mustOK(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null; echo "+name+" >> \"$LOOP_TEST_LOG\"; printf '{\"ok\":true}'\n"), 0o755))
		mustOK(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(def), 0o644))
	}
	t.Setenv("LOOP_TEST_LOG", log)
	ts, _, err := tools.LoadDir(filepath.Join(dir, "tools"))
	mustOK(t, err)
	db, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
	mustOK(t, err)
	st := &transitionStore{DB: db, log: map[string][]string{}}
	rec := newRecorder()
	model := &stepModel{replies: []agentd.ModelResponse{
		{ToolCalls: []agentd.ModelToolCall{{Name: "sync", Arguments: json.RawMessage(`{}`)}, {Name: "pay", Arguments: json.RawMessage(`{"amount":3}`)}}},
	}}
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, tools.NewSource(ts)), ApprovalTimeout: 10 * time.Minute, MaxTurns: 5},
		loop.Options{ExpireEvery: -1})
	mustOK(t, e.Start(context.Background()))
	t.Cleanup(func() { e.Close(); db.Close() })

	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := e.CreateConversation(context.Background(), p, "", nil)
	mustOK(t, err)
	_, err = e.Send(context.Background(), p, conv.ID, "both")
	mustOK(t, err)
	ids := map[string]string{}
	for i := 1; i <= 2; i++ {
		var d struct {
			ID   string `json:"tool_call_id"`
			Name string `json:"tool_name"`
		}
		mustOK(t, json.Unmarshal(rec.wait(t, agentd.EventConfirmationRequired, i).Data, &d))
		ids[d.Name] = d.ID
	}
	for _, name := range []string{"sync", "pay"} {
		if _, err := e.Decide(context.Background(), p, ids[name], agentd.DecisionRequest{Decision: "approve"}); err != nil {
			t.Fatalf("approve %s: %v", name, err)
		}
	}
	rec.wait(t, agentd.EventRunFinished, 1)

	want := map[string][]string{
		"sync": {"requires_confirmation→executing", "executing→completed"},
		"pay":  {"requires_confirmation→approved", "approved→executing", "executing→completed"},
	}
	for name, w := range want {
		if got := st.of(ids[name]); !slices.Equal(got, w) {
			t.Errorf("%s: transitions %q, want %q", name, got, w)
		}
	}
	// The one commit of sync holds its resolution and then its start.
	rec.mu.Lock()
	var types []string
	var seqs []int64
	for _, ev := range rec.events {
		var d struct {
			ID string `json:"tool_call_id"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.ID == ids["sync"] && (ev.Type == agentd.EventConfirmationResolved || ev.Type == agentd.EventToolCallStarted) {
			types, seqs = append(types, ev.Type), append(seqs, ev.Seq)
		}
	}
	rec.mu.Unlock()
	if !slices.Equal(types, []string{agentd.EventConfirmationResolved, agentd.EventToolCallStarted}) || seqs[1] != seqs[0]+1 {
		t.Errorf("sync's events %q at %v, want confirmation_resolved then tool_call_started, consecutive", types, seqs)
	}
	b, err := os.ReadFile(log)
	mustOK(t, err)
	got := strings.Fields(string(b))
	slices.Sort(got)
	if !slices.Equal(got, []string{"pay", "sync"}) {
		t.Errorf("executions %q, want sync and pay once each", got)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
