package loop_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
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
	"github.com/agentd-dev/agentd/tools/registry"
	"github.com/agentd-dev/agentd/toolset"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is the injected clock: deadline tests advance it, never sleep.
// Its AfterFunc (loop.Options.AfterFunc) arms timers that fire when Advance
// reaches them.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // signalled when timers change
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (a restarted engine's clock to where another
// engine's stands) and fires the timers that are due.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	due := c.dueLocked()
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// Advance moves the clock on by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	due := c.dueLocked()
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// fakeTimer is a timer of a fakeClock.
type fakeTimer struct {
	c  *fakeClock
	at time.Time
	f  func()
}

// AfterFunc arms a timer that calls f once the clock reaches now+d (at
// once when d <= 0).
func (c *fakeClock) AfterFunc(d time.Duration, f func()) loop.Timer {
	c.mu.Lock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	due := c.dueLocked()
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
	return t
}

func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.signalLocked()
			return true
		}
	}
	return false
}

// dueLocked removes and returns the timers due at c.now.
func (c *fakeClock) dueLocked() []*fakeTimer {
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
		} else {
			due = append(due, t)
		}
	}
	c.timers = keep
	c.signalLocked()
	return due
}

func (c *fakeClock) signalLocked() {
	if c.changed == nil {
		c.changed = make(chan struct{}, 1)
	}
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// waitArmed waits until the armed timers are due exactly at want (none
// when want is empty).
func (c *fakeClock) waitArmed(t *testing.T, want ...time.Time) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		if c.changed == nil {
			c.changed = make(chan struct{}, 1)
		}
		ok := len(c.timers) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = c.timers[i].at.Equal(want[i])
		}
		var got []time.Time
		for _, x := range c.timers {
			got = append(got, x.at)
		}
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("armed timers %v, want %v", got, want)
		}
	}
}

// recorder is a Publisher that keeps every event and lets tests wait for one.
type recorder struct {
	mu     sync.Mutex
	events []agentd.Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) Publish(e agentd.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// wait returns the n-th (1-based) event of typ, waiting for it.
func (r *recorder) wait(t *testing.T, typ string, n int) agentd.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		seen := 0
		for _, e := range r.events {
			if e.Type == typ {
				seen++
				if seen == n {
					r.mu.Unlock()
					return e
				}
			}
		}
		r.mu.Unlock()
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no %s #%d", typ, n)
		}
	}
}

// all returns the events of typ published so far, in order.
func (r *recorder) all(typ string) []agentd.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []agentd.Event
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) count(typ string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// stepModel answers from a list of replies, one per step, and keeps every request.
type stepModel struct {
	mu       sync.Mutex
	replies  []agentd.ModelResponse
	requests []agentd.ModelRequest
}

func (m *stepModel) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(string)) (*agentd.ModelResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, req)
	r := agentd.ModelResponse{Text: "done"}
	if i := len(m.requests) - 1; i < len(m.replies) {
		r = m.replies[i]
	}
	if r.Text != "" {
		onDelta(r.Text)
	}
	return &r, nil
}

func (m *stepModel) request(i int) agentd.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[i]
}

