package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/tools"
)

// failOnceStore is the SQLite store failing the first update of each
// transition in fail ("approved→executing") with a store error: before
// writing (lost: the database rolled it back), or after (committed: the
// connection was lost at COMMIT, which did commit).
type failOnceStore struct {
	*sqlite.DB
	committed bool
	mu        sync.Mutex
	fail      map[string]bool
}

// take reports whether the write named key is to fail, once.
func (s *failOnceStore) take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	fail := s.fail[key]
	delete(s.fail, key)
	return fail
}

func (s *failOnceStore) UpdateToolCall(ctx context.Context, u agentd.CallUpdate, drafts []agentd.EventDraft) (*agentd.ToolCall, []agentd.Event, error) {
	key := string(u.From[0]) + "→" + string(u.Status)
	if !s.take(key) {
		return s.DB.UpdateToolCall(ctx, u, drafts)
	}
	if s.committed {
		if _, _, err := s.DB.UpdateToolCall(ctx, u, drafts); err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, errors.New("store: connection lost at " + key)
}

// RecordStep fails the first write of a step that ends its run with End
// in fail ("step→completed"), rolled back.
func (s *failOnceStore) RecordStep(ctx context.Context, r agentd.StepRecord, drafts []agentd.EventDraft) ([]agentd.Event, error) {
	if key := "step→" + string(r.End); r.End != "" && s.take(key) {
		return nil, errors.New("store: connection lost at " + key)
	}
	return s.DB.RecordStep(ctx, r, drafts)
}

// A store error when an approved call is claimed, or when its result is
// recorded, does not strand the call (approved or executing, its driver
// waiting for it and holding its run): the write is tried again, and the
// tool runs once, its result is stored and the run finishes — whether the
// failed try was rolled back or did commit. Nor does one when the run's end
// is recorded with the last step (rolled back: a committed end is
// published by the feed on PostgreSQL, not by the loop).
func TestToolWritesRetriedAfterStoreErrors(t *testing.T) {
	for _, committed := range []bool{false, true} {
		name := map[bool]string{false: "rolled back", true: "committed"}[committed]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "exec.log")
			td := filepath.Join(dir, "tools", "pay")
			mustOK(t, os.MkdirAll(td, 0o755))
			mustOK(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null; echo pay >> \"$LOOP_TEST_LOG\"; printf '{\"ok\":true}'\n"), 0o755))
			mustOK(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"pay","description":"pay","exposure":{"kind":"requires-confirmation"},"command":["/bin/sh","./run.sh"],"env":["LOOP_TEST_LOG"]}`), 0o644))
			t.Setenv("LOOP_TEST_LOG", log)
			ts, _, err := tools.LoadDir(filepath.Join(dir, "tools"))
			mustOK(t, err)
			db, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
			mustOK(t, err)
			fail := map[string]bool{"approved→executing": true, "executing→completed": true}
			if !committed {
				fail["step→completed"] = true // the last step, which ends the run
			}
			st := &failOnceStore{DB: db, committed: committed, fail: fail}
			rec := newRecorder()
			model := &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{"amount":3}`)}}}}}
			e := loop.New(st, rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, tools.NewSource(ts)), ApprovalTimeout: 10 * time.Minute, MaxTurns: 5},
				loop.Options{ExpireEvery: -1})
			mustOK(t, e.Start(context.Background()))
			t.Cleanup(func() { e.Close(); db.Close() })

			p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
			conv, err := e.CreateConversation(context.Background(), p, "", nil)
			mustOK(t, err)
			_, err = e.Send(context.Background(), p, conv.ID, "pay")
			mustOK(t, err)
			var d struct {
				ID string `json:"tool_call_id"`
			}
			mustOK(t, json.Unmarshal(rec.wait(t, agentd.EventConfirmationRequired, 1).Data, &d))
			_, err = e.Decide(context.Background(), p, d.ID, agentd.DecisionRequest{Decision: "approve"})
			mustOK(t, err)
			rec.wait(t, agentd.EventRunFinished, 1)

			st.mu.Lock()
			left := len(st.fail)
			st.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d injected failures not met", left)
			}
			c, err := db.ToolCall(context.Background(), d.ID)
			mustOK(t, err)
			if c.Status != agentd.StatusCompleted {
				t.Errorf("call %s, want completed", c.Status)
			}
			ran, err := os.ReadFile(log)
			mustOK(t, err)
			if n := strings.Count(string(ran), "pay"); n != 1 {
				t.Errorf("the tool ran %d times, want once", n)
			}
			evs, err := db.Events(context.Background(), conv.ID, 0, 0)
			mustOK(t, err)
			count := map[string]int{}
			for _, ev := range evs {
				count[ev.Type]++
			}
			if count[agentd.EventToolCallStarted] != 1 || count[agentd.EventToolCallResult] != 1 {
				t.Errorf("log holds %d tool_call_started and %d tool_call_result, want one each", count[agentd.EventToolCallStarted], count[agentd.EventToolCallResult])
			}
		})
	}
}
