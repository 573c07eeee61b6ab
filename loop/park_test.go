package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/seed"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
)

// Tests of "something waiting costs nothing" (docs/loop.md): a run that
// waits only for people has no driver, deadlines are one timer, and a
// restart starts drivers only for runs that must move.

// byMessage is a model that answers each run on its own: "pay" calls the
// pay tool, "refund" the billing connection's POST /refunds; after a tool
// result it answers "done". It keeps the status of the last tool result
// it read.
type byMessage struct {
	mu         sync.Mutex
	lastStatus agentd.CallStatus
}

func (m *byMessage) Generate(_ context.Context, req agentd.ModelRequest, _ func(string)) (*agentd.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agentd.ModelRoleTool {
		m.mu.Lock()
		m.lastStatus = last.ToolStatus
		m.mu.Unlock()
		return &agentd.ModelResponse{Text: "done"}, nil
	}
	if last.Content == "refund" {
		r := refundCall("5")
		return &r, nil
	}
	return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{}`)}}}, nil
}

func (m *byMessage) status() agentd.CallStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastStatus
}

// gatedTool is a requires-confirmation tool. Each execution is announced
// on started (when set) and, when release is set, waits for it. It fails
// if its context ends: a call it completes ran under a live context.
type gatedTool struct {
	started chan string
	release chan struct{}
	mu      sync.Mutex
	runs    int
	// state, when set, is the state the tool's Prepare reports (a file
	// tool's content digest): a change between card and execution parks
	// the call again.
	state func() string
}

func (g *gatedTool) ID() string { return "tools" }
func (g *gatedTool) Tools() []toolset.Tool {
	def := toolset.Tool{
		Spec:        agentd.ToolSpec{Name: "pay", Description: "pay", Parameters: json.RawMessage(`{"type":"object"}`)},
		Confirm:     &confirm.Tool{Name: "pay", ServerID: "tools", Exposure: confirm.ExposureRequiresConfirmation},
		LLMCallable: true,
	}
	if g.state != nil {
		def.Prepare = func(context.Context, json.RawMessage) (toolset.Preparation, error) {
			s := g.state()
			return toolset.Preparation{Diff: "state " + s, State: s}, nil
		}
	}
	return []toolset.Tool{def}
}
func (g *gatedTool) Execute(ctx context.Context, c agentd.ToolCall) (json.RawMessage, error) {
	g.mu.Lock()
	g.runs++
	g.mu.Unlock()
	if g.started != nil {
		g.started <- c.ID
	}
	if g.release != nil {
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.New("the tool's context ended: " + err.Error())
	}
	return json.RawMessage(`{"ok":true}`), nil
}
func (g *gatedTool) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs
}

type parkFixture struct {
	path   string
	store  *sqlite.DB
	rec    *recorder
	clock  *fakeClock
	model  *byMessage
	tool   *gatedTool
	engine *loop.Engine
	p      agentd.Principal
}

// parkOpts configure newPark.
type parkOpts struct {
	expiry bool // the background expiry on the fake clock's timers
	hook   func(runID, stage string)
	tool   *gatedTool
	clock  *fakeClock
}

// newPark starts an engine over the SQLite file at path ("" = a new one)
// with the pay tool and the billing connection.
func newPark(t *testing.T, path string, o parkOpts) *parkFixture {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "agentd.db")
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if o.tool == nil {
		o.tool = &gatedTool{}
	}
	if o.clock == nil {
		o.clock = &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	}
	billing, _ := newBillingTools(t)
	tools := registered(t, append(billing, o.tool)...)
	f := &parkFixture{path: path, store: st, rec: newRecorder(), clock: o.clock, model: &byMessage{}, tool: o.tool,
		p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	opts := loop.Options{Clock: f.clock, ExpireEvery: -1}
	if o.expiry {
		opts.ExpireEvery, opts.AfterFunc = 0, f.clock.AfterFunc
	}
	f.engine = loop.New(st, f.rec, &loop.Agent{Name: "a", Model: f.model, Tools: tools, ApprovalTimeout: 10 * time.Minute, MaxTurns: 5}, opts)
	if o.hook != nil {
		loop.SetRetireHook(f.engine, o.hook)
	}
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	return f
}

func (f *parkFixture) close() { f.engine.Close(); f.store.Close() }

// send starts a run with text on a new conversation and returns the run id.
func (f *parkFixture) send(t *testing.T, text string) string {
	t.Helper()
	conv, err := f.engine.CreateConversation(context.Background(), f.p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.engine.Send(context.Background(), f.p, conv.ID, text)
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// parked waits for the n-th confirmation_required and returns the call's id.
func (f *parkFixture) parked(t *testing.T, n int) string {
	t.Helper()
	var d struct {
		ID string `json:"tool_call_id"`
	}
	if err := json.Unmarshal(f.rec.wait(t, agentd.EventConfirmationRequired, n).Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func (f *parkFixture) approve(t *testing.T, callID string) {
	t.Helper()
	if _, err := f.engine.Decide(context.Background(), f.p, callID, agentd.DecisionRequest{Decision: "approve"}); err != nil {
		t.Fatalf("approve %s: %v", callID, err)
	}
}

// finished waits for the n-th run_finished and checks that run runID
// completed and that call callID is in status want.
func (f *parkFixture) finished(t *testing.T, n int, runID, callID string, want agentd.CallStatus) {
	t.Helper()
	f.rec.wait(t, agentd.EventRunFinished, n)
	run, err := f.engine.Run(context.Background(), f.p, runID)
	if err != nil || run.Status != agentd.RunCompleted {
		t.Fatalf("run %s: %+v %v, want completed", runID, run, err)
	}
	c, err := f.engine.ToolCall(context.Background(), f.p, callID)
	if err != nil || c.Status != want {
		t.Fatalf("call %s: %+v %v, want %s", callID, c, err, want)
	}
}

// waitFor waits until cond holds; the limit is a failure deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitDrivers(t *testing.T, e *loop.Engine, n int) {
	t.Helper()
	waitFor(t, "the expected number of drivers", func() bool { return e.Drivers() == n })
}

// A parked run holds no goroutine: its driver exits once the run is
// waiting, twenty more parked runs add no goroutines, and an approval
// starts a driver that finishes the run.
func TestParkedRunHoldsNoDriver(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	runID := f.send(t, "pay")
	callID := f.parked(t, 1)
	f.rec.wait(t, agentd.EventRunWaiting, 1)
	waitDrivers(t, f.engine, 0)

	base := runtime.NumGoroutine()
	for i := 2; i <= 21; i++ {
		f.send(t, "pay")
		f.rec.wait(t, agentd.EventRunWaiting, i)
	}
	waitDrivers(t, f.engine, 0)
	waitFor(t, "back to the goroutines of one parked run", func() bool { return runtime.NumGoroutine() <= base+2 })

	f.approve(t, callID)
	f.finished(t, 1, runID, callID, agentd.StatusCompleted)
	waitDrivers(t, f.engine, 0)
	if n := f.tool.count(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

// gate blocks a driver at one park stage (loop.SetRetireHook) until released.
type gate struct {
	stage   string
	arrived chan string
	release chan struct{}
}

func newGate(stage string) *gate {
	return &gate{stage: stage, arrived: make(chan string, 1), release: make(chan struct{})}
}

func (g *gate) hook(runID, stage string) {
	if stage == g.stage {
		g.arrived <- runID
		<-g.release
	}
}

// An approval at the moment the driver of a parked run exits runs the
// tool to completion exactly once, under a live context, and the run
// finishes — whether the approval comes just before the driver decides to
// exit, just after it left, or anywhere around it.
func TestApproveAsTheDriverExits(t *testing.T) {
	t.Run("before the exit check", testApproveBeforeExitCheck)
	t.Run("after the driver left", testApproveAfterDriverLeft)
	t.Run("racing", testApproveRacingExit)
}

func testApproveBeforeExitCheck(t *testing.T) {
	g := newGate("before")
	tool := &gatedTool{started: make(chan string, 1), release: make(chan struct{})}
	f := newPark(t, "", parkOpts{hook: g.hook, tool: tool})
	runID := f.send(t, "pay")
	callID := f.parked(t, 1)
	<-g.arrived
	f.approve(t, callID)
	<-tool.started
	if n := f.engine.Drivers(); n != 1 {
		t.Fatalf("%d drivers while the approved call runs, want the one that was exiting", n)
	}
	close(g.release) // the driver sees the tool in flight and stays
	close(tool.release)
	f.finished(t, 1, runID, callID, agentd.StatusCompleted)
	waitDrivers(t, f.engine, 0)
	if n := tool.count(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

func testApproveAfterDriverLeft(t *testing.T) {
	g := newGate("after")
	tool := &gatedTool{started: make(chan string, 1), release: make(chan struct{})}
	f := newPark(t, "", parkOpts{hook: g.hook, tool: tool})
	runID := f.send(t, "pay")
	callID := f.parked(t, 1)
	<-g.arrived
	f.approve(t, callID) // a new driver starts for the run
	<-tool.started
	close(g.release) // the old driver returns and cancels its own context
	waitDrivers(t, f.engine, 1)
	close(tool.release) // the tool still runs under a live context
	f.finished(t, 1, runID, callID, agentd.StatusCompleted)
	waitDrivers(t, f.engine, 0)
	if n := tool.count(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

func testApproveRacingExit(t *testing.T) {
	arrived := make(chan string, 1)
	tool := &gatedTool{}
	f := newPark(t, "", parkOpts{tool: tool, hook: func(runID, stage string) {
		if stage == "before" {
			arrived <- runID
		}
	}})
	const n = 40
	for i := 1; i <= n; i++ {
		runID := f.send(t, "pay")
		callID := f.parked(t, i)
		if got := <-arrived; got != runID {
			t.Fatalf("the driver of %s parked, want %s", got, runID)
		}
		// The driver goes on to its exit check while the approval
		// commits and starts the call.
		for range i % 4 {
			runtime.Gosched()
		}
		f.approve(t, callID)
		f.finished(t, i, runID, callID, agentd.StatusCompleted)
		if got := tool.count(); got != i {
			t.Fatalf("after %d approvals the tool ran %d times", i, got)
		}
	}
	waitDrivers(t, f.engine, 0)
}

// The deadline timer is one timer armed to the earliest deadline: a call
// parked with an earlier deadline re-arms it, a later one does not; when
// it fires the earliest call expires, and it is re-armed for the next.
func TestDeadlineTimer(t *testing.T) {
	f := newPark(t, "", parkOpts{expiry: true})
	t0 := f.clock.Now()
	f.clock.waitArmed(t) // the first pass found nothing parked

	payRun := f.send(t, "pay") // 10 minutes, the agent's timeout
	pay := f.parked(t, 1)
	f.clock.waitArmed(t, t0.Add(10*time.Minute))

	refundRun := f.send(t, "refund") // 2 minutes, the endpoint's
	refund := f.parked(t, 2)
	f.clock.waitArmed(t, t0.Add(2*time.Minute))

	againRun := f.send(t, "pay") // 10 minutes again: later than the armed instant
	again := f.parked(t, 3)
	f.rec.wait(t, agentd.EventRunWaiting, 3)
	f.clock.waitArmed(t, t0.Add(2*time.Minute))

	f.clock.Advance(2 * time.Minute)
	f.finished(t, 1, refundRun, refund, agentd.StatusExpired)
	f.clock.waitArmed(t, t0.Add(10*time.Minute))
	if c, _ := f.engine.ToolCall(context.Background(), f.p, pay); c.Status != agentd.StatusRequiresConfirmation {
		t.Fatalf("the later call is %s after the first expiry", c.Status)
	}
	if f.model.status() != agentd.StatusExpired {
		t.Fatalf("the model read %q, want expired", f.model.status())
	}

	f.clock.Advance(8 * time.Minute)
	// Both pay calls share the deadline; their runs finish in either order.
	f.finished(t, 3, payRun, pay, agentd.StatusExpired)
	f.finished(t, 3, againRun, again, agentd.StatusExpired)
	f.clock.waitArmed(t) // nothing left to expire
	waitDrivers(t, f.engine, 0)
	if f.tool.count() != 0 {
		t.Fatal("an expired call ran")
	}
}

// A restart with 1,000 parked runs starts no driver, arms one timer for
// the earliest deadline, and an approval of one of them finishes its run.
func TestRestartWithParkedRunsStartsNoDriver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	clock := &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	first := clock.Now().Add(10 * time.Minute)
	ids, err := seed.Parked{TenantID: "t1", ProjectID: "p1", CreatedBy: "k1", Agent: "a", Tool: "pay", Now: clock.Now(),
		Deadline: func(i int) time.Time { return first.Add(time.Duration(999-i) * time.Second) }}.Write(context.Background(), path, 1000)
	if err != nil {
		t.Fatal(err)
	}

	f := newPark(t, path, parkOpts{expiry: true, clock: clock})
	if n := f.engine.Drivers(); n != 0 {
		t.Fatalf("%d drivers after a start with 1,000 parked runs, want 0", n)
	}
	clock.waitArmed(t, first)
	f.close()

	f = newPark(t, path, parkOpts{expiry: true, clock: clock})
	if n := f.engine.Drivers(); n != 0 {
		t.Fatalf("%d drivers after a restart with 1,000 parked runs, want 0", n)
	}
	clock.waitArmed(t, first)
	c, err := f.engine.ToolCall(context.Background(), f.p, ids[500])
	if err != nil {
		t.Fatal(err)
	}
	f.approve(t, c.ID)
	f.finished(t, 1, c.RunID, c.ID, agentd.StatusCompleted)
	waitDrivers(t, f.engine, 0)
	if n := f.tool.count(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	pending, _, err := f.engine.PendingApprovals(context.Background(), f.p, agentd.PendingQuery{Limit: 100})
	if err != nil || len(pending) != 100 {
		t.Fatalf("pending approvals: %d, %v", len(pending), err)
	}
}

// A run whose last parked call was resolved while no driver moved it on
// (a crash right after the decision) is driven to completion at start.
func TestRestartDrivesRunWhoseParkedCallWasResolved(t *testing.T) {
	for _, st := range []agentd.CallStatus{agentd.StatusDenied, agentd.StatusExpired} {
		t.Run(string(st), func(t *testing.T) {
			f := newPark(t, "", parkOpts{})
			runID := f.send(t, "pay")
			callID := f.parked(t, 1)
			f.rec.wait(t, agentd.EventRunWaiting, 1)
			f.close()

			store, err := sqlite.Open(f.path)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = store.UpdateToolCall(context.Background(), agentd.CallUpdate{
				ID: callID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: st, Now: f.clock.Now(),
				Decision: &agentd.Decision{Decision: map[agentd.CallStatus]string{
					agentd.StatusDenied: agentd.DecisionDenied, agentd.StatusExpired: agentd.DecisionExpired}[st], DecidedBy: "k1"},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			store.Close()

			g := newPark(t, f.path, parkOpts{})
			g.finished(t, 1, runID, callID, st)
			if g.model.status() != st {
				t.Fatalf("the model read %q, want %s", g.model.status(), st)
			}
			waitDrivers(t, g.engine, 0)
		})
	}
}
