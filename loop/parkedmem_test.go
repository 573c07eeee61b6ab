package loop_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
)

// startAllocBudget is what Start and the first expiry and reminder pass
// may allocate with 20,000 calls parked, none due: they read no parked
// call (STYLE 14). Reading every parked call whole, as start-up did for
// reminders before (commit ebaccef), allocated 107 MiB here.
const startAllocBudget = 4 << 20

// seedParked opens a store on a new SQLite file and parks n calls of
// tool "refund" in it, parked at now with the deadline deadline(i): the
// calls of one step of one waiting run, written through the store in one
// transaction (fast, also under -race).
func seedParked(t *testing.T, n int, now time.Time, deadline func(int) time.Time) *sqlite.DB {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t1", ProjectID: "p1", Agent: "a", CreatedAt: now}
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t1", ProjectID: "p1",
		CorrelationID: agentd.NewCorrelationID(), Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser,
		Content: "go", CreatedAt: now}
	if err := st.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, run, msg, nil); err != nil {
		t.Fatal(err)
	}
	calls := make([]*agentd.ToolCall, n)
	for i := range calls {
		at := deadline(i)
		calls[i] = &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t1", ProjectID: "p1", ConversationID: conv.ID,
			RunID: run.ID, CorrelationID: run.CorrelationID, MessageID: msg.ID, Step: 1, Index: i, Name: "refund", ServerID: "go",
			Arguments: []byte(`{"amount":900}`), ArgumentsSHA256: strings.Repeat("0", 64), Tier: agentd.TierConfirm, Status: agentd.StatusRequiresConfirmation,
			RequiresApprovalAt: &at, AllowedDecisions: []string{"approve", "deny"},
			CreatedAt: now, UpdatedAt: now}
	}
	if _, err := st.CreateToolCalls(ctx, calls, nil); err != nil {
		t.Fatal(err)
	}
	step := 1
	if _, _, err := st.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting,
		Step: &step, Now: now}, nil); err != nil {
		t.Fatal(err)
	}
	return st
}

// With 20,000 calls parked, their deadlines a day away and an approval
// rule with reminders, Start and the first pass of the background expiry
// (what it does once at start: ExpireDue, then the reminders) allocate
// under startAllocBudget: memory, not time, so the guard holds on a busy
// machine.
func TestStartAllocatesNothingPerParkedCall(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 20,000 parked calls")
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := seedParked(t, 20000, now, func(i int) time.Time { return now.Add(24*time.Hour + time.Duration(i)*time.Second) })
	rule := agentd.DefaultApprovalRule()
	rule.Reminders = []string{"1h", "5m"}
	tool := &goTool{name: "refund", exposure: "requires-confirmation"}
	clock := &fakeClock{now: now}
	e := loop.New(st, newRecorder(), &loop.Agent{Name: "a", Model: &alwaysOnce{name: tool.name}, Tools: registered(t, tool),
		Approval: &rule}, loop.Options{Clock: clock, ExpireEvery: -1})
	t.Cleanup(e.Close)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	expired, err := e.ExpireDue(context.Background())
	if err != nil || expired != 0 {
		t.Fatalf("expired %d, %v", expired, err)
	}
	reminded, err := e.RemindDue(context.Background())
	if err != nil || reminded != 0 {
		t.Fatalf("reminded %d, %v", reminded, err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("20,000 parked: Start and the first pass allocated %.2f MiB (budget %.0f MiB)", float64(alloc)/(1<<20), float64(startAllocBudget)/(1<<20))
	if alloc > startAllocBudget {
		t.Fatalf("Start and the first pass allocated %d bytes with 20,000 calls parked, over the budget of %d: something reads every parked call", alloc, startAllocBudget)
	}
}

// The expiry reads due calls a page at a time and expires them all,
// however many pages they fill.
func TestExpireDueInPages(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const n = 2*loop.ExpirePage + 10
	st := seedParked(t, n, now, func(i int) time.Time { return now.Add(time.Minute + time.Duration(i)*time.Millisecond) })
	tool := &goTool{name: "refund", exposure: "requires-confirmation"}
	clock := &fakeClock{now: now.Add(time.Hour)}
	e := loop.New(st, newRecorder(), &loop.Agent{Name: "a", Model: &alwaysOnce{name: tool.name}, Tools: registered(t, tool)},
		loop.Options{Clock: clock, ExpireEvery: -1})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if expired, err := e.ExpireDue(context.Background()); err != nil || expired != n {
		t.Fatalf("expired %d of %d, %v", expired, n, err)
	}
	if left, err := st.ParkedCount(context.Background()); err != nil || left != 0 {
		t.Fatalf("%d calls still parked, %v", left, err)
	}
}
