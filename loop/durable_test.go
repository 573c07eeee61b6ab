package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/agentd-dev/agentd/tools/callcontext"
	"github.com/rs/zerolog"
)

// durableEnv, set to 1 in a command's environment, makes this test binary
// the durable tool's command (ctxcallMain) instead of the tests.
const durableEnv = "LOOP_TEST_DURABLE_TOOL"

func init() {
	if os.Getenv(durableEnv) == "1" {
		os.Exit(ctxcallMain())
	}
}

// ctxcallMain is the durable tool's command: it makes two child requests
// through its context endpoint, {"n":"a"} then {"n":"b"}, and prints their
// answers as a JSON array.
func ctxcallMain() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	var answers []json.RawMessage
	for _, body := range []string{`{"n":"a"}`, `{"n":"b"}`} {
		req, err := http.NewRequest("POST", os.Getenv(callcontext.EnvURL)+"/request", strings.NewReader(body))
		if err != nil {
			return fail(err)
		}
		req.Header.Set("Authorization", "Bearer "+os.Getenv(callcontext.EnvToken))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fail(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fail(fmt.Errorf("child request: %d %s %v", resp.StatusCode, b, err))
		}
		answers = append(answers, bytes.TrimSpace(b))
	}
	out, _ := json.Marshal(answers)
	os.Stdout.Write(out)
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// sent is the connections' side of the durable tool's requests: it counts
// what is sent and answers each request with its number.
type sent struct {
	mu   sync.Mutex
	args []string
}

func (s *sent) Inline(_ context.Context, args json.RawMessage, _ agentd.Principal, _ callcontext.RequestOptions) (any, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.args = append(s.args, string(args))
	return map[string]any{"sent": len(s.args), "args": json.RawMessage(args)}, false, nil
}

func (s *sent) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.args...)
}

// contextServer serves a context endpoint's request route on loopback, as
// package api does, and points the endpoint at it.
func contextServer(t *testing.T, ep *callcontext.Endpoint) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		out, err := ep.Request(r.Context(), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	ep.SetURL(srv.URL + "/v1/context")
}

// durableTool writes tools/sync/, a durable tool whose command is this
// test binary (ctxcallMain).
func durableTool(t *testing.T) map[string]*tools.Tool {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tools")
	def, _ := json.Marshal(map[string]any{"name": "sync", "description": "sync", "execution": "durable",
		"command": []string{self, "-test.run=^$"}, "env": []string{durableEnv}})
	if err := os.MkdirAll(filepath.Join(dir, "sync"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sync", "tool.json"), def, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(durableEnv, "1")
	ts, _, err := tools.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// seedExecuting writes into st a run whose one call, of tool, was
// executing when the process stopped.
func seedExecuting(t *testing.T, st *sqlite.DB, tool string) agentd.ToolCall {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t1", ProjectID: "p1", Agent: "a", CreatedAt: now}
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t1", ProjectID: "p1",
		CorrelationID: "corr", Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "go", CreatedAt: now}
	am := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleAssistant, CreatedAt: now}
	call := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t1", ProjectID: "p1", ConversationID: conv.ID,
		RunID: run.ID, MessageID: am.ID, Step: 1, Name: tool, ServerID: tools.ServerID, Arguments: json.RawMessage(`{}`),
		Tier: agentd.TierAuto, Status: agentd.StatusApproved, Method: "TOOL", Endpoint: tool, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, run, msg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Message: am, Calls: []*agentd.ToolCall{call}, Now: now}, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := st.UpdateToolCall(ctx, agentd.CallUpdate{ID: call.ID, From: []agentd.CallStatus{agentd.StatusApproved},
		Status: agentd.StatusExecuting, Now: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return *got
}

// SPEC §10, docs/runtime.md#durable-tools: a durable call that was
// executing when the process crashed is run again by the restarted engine
// (not failed "outcome unknown") with its journal: the child request it
// made before the crash is answered from the journal and not sent again,
// the next one is sent, and the run goes on with the call's result.
func TestDurableCallResumesFromItsJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	call := seedExecuting(t, st, "sync")
	down := &sent{}

	// Before the crash the call's command made its first child request,
	// which was sent and journaled.
	before := callcontext.New(zerolog.Nop())
	before.SetURL("http://127.0.0.1:0/v1/context")
	before.Wire(nil, down)
	before.WireJournal(st)
	env, closeCtx := before.Open(call, false, nil, true)
	token := strings.TrimPrefix(env[1], callcontext.EnvToken+"=")
	if _, err := before.Request(ctx, token, json.RawMessage(`{"n":"a"}`)); err != nil {
		t.Fatal(err)
	}
	closeCtx()

	// The restarted engine, on the same store.
	ep := callcontext.New(zerolog.Nop())
	ep.Wire(nil, down)
	ep.WireJournal(st)
	contextServer(t, ep)
	rec, model := newRecorder(), &stepModel{replies: []agentd.ModelResponse{{Text: "synced"}}}
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, tools.NewSource(durableTool(t), tools.WithContext(ep))), MaxTurns: 5},
		loop.Options{ExpireEvery: -1})
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rec.wait(t, agentd.EventRunFinished, 1)

	if got := down.all(); len(got) != 2 || got[0] != `{"n":"a"}` || got[1] != `{"n":"b"}` {
		t.Fatalf("requests sent: %q, want a (before the crash) then b, each once", got)
	}
	got, err := st.ToolCall(ctx, call.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"args":{"n":"a"},"sent":1},{"args":{"n":"b"},"sent":2}]`
	if got.Status != agentd.StatusCompleted || string(got.Result) != want {
		t.Fatalf("call %s: %s %s, want completed with %s", got.ID, got.Status, got.Result, want)
	}
	last := model.request(0).Messages
	if m := last[len(last)-1]; m.ToolCallID != call.ID || m.ToolStatus != agentd.StatusCompleted {
		t.Fatalf("the model did not read the resumed call's result: %+v", m)
	}
}
