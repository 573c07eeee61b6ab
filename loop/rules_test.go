package loop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
)

// These tests pin rules that a changed condition in the loop would break
// (each was seen to survive the rest of the suite): each fails if its rule
// is flipped, off by one, or removed.

// goTool is an in-process tool, a tool source of its own: auto unless
// exposure says otherwise.
type goTool struct {
	name, exposure string
	idempotent     bool
	hidden         bool // llm_callable false
	mu             sync.Mutex
	runs           int
	delegated      []bool // each run's call's Delegated
}

func (g *goTool) ID() string { return "go" }
func (g *goTool) Tools() []toolset.Tool {
	return []toolset.Tool{{
		Spec:        agentd.ToolSpec{Name: g.name, Description: g.name, Parameters: json.RawMessage(`{"type":"object"}`)},
		Confirm:     &confirm.Tool{Name: g.name, ServerID: "go", Exposure: g.exposure},
		LLMCallable: !g.hidden, Idempotent: g.idempotent,
	}}
}
func (g *goTool) Execute(ctx context.Context, c agentd.ToolCall) (json.RawMessage, error) {
	g.mu.Lock()
	g.runs++
	g.delegated = append(g.delegated, c.Delegated)
	g.mu.Unlock()
	return json.RawMessage(`{"ok":true}`), nil
}
func (g *goTool) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs
}

// alwaysCall is a model that calls one tool at every step.
type alwaysCall struct {
	name  string
	mu    sync.Mutex
	steps int
}

func (m *alwaysCall) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(string)) (*agentd.ModelResponse, error) {
	m.mu.Lock()
	m.steps++
	m.mu.Unlock()
	return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: m.name, Arguments: json.RawMessage(`{}`)}}}, nil
}

type rulesFixture struct {
	store  *sqlite.DB
	rec    *recorder
	clock  *fakeClock
	engine *loop.Engine
	p      agentd.Principal
}

// newRules starts an engine over a real SQLite file at path ("" = a new
// one), with the tools of sources as the tool registry gives them.
func newRules(t *testing.T, path string, model agentd.Model, sources []toolset.Source, maxTurns int) *rulesFixture {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "agentd.db")
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &rulesFixture{store: st, rec: newRecorder(), clock: &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
		p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	f.engine = loop.New(st, f.rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, sources...), ApprovalTimeout: 10 * time.Minute, MaxTurns: maxTurns},
		loop.Options{Clock: f.clock, ExpireEvery: -1})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.engine.Close(); st.Close() })
	return f
}

// send starts a run on a new conversation and returns its ids.
func (f *rulesFixture) send(t *testing.T, text string) (convID, runID string) {
	t.Helper()
	conv, err := f.engine.CreateConversation(context.Background(), f.p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.engine.Send(context.Background(), f.p, conv.ID, text)
	if err != nil {
		t.Fatal(err)
	}
	return conv.ID, run.ID
}

// parked waits for the n-th confirmation_required and returns its call.
func (f *rulesFixture) parked(t *testing.T, n int) agentd.ToolCall {
	t.Helper()
	ev := f.rec.wait(t, agentd.EventConfirmationRequired, n)
	var d struct {
		ID string `json:"tool_call_id"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	c, err := f.engine.ToolCall(context.Background(), f.p, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return *c
}

func TestMaxTurnsIsExact(t *testing.T) {
	for _, turns := range []int{1, 3} {
		model := &alwaysCall{name: "record"}
		tool := &goTool{name: "record"}
		f := newRules(t, "", model, []toolset.Source{tool}, turns)
		_, runID := f.send(t, "go")
		ev := f.rec.wait(t, agentd.EventRunFinished, 1)
		if !strings.Contains(string(ev.Data), `"reason":"max_turns"`) {
			t.Fatalf("max_turns %d: run_finished %s", turns, ev.Data)
		}
		run, err := f.engine.Run(context.Background(), f.p, runID)
		if err != nil {
			t.Fatal(err)
		}
		if model.steps != turns || tool.count() != turns || run.Step != turns {
			t.Fatalf("max_turns %d: %d model steps, %d tool runs, run step %d", turns, model.steps, tool.count(), run.Step)
		}
	}
}

// A tool with llm_callable false is not offered to the model, and the
// model's call to it is refused as unknown; it never runs. A visible tool
// runs through its own source, with its server_id.
func TestHiddenToolIsRefusedAsUnknown(t *testing.T) {
	hidden := &goTool{name: "wipe", hidden: true}
	shown := &goTool{name: "record"}
	model := &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{
		{Name: "wipe", Arguments: json.RawMessage(`{}`)}, {Name: "record", Arguments: json.RawMessage(`{}`)}}}}}
	f := newRules(t, "", model, []toolset.Source{hidden, shown}, 5)
	if specs := f.engine.ToolSpecs(""); len(specs) != 1 || specs[0].Name != "record" {
		t.Fatalf("the model sees %v", specs)
	}
	if tier, server := f.engine.ToolTier("wipe"); tier != agentd.TierNever || server != "" {
		t.Errorf("hidden tool tier %s %q", tier, server)
	}
	f.send(t, "go")
	ev := f.rec.wait(t, agentd.EventToolCallRefused, 1)
	if !strings.Contains(string(ev.Data), `"tool_name":"wipe"`) || !strings.Contains(string(ev.Data), `"tier":"never"`) ||
		!strings.Contains(string(ev.Data), `is not available to this agent`) {
		t.Errorf("refusal %s", ev.Data)
	}
	res := f.rec.wait(t, agentd.EventToolCallResult, 1)
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if !strings.Contains(string(res.Data), `"tool_name":"record"`) || !strings.Contains(string(res.Data), `"status":"completed"`) {
		t.Errorf("result %s", res.Data)
	}
	if hidden.count() != 0 || shown.count() != 1 {
		t.Fatalf("runs: hidden %d, shown %d", hidden.count(), shown.count())
	}
}

func TestDecisionExactlyAtDeadlineIsExpired(t *testing.T) {
	tool := &goTool{name: "pay", exposure: "requires-confirmation"}
	f := newRules(t, "", &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{}`)}}}}},
		[]toolset.Source{tool}, 5)
	f.send(t, "pay")
	c := f.parked(t, 1)
	f.clock.Advance(c.RequiresApprovalAt.Sub(f.clock.Now()))
	_, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "approve"})
	if agentd.ErrorCode(err) != agentd.EEXPIRED {
		t.Fatalf("approve exactly at the deadline: %v, want expired", err)
	}
	if tool.count() != 0 {
		t.Fatal("the expired call ran")
	}
}