func writeTools(t *testing.T) (map[string]*tools.Tool, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "exec.log")
	for name, def := range map[string]string{
		"pay":    `{"name":"pay","description":"pay","exposure":{"kind":"requires-confirmation"},"command":["/bin/sh","./run.sh"],"env":["LOOP_TEST_LOG"]}`,
		"record": `{"name":"record","description":"record","command":["/bin/sh","./run.sh"],"env":["LOOP_TEST_LOG"]}`,
	} {
		td := filepath.Join(dir, "tools", name)
		if err := os.MkdirAll(td, 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\ncat >/dev/null; echo " + name + " >> \"$LOOP_TEST_LOG\"; printf '{\"ok\":true}'\n"
		if err := os.WriteFile(filepath.Join(td, "run.sh"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(td, "tool.json"), []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("LOOP_TEST_LOG", log)
	ts, _, err := tools.LoadDir(filepath.Join(dir, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	return ts, log
}

// registered is the tools of sources as cmd/agentd hands them to the loop:
// through the tool registry, every llm_callable tool.
func registered(t *testing.T, sources ...toolset.Source) toolset.Set {
	t.Helper()
	reg, err := registry.New(sources...)
	if err != nil {
		t.Fatal(err)
	}
	set, err := reg.Toolset(nil)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

type fixture struct {
	store  *sqlite.DB
	rec    *recorder
	model  *stepModel
	clock  *fakeClock
	engine *loop.Engine
	log    string
	p      agentd.Principal
}

func newFixture(t *testing.T, path string, replies ...agentd.ModelResponse) *fixture {
	t.Helper()
	ts, log := writeTools(t)
	if path == "" {
		path = filepath.Join(t.TempDir(), "agentd.db")
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: st, rec: newRecorder(), model: &stepModel{replies: replies},
		clock: &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}, log: log,
		p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	f.engine = loop.New(st, f.rec, &loop.Agent{Name: "a", Model: f.model, Tools: registered(t, tools.NewSource(ts)), ApprovalTimeout: 10 * time.Minute, MaxTurns: 5},
		loop.Options{Clock: f.clock, ExpireEvery: -1})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.engine.Close(); st.Close() })
	return f
}

func payCall() agentd.ModelResponse {
	return agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{"amount":3}`)}}}
}

func (f *fixture) park(t *testing.T) agentd.ToolCall {
	t.Helper()
	conv, err := f.engine.CreateConversation(context.Background(), f.p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Send(context.Background(), f.p, conv.ID, "pay it"); err != nil {
		t.Fatal(err)
	}
	ev := f.rec.wait(t, agentd.EventConfirmationRequired, 1)
	var d struct {
		ID string `json:"tool_call_id"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	c, err := f.engine.ToolCall(context.Background(), f.p, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return *c
}

func TestExpiryWithInjectedClock(t *testing.T) {
	f := newFixture(t, "", payCall())
	c := f.park(t)
	want := f.clock.Now().Add(10 * time.Minute)
	if c.RequiresApprovalAt == nil || !c.RequiresApprovalAt.Equal(want) {
		t.Fatalf("deadline %v, want %v", c.RequiresApprovalAt, want)
	}
	f.clock.Advance(10*time.Minute - time.Nanosecond)
	if n, err := f.engine.ExpireDue(context.Background()); err != nil || n != 0 {
		t.Fatalf("expired %d before the deadline (%v)", n, err)
	}
	f.clock.Advance(time.Nanosecond)
	if n, err := f.engine.ExpireDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("expired %d at the deadline (%v)", n, err)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	req := f.model.request(1)
	last := req.Messages[len(req.Messages)-1]
	if last.Role != agentd.ModelRoleTool || last.ToolStatus != agentd.StatusExpired || last.ToolCallID != c.ID {
		t.Fatalf("model's last message: %+v", last)
	}
	if !strings.Contains(last.Content, "expired") || strings.Contains(strings.ToLower(last.Content+last.ToolReason), "denied") {
		t.Fatalf("model reads %q / %q: must say expired, never denied", last.Content, last.ToolReason)
	}
	_, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "approve"})
	if agentd.ErrorCode(err) != agentd.EEXPIRED {
		t.Fatalf("approve after expiry: %v", err)
	}
	if b, _ := os.ReadFile(f.log); len(b) != 0 {
		t.Fatalf("expired call ran: %s", b)
	}
}

// A decision that arrives after the deadline, before any sweep, is refused
// as expired and expires the call.
func TestDecisionAfterDeadlineWithoutSweep(t *testing.T) {
	f := newFixture(t, "", payCall())
	c := f.park(t)
	f.clock.Advance(11 * time.Minute)
	_, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "approve"})
	if agentd.ErrorCode(err) != agentd.EEXPIRED {
		t.Fatalf("approve after the deadline: %v", err)
	}
	got, _ := f.engine.ToolCall(context.Background(), f.p, c.ID)
	if got.Status != agentd.StatusExpired || len(got.Decisions) != 1 || got.Decisions[0].Decision != agentd.DecisionExpired {
		t.Fatalf("call %+v", got)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if f.rec.count(agentd.EventConfirmationResolved) != 1 {
		t.Fatal("expected one confirmation_resolved")
	}
}

// SPEC §8: a call approved but not started when the process stopped runs
// when the engine starts again, exactly once, and the run continues.
func TestRecoveryRunsApprovedCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t1", ProjectID: "p1", Agent: "a", CreatedAt: now}
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t1", ProjectID: "p1",
		CorrelationID: "corr", Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "go", CreatedAt: now}
	am := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleAssistant, CreatedAt: now}
	call := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t1", ProjectID: "p1", ConversationID: conv.ID,
		RunID: run.ID, MessageID: am.ID, Step: 1, Name: "record", ServerID: "tools", Arguments: json.RawMessage(`{}`),
		Tier: agentd.TierAuto, Status: agentd.StatusApproved, Method: "TOOL", Endpoint: "record", CreatedAt: now, UpdatedAt: now}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateConversation(ctx, conv))
	_, err = st.StartRun(ctx, run, msg, nil)
	must(err)
	_, err = st.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Message: am, Calls: []*agentd.ToolCall{call}, Now: now}, nil)
	must(err)
	must(st.Close())

	f := newFixture(t, path, agentd.ModelResponse{Text: "after recovery"})
	f.rec.wait(t, agentd.EventRunFinished, 1)
	b, _ := os.ReadFile(f.log)
	if string(b) != "record\n" {
		t.Fatalf("executions %q, want exactly one record", b)
	}
	got, err := f.store.ToolCall(ctx, call.ID)
	must(err)
	if got.Status != agentd.StatusCompleted {
		t.Fatalf("status %s", got.Status)
	}
	req := f.model.request(0)
	last := req.Messages[len(req.Messages)-1]
	if last.ToolCallID != call.ID || last.ToolStatus != agentd.StatusCompleted {
		t.Fatalf("model did not get the recovered result: %+v", last)
	}
}

