package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/postgres"
	"github.com/agentd-dev/agentd/sqlstore"
)

// What one chat turn may cost the store (issue 38; docs/performance.md
// §32): a user creates a conversation, opens its stream, posts a message,
// and the script model replies with one word. The budget is what a turn
// costs today; a change that adds a statement or a transaction to every
// turn fails TestTurnBudget, and one that removes some lowers these.
//
// The statements of a turn on SQLite, in the order it runs them (on
// PostgreSQL the same, plus what its backend adds: turnPostgresStatements):
//
//	POST /v1/conversations
//	   write: insert the conversation                                  1
//	GET  /v1/conversations/{id}/events
//	   the conversation (may the caller read it?)                      1
//	   the stream's history (no event yet)                             1
//	POST /v1/conversations/{id}/messages
//	   the conversation (Engine.Send reaches it)                       1
//	   write StartRun: no run is active, insert the run (its
//	   conversation must exist), the user's message, run_started
//	   (the conversation's counter, the event)                         5
//	the run's driver
//	   the run                                                         1
//	   the history: the conversation's messages                        1
//	   write the reply's text_delta: the counter, the event (its
//	   insert takes the next position: a batch of one reads no
//	   log's head)                                                     2
//	   write RecordStep, the last step: the run's step and its end
//	   (its conversation comes back with it), the assistant's
//	   message, the counter (once for both events), its message
//	   event, run_finished                                             5
//
// The transactions: the four writes, each its own group commit (one
// fsync) when nothing else is writing (turnCommits). Every read
// (turnLoneReads of them) is one statement, which SQLite runs outside a
// transaction.
const (
	turnStatements   = 18
	turnTransactions = 4
	turnCommits      = 4
	turnLoneReads    = 5
)

// On PostgreSQL a turn runs, besides, the feed lock and the notification
// of each of the three writes that append events (+6); and every lone
// read is a read transaction of its own (turnLoneReads), which commits
// nothing. Each transaction adds two round trips (BEGIN, COMMIT) to its
// statements; a statement new to its connection, a prepare.
const (
	turnPostgresStatements   = turnStatements + 6
	turnPostgresTransactions = turnTransactions + turnLoneReads
)

// turnRules is the script model's one-word reply to any message.
const turnRules = `[{"when":{"user":"."},"reply":{"text":"hello"}}]`

// TestTurnBudget runs chat turns over HTTP against the in-process server
// on a temporary SQLite file and fails when one costs more statements or
// transactions or commits than the budget (turnStatements,
// turnTransactions, turnCommits). Counts, unlike time, do not depend on
// the machine.
func TestTurnBudget(t *testing.T) {
	inst := startAgentdWith(t, t.TempDir(), turnRules, nil, setup{expireEvery: -1})
	checkTurns(t, inst, turnBudget{turnStatements, turnTransactions, turnCommits})
}

// TestTurnBudgetPostgres is TestTurnBudget on PostgreSQL (pgtest), with
// its round trips logged.
func TestTurnBudgetPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL: not with -short")
	}
	inst := startAgentdWith(t, t.TempDir(), turnRules, nil, setup{open: openPostgres, expireEvery: -1})
	checkTurns(t, inst, turnBudget{turnPostgresStatements, turnPostgresTransactions, turnCommits})
}

// turnBudget is what one turn may cost: statements, transactions (read
// and write), commits.
type turnBudget struct{ statements, transactions, commits int64 }