func TestCancelFinishedRunConflicts(t *testing.T) {
	f := newRules(t, "", &stepModel{}, nil, 5)
	_, runID := f.send(t, "hi")
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if _, err := f.engine.Cancel(context.Background(), f.p, runID); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Fatalf("cancel a completed run: %v, want conflict", err)
	}
}

func TestReasonLengthLimit(t *testing.T) {
	tool := &goTool{name: "pay", exposure: "requires-confirmation"}
	call := agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{}`)}}}
	f := newRules(t, "", &stepModel{replies: []agentd.ModelResponse{call}}, []toolset.Source{tool}, 5)
	f.send(t, "pay")
	c := f.parked(t, 1)
	if _, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "deny", Reason: strings.Repeat("r", 4097)}); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("a 4097-byte reason: %v, want invalid", err)
	}
	d, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "deny", Reason: strings.Repeat("r", 4096)})
	if err != nil || len(d.Reason) != 4096 {
		t.Fatalf("a 4096-byte reason: %v", err)
	}
}

// TestIdempotentCallRunsAgainAfterCrash: a call left executing by a crash
// runs again at start when its tool is idempotent, and fails with "outcome
// unknown" when it is not.
func TestIdempotentCallRunsAgainAfterCrash(t *testing.T) {
	for _, idem := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "agentd.db")
		st, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t1", ProjectID: "p1", Agent: "a", CreatedBy: "k1", CreatedAt: now}
		run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t1", ProjectID: "p1", CorrelationID: "c1",
			Status: agentd.RunRunning, Step: 1, CreatedAt: now, UpdatedAt: now}
		msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "go", CreatedAt: now}
		call := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t1", ProjectID: "p1", ConversationID: conv.ID, RunID: run.ID,
			CorrelationID: "c1", MessageID: msg.ID, Step: 1, Name: "sync", ServerID: "go", Arguments: json.RawMessage(`{}`),
			Tier: agentd.TierAuto, Status: agentd.StatusExecuting, Method: "TOOL", Endpoint: "sync", CreatedAt: now, UpdatedAt: now}
		must := func(err error, what string) {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		must(st.CreateConversation(ctx, conv), "conversation")
		_, err = st.StartRun(ctx, run, msg, nil)
		must(err, "run")
		_, err = st.CreateToolCalls(ctx, []*agentd.ToolCall{call}, nil)
		must(err, "call")
		must(st.Close(), "close")

		tool := &goTool{name: "sync", idempotent: idem}
		f := newRules(t, path, &stepModel{}, []toolset.Source{tool}, 5)
		ev := f.rec.wait(t, agentd.EventToolCallResult, 1)
		got, err := f.engine.ToolCall(ctx, f.p, call.ID)
		must(err, "tool call")
		switch {
		case idem && (tool.count() != 1 || got.Status != agentd.StatusCompleted):
			t.Fatalf("idempotent: ran %d times, status %s (%s)", tool.count(), got.Status, ev.Data)
		case !idem && (tool.count() != 0 || got.Status != agentd.StatusFailed || !strings.Contains(got.Error, "outcome is unknown")):
			t.Fatalf("not idempotent: ran %d times, status %s, error %q", tool.count(), got.Status, got.Error)
		}
	}
}

// newBillingTools loads a connection "billing" against a loopback server
// whose POST /refunds parks (allow_edit, its own 2 minute deadline, amounts
// above 100 escalate to review) and returns its tool sources.
func newBillingTools(t *testing.T) ([]toolset.Source, *int) {
	t.Helper()
	var mu sync.Mutex
	hits := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cdir := filepath.Join(dir, "connections", "billing")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"connection.json": `{"base_url": "` + srv.URL + `/api", "auth": {"type": "bearer", "token_env": "RULES_TOKEN"}}`,
		"policy.json": `{"endpoints": {
			"POST /refunds": {"confirm": true, "allow_edit": true, "approval_timeout": "2m",
				"thresholds": [{"field": "body.amount", "above": 100, "escalate": "review"}]},
			"POST /refunds/{id}/void": {"confirm": true}
		}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(cdir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conns, err := connections.Load(dir, func(k string) string {
		if k == "RULES_TOKEN" {
			return "tok-rules-123456"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return connections.Sources(conns), hits
}

func refundCall(amount string) agentd.ModelResponse {
	return agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "request", Arguments: json.RawMessage(
		`{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"amount":` + amount + `},"intent":"write"}`)}}}
}

func TestEndpointApprovalTimeout(t *testing.T) {
	tools, _ := newBillingTools(t)
	f := newRules(t, "", &stepModel{replies: []agentd.ModelResponse{refundCall("5")}}, tools, 5)
	start := f.clock.Now()
	f.send(t, "refund")
	c := f.parked(t, 1)
	if want := start.Add(2 * time.Minute); c.RequiresApprovalAt == nil || !c.RequiresApprovalAt.Equal(want) {
		t.Fatalf("deadline %v, want the endpoint's 2m: %v", c.RequiresApprovalAt, want)
	}
}

func TestEditMayNotRetargetOrEscalateTwice(t *testing.T) {
	tools, hits := newBillingTools(t)
	f := newRules(t, "", &stepModel{replies: []agentd.ModelResponse{refundCall("5")}}, tools, 5)
	f.send(t, "refund")
	c := f.parked(t, 1)
	ctx := context.Background()
	retarget := json.RawMessage(`{"connection":"billing","method":"POST","endpoint":"/refunds/R-1/void","data":{"amount":5},"intent":"write"}`)
	if _, err := f.engine.Decide(ctx, f.p, c.ID, agentd.DecisionRequest{Decision: "edit", Arguments: retarget}); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("an edit to another path template: %v, want invalid", err)
	}
	if got, _ := f.engine.ToolCall(ctx, f.p, c.ID); got.Status != agentd.StatusRequiresConfirmation {
		t.Fatalf("after a refused retarget the call is %s", got.Status)
	}
	escalate := json.RawMessage(`{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"amount":500},"intent":"write"}`)
	for i := range 2 {
		if _, err := f.engine.Decide(ctx, f.p, c.ID, agentd.DecisionRequest{Decision: "edit", Arguments: escalate}); agentd.ErrorCode(err) != agentd.EFORBIDDEN {
			t.Fatalf("escalating edit #%d: %v, want forbidden", i+1, err)
		}
	}
	if got, _ := f.engine.ToolCall(ctx, f.p, c.ID); got.Status != agentd.StatusRefused || *hits != 0 {
		t.Fatalf("after an escalating edit: status %s, %d downstream requests", got.Status, *hits)
	}
}

// TestToolRunsDelegatedInDelegatedConversation: the engine runs a call of
// a delegated conversation (one a delegate key created) as delegated, so
// its context endpoint classifies what it asks as delegated; a client's
// conversation's call runs as not delegated.
func TestToolRunsDelegatedInDelegatedConversation(t *testing.T) {
	tool := &goTool{name: "record"}
	f := newRules(t, "", &argsModel{name: "record"}, []toolset.Source{tool}, 5)
	for i, role := range []string{agentd.RoleDelegate, agentd.RoleClient} {
		f.p.Role = role
		f.send(t, `{}`)
		f.rec.wait(t, agentd.EventRunFinished, i+1)
	}
	tool.mu.Lock()
	defer tool.mu.Unlock()
	if len(tool.delegated) != 2 || !tool.delegated[0] || tool.delegated[1] {
		t.Fatalf("the calls ran delegated %v, want [true false] (a delegate's conversation, then a client's)", tool.delegated)
	}
}