// History maps every call of an assistant step to exactly one tool result,
// in order, with denied reasons readable by the model.
func TestHistoryHasOneResultPerCall(t *testing.T) {
	f := newFixture(t, "", agentd.ModelResponse{Text: "both", ToolCalls: []agentd.ModelToolCall{
		{Name: "record", Arguments: json.RawMessage(`{}`)},
		{Name: "pay", Arguments: json.RawMessage(`{"amount":1}`)},
		{Name: "missing", Arguments: json.RawMessage(`{}`)},
	}})
	c := f.park(t)
	if _, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "deny", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	msgs := f.model.request(1).Messages
	// user, assistant(3 calls), tool×3
	if len(msgs) != 5 || msgs[1].Role != agentd.ModelRoleAssistant || len(msgs[1].ToolCalls) != 3 {
		t.Fatalf("history %+v", msgs)
	}
	wantStatus := []agentd.CallStatus{agentd.StatusCompleted, agentd.StatusDenied, agentd.StatusRefused}
	for i, m := range msgs[2:] {
		if m.Role != agentd.ModelRoleTool || m.ToolCallID != msgs[1].ToolCalls[i].ID || m.ToolStatus != wantStatus[i] {
			t.Fatalf("tool message %d: %+v", i, m)
		}
	}
	if !strings.Contains(msgs[3].Content, "not today") || msgs[3].ToolReason != "not today" {
		t.Fatalf("denial reason not given to the model: %+v", msgs[3])
	}
}