// openPostgres opens the PostgreSQL store on a database of its own.
func openPostgres(tb testing.TB, _ string) countedStore {
	tb.Helper()
	store, err := postgres.Open(context.Background(), pgtest.NewDatabase(tb, ""))
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// checkTurns runs three turns and checks each against the budget. The
// engine runs no background expiry, whose first pass reads the store at a
// moment of its own: the budget is what a turn costs.
func checkTurns(t *testing.T, inst *instance, budget turnBudget) {
	t.Helper()
	c := newClient()
	for i := range 3 {
		n := inst.turnCounted(t, c)
		t.Logf("turn %d: %s", i, countsLine(n))
		got := turnBudget{n.Statements, n.Reads + n.Writes, n.Commits}
		if got.statements > budget.statements || got.transactions > budget.transactions || got.commits > budget.commits {
			t.Errorf("turn %d ran %d statements in %d transactions with %d commits, the budget is %d in %d with %d "+
				"(bench/turn_test.go lists what each is for)", i, got.statements, got.transactions, got.commits,
				budget.statements, budget.transactions, budget.commits)
		} else if got != budget {
			t.Logf("turn %d is under the budget: lower it to %d statements, %d transactions, %d commits",
				i, got.statements, got.transactions, got.commits)
		}
	}
}

// countsLine says what counts hold, on one line.
func countsLine(n sqlstore.Counts) string {
	return fmt.Sprintf("%d statements, %d read + %d write transactions, %d commits, %d savepoint statements, %d polls, %d round trips",
		n.Statements, n.Reads, n.Writes, n.Commits, n.Savepoints, n.Polls, n.RoundTrips)
}

// turnCounted runs one turn and returns what it cost the store.
func (inst *instance) turnCounted(tb testing.TB, c *http.Client) sqlstore.Counts {
	tb.Helper()
	before := inst.store.Counts()
	inst.turn(tb, c)
	return inst.store.Counts().Sub(before)
}

// turn is one chat turn as a user makes it: create a conversation, open
// its stream, post a message, read the stream until run_finished. It
// returns once the run's driver has exited, so that everything the turn
// makes the store do is done.
func (inst *instance) turn(tb testing.TB, c *http.Client) {
	tb.Helper()
	conv := inst.createConversation(tb, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, inst.base+"/v1/conversations/"+conv+"/events", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	inst.sendMessage(tb, c, conv, "hi")
	r := newSSEReader(resp.Body)
	for {
		_, typ, _, err := r.next()
		if err != nil {
			tb.Fatalf("stream: %v", err)
		}
		if typ == "run_finished" {
			break
		}
	}
	deadline := time.Now().Add(waitLimit)
	for inst.engine.Drivers() > 0 {
		if time.Now().After(deadline) {
			tb.Fatal("the run's driver did not exit")
		}
		runtime.Gosched()
	}
}

// BenchmarkTurn runs AGENTD_BENCH_TURNS (default 200, at least b.N)
// one-word chat turns one after another over real HTTP against the
// in-process server on SQLite, and reports per turn what the store ran
// (statements, transactions, group commits), the allocations and bytes of
// the whole process (server and client), and the process's CPU time; then
// the same three requests against turnFloor, a bare net/http handler that
// writes what a turn must in one hand-written transaction.
//
//	go test -run '^$' -bench Turn -benchtime 1x ./bench/
//
// Nothing here asserts on time; the counts are TestTurnBudget's.
func BenchmarkTurn(b *testing.B) {
	n := iterations(b, "AGENTD_BENCH_TURNS", 200)
	dir := benchDir(b)
	inst := startAgentd(b, dir, turnRules, nil)
	c := newClient()
	for range 5 { // warm up
		inst.turn(b, c)
	}
	b.ResetTimer()
	before := inst.store.Counts()
	m := measure(b, n, func() { inst.turn(b, c) })
	counts := inst.store.Counts().Sub(before)

	fl := startTurnFloor(b, filepath.Join(dir, "floor.db"))
	for range 5 {
		fl.turn(b, c)
	}
	f := measure(b, n, func() { fl.turn(b, c) })
	b.StopTimer()

	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(m.wall, "ns/op")
	b.ReportMetric(per(counts.Statements), "stmts/turn")
	b.ReportMetric(per(counts.Reads+counts.Writes), "txs/turn")
	b.ReportMetric(per(counts.Commits), "commits/turn")
	b.ReportMetric(m.allocs, "allocs/turn")
	b.ReportMetric(m.bytes, "B/turn")
	b.ReportMetric(m.cpu, "cpu-µs/turn")
	b.ReportMetric(f.cpu, "floor-cpu-µs/turn")
	b.ReportMetric(m.cpu/f.cpu, "cpu-ratio-to-floor")

	var t strings.Builder
	fmt.Fprintf(&t, "BenchmarkTurn: %d one-word turns, one at a time (create, stream, post, read to run_finished), SQLite\n", n)
	fmt.Fprintf(&t, "  %-44s %12s %12s\n", "per turn", "agentd", "floor")
	row := func(name string, a, fl float64) { fmt.Fprintf(&t, "  %-44s %12.1f %12.1f\n", name, a, fl) }
	row("SQL statements", per(counts.Statements), floorTurnStatements)
	fmt.Fprintf(&t, "  %-44s %12.1f\n", "  savepoint statements", per(counts.Savepoints))
	row("transactions (read + write)", per(counts.Reads+counts.Writes), 1)
	fmt.Fprintf(&t, "  %-44s %12.1f %12.1f\n", "  of which reads", per(counts.Reads), 0.0)
	row("commits (fsyncs)", per(counts.Commits), 1)
	fmt.Fprintf(&t, "  %-44s %12.1f\n", "feed polls", per(counts.Polls))
	row("allocations (whole process)", m.allocs, f.allocs)
	row("bytes allocated (whole process)", m.bytes, f.bytes)
	row("process CPU µs (server and client)", m.cpu, f.cpu)
	report(b, t.String())
}

// turnMeasure is what measure found per turn.
type turnMeasure struct{ allocs, bytes, cpu, wall float64 }

// measure runs turn n times and returns the process's allocations, bytes
// allocated and CPU time (user + system) per turn.
func measure(b *testing.B, n int, turn func()) turnMeasure {
	b.Helper()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, t0 := processCPU(b), time.Now()
	for range n {
		turn()
	}
	wall, cpu := time.Since(t0), processCPU(b)-cpu0
	runtime.ReadMemStats(&m1)
	return turnMeasure{
		allocs: float64(m1.Mallocs-m0.Mallocs) / float64(n),
		bytes:  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n),
		cpu:    float64(cpu.Microseconds()) / float64(n),
		wall:   float64(wall.Nanoseconds()) / float64(n),
	}
}