// The loop and the decision stay free of HTTP and database drivers, and the
// loop of tool sources.
func TestImportRules(t *testing.T) {
	checkStoreRules(t)
	forbidden := []string{"net/http", "github.com/labstack/echo", "database/sql", "modernc.org/sqlite", "github.com/jackc/pgx"}
	for _, pkg := range []string{"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/confirm", "github.com/agentd-dev/agentd"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") && f != "database/sql" {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
	// The loop runs tools through toolset.Set: it imports no tool
	// source and starts no subprocess; the registry knows no source either.
	for pkg, forbidden := range map[string][]string{
		// The web chat speaks the HTTP API like any client.
		"github.com/agentd-dev/agentd/web": {"github.com/agentd-dev/agentd", "github.com/agentd-dev/agentd/api", "github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/sqlite"},
		"github.com/agentd-dev/agentd/loop": {"github.com/agentd-dev/agentd/tools", "github.com/agentd-dev/agentd/connections", "github.com/agentd-dev/agentd/hooks", "github.com/agentd-dev/agentd/files",
			"github.com/agentd-dev/agentd/mcp", "github.com/modelcontextprotocol/go-sdk/mcp", "os/exec"},
		"github.com/agentd-dev/agentd/tools/registry": {"github.com/agentd-dev/agentd/tools", "github.com/agentd-dev/agentd/connections", "github.com/agentd-dev/agentd/mcp", "os/exec"},
		// Go tools are the embedding program's functions behind the
		// contract: no engine, no other source, no server, no process.
		"github.com/agentd-dev/agentd/tools/gofunc": {"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/tools",
			"github.com/agentd-dev/agentd/tools/registry", "github.com/agentd-dev/agentd/server", "github.com/agentd-dev/agentd/api",
			"github.com/agentd-dev/agentd/sqlite", "github.com/agentd-dev/agentd/postgres", "net/http", "os/exec", "database/sql"},
		// The context endpoint holds tokens and rules; the registry and the
		// connections are handed to it, and the API serves it.
		"github.com/agentd-dev/agentd/tools/callcontext": {"github.com/agentd-dev/agentd/tools", "github.com/agentd-dev/agentd/tools/registry",
			"github.com/agentd-dev/agentd/connections", "github.com/agentd-dev/agentd/mcp", "github.com/agentd-dev/agentd/api",
			"github.com/labstack/echo/v4", "net/http", "os/exec",
			// A durable tool's journal is the store's ChildJournal role, handed in.
			"github.com/agentd-dev/agentd/sqlite", "github.com/agentd-dev/agentd/postgres", "database/sql"},
		// Direct eval, the invoke trigger and scheduled runs go through the
		// registry handed in by server, which the API serves.
		"github.com/agentd-dev/agentd/tools/direct": {"github.com/agentd-dev/agentd/tools", "github.com/agentd-dev/agentd/tools/registry",
			"github.com/agentd-dev/agentd/connections", "github.com/agentd-dev/agentd/mcp", "github.com/agentd-dev/agentd/api",
			"github.com/agentd-dev/agentd/tools/callcontext", "github.com/labstack/echo/v4", "net/http", "os/exec"},
		// The scheduler claims ticks through its Store and runs them
		// through the function it is given: no engine, no tool, no store.
		"github.com/agentd-dev/agentd/schedule": {"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/tools",
			"github.com/agentd-dev/agentd/tools/direct", "github.com/agentd-dev/agentd/tools/registry", "github.com/agentd-dev/agentd/toolset",
			"github.com/agentd-dev/agentd/confirm", "github.com/agentd-dev/agentd/sqlite", "github.com/agentd-dev/agentd/postgres",
			"github.com/agentd-dev/agentd/api", "net/http", "os/exec", "database/sql"},
		// The metrics are collectors over the domain's types: no store, no
		// HTTP framework, no engine (the loop reports to them).
		"github.com/agentd-dev/agentd/metrics": {"github.com/agentd-dev/agentd/sqlite", "github.com/agentd-dev/agentd/api",
			"github.com/labstack/echo/v4", "github.com/agentd-dev/agentd/loop", "modernc.org/sqlite"},
		// Decision links sign tokens and decide through the Engine they
		// are handed: no engine, no store, no HTTP (the API serves them).
		"github.com/agentd-dev/agentd/links": {"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/sqlite",
			"github.com/agentd-dev/agentd/postgres", "github.com/agentd-dev/agentd/api", "github.com/labstack/echo/v4",
			"net/http", "database/sql"},
		// The store is written once (sqlstore) over a dialect; each backend
		// opens its database and runs its transactions, and knows neither
		// the other backend nor its driver.
		"github.com/agentd-dev/agentd/sqlstore": {"github.com/agentd-dev/agentd/sqlite", "github.com/agentd-dev/agentd/postgres",
			"modernc.org/sqlite", "github.com/jackc/pgx/v5"},
		"github.com/agentd-dev/agentd/sqlite":   {"github.com/agentd-dev/agentd/postgres", "github.com/jackc/pgx/v5"},
		"github.com/agentd-dev/agentd/postgres": {"github.com/agentd-dev/agentd/sqlite", "modernc.org/sqlite"},
		// Webhooks read the store and the feed through their interfaces;
		// the API reaches them through api.Webhooks.
		"github.com/agentd-dev/agentd/webhook": {"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/sqlite",
			"github.com/agentd-dev/agentd/api", "github.com/agentd-dev/agentd/feed", "github.com/labstack/echo/v4", "modernc.org/sqlite"},
		// The demo is a project the command line picks (cmd/agentd), not a
		// part of the assembled server.
		"github.com/agentd-dev/agentd/server": {"github.com/agentd-dev/agentd/demo", "github.com/agentd-dev/agentd/demo/billing"},
		// Hooks run as command tools run, through internal/process, not
		// through the command tools' package.
		"github.com/agentd-dev/agentd/hooks": {"github.com/agentd-dev/agentd/tools"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if slices.Contains(forbidden, dep) {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
	// Tool sources implement the contract in package toolset and never
	// import the engine, not even in their tests: connections, files,
	// hooks and every package under tools/ and mcp/. The contract itself
	// imports the domain and confirm and nothing else of agentd's.
	const mod = "github.com/agentd-dev/agentd"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	under := func(pkg, dir string) bool { return pkg == mod+"/"+dir || strings.HasPrefix(pkg, mod+"/"+dir+"/") }
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		source := under(pkg, "tools") || under(pkg, "mcp") || under(pkg, "connections") || under(pkg, "files") || under(pkg, "hooks")
		for _, dep := range imports {
			if source && under(dep, "loop") {
				t.Errorf("tool source %s imports %s: a source imports the contract (toolset), not the engine", pkg, dep)
			}
			// The trace API is small and vendor-neutral; the SDK and its
			// exporters are wired in package server only, and measured by
			// bench (a package of benchmarks: doc.go and tests).
			otelSDK := strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters")
			if otelSDK && pkg != mod+"/server" && pkg != mod+"/bench" {
				t.Errorf("%s imports %s: only package server wires the OpenTelemetry SDK", pkg, dep)
			}
			// The assembled server is for programs: cmd/agentd and the
			// examples of embedding it, never a package of the engine.
			if dep == mod+"/server" && pkg != mod+"/cmd/agentd" && !under(pkg, "examples") {
				t.Errorf("%s imports %s: only cmd/agentd and examples/ run the assembled server", pkg, dep)
			}
			if pkg == mod+"/toolset" && strings.HasPrefix(dep, mod+"/") && dep != mod+"/confirm" {
				t.Errorf("the tool contract imports %s: only the domain and confirm", dep)
			}
		}
	}
	// The API, and the chat protocols it serves, depend on the service
	// interface, not on the loop or a store; the protocol encoders know
	// no HTTP framework.
	for _, pkg := range []string{"github.com/agentd-dev/agentd/api", "github.com/agentd-dev/agentd/protocol/agui", "github.com/agentd-dev/agentd/protocol/aisdk"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range []string{"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/sqlite", "modernc.org/sqlite", "github.com/jackc/pgx"} {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
			if pkg != "github.com/agentd-dev/agentd/api" && strings.HasPrefix(dep, "github.com/labstack/echo") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
	apiTestsUseFakes(t)
}

// apiTestsUseFakes: the API's handler tests run against fakes of what the
// API uses, with no database file: they import neither the loop nor a
// store; and the API's code names the store reads it makes (api.StoreReads),
// never the whole agentd.Store.
func apiTestsUseFakes(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-test", "-deps", "-f", "{{.ImportPath}}", "github.com/agentd-dev/agentd/api").Output()
	if err != nil {
		t.Fatalf("go list -test api: %v", err)
	}
	for _, dep := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dep, _, _ = strings.Cut(dep, " ") // "pkg [pkg.test]"
		for _, f := range []string{"github.com/agentd-dev/agentd/loop", "github.com/agentd-dev/agentd/sqlite", "modernc.org/sqlite", "github.com/jackc/pgx"} {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("api's tests import %s", dep)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "api", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Store" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "agentd" {
					t.Errorf("%s names agentd.Store", fset.Position(sel.Pos()))
				}
			}
			return true
		})
	}
}

// Cancel is one transaction: after it, an approval of the parked call is a
// conflict and nothing runs; cancelling again returns the cancelled run.
func TestCancelThenApprove(t *testing.T) {
	f := newFixture(t, "", payCall())
	c := f.park(t)
	run, err := f.engine.Cancel(context.Background(), f.p, c.RunID)
	if err != nil || run.Status != agentd.RunCancelled {
		t.Fatalf("cancel: %v %+v", err, run)
	}
	if _, err := f.engine.Decide(context.Background(), f.p, c.ID, agentd.DecisionRequest{Decision: "approve"}); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Fatalf("approve after cancel: %v, want conflict", err)
	}
	got, _ := f.engine.ToolCall(context.Background(), f.p, c.ID)
	if got.Status != agentd.StatusCancelled || len(got.Decisions) != 1 || got.Decisions[0].Decision != agentd.DecisionCancelled || got.Decisions[0].DecidedBy != "k1" {
		t.Fatalf("call after cancel: %+v", got)
	}
	if again, err := f.engine.Cancel(context.Background(), f.p, c.RunID); err != nil || again.Status != agentd.RunCancelled {
		t.Fatalf("cancel again: %v %+v", err, again)
	}
	if f.rec.count(agentd.EventRunFinished) != 1 || f.rec.count(agentd.EventConfirmationResolved) != 1 {
		t.Fatalf("events: %d run_finished, %d confirmation_resolved", f.rec.count(agentd.EventRunFinished), f.rec.count(agentd.EventConfirmationResolved))
	}
	if b, _ := os.ReadFile(f.log); len(b) != 0 {
		t.Fatalf("cancelled call ran: %s", b)
	}
	other := agentd.Principal{TenantID: "t2", ProjectID: "p1"}
	if _, err := f.engine.Cancel(context.Background(), other, c.RunID); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("other tenant cancel: %v", err)
	}
}

// A decision that names a conversation applies only to a call of it: a
// call of another conversation is not found and stays parked.
func TestDecideNamesConversation(t *testing.T) {
	f := newFixture(t, "", payCall())
	c := f.park(t)
	ctx := context.Background()
	other := agentd.NewID(agentd.PrefixConversation)
	if _, err := f.engine.Decide(ctx, f.p, c.ID, agentd.DecisionRequest{Decision: "approve", ConversationID: other}); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("decide for another conversation: %v, want not_found", err)
	}
	if got, _ := f.engine.ToolCall(ctx, f.p, c.ID); got.Status != agentd.StatusRequiresConfirmation {
		t.Fatalf("the call moved: %s", got.Status)
	}
	if _, err := f.engine.Decide(ctx, f.p, c.ID, agentd.DecisionRequest{Decision: "approve", ConversationID: c.ConversationID}); err != nil {
		t.Fatalf("decide for its conversation: %v", err)
	}
}
