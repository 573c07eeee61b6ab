package bench

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	_ "modernc.org/sqlite" // the floor's database driver, the one agentd uses
)

// approvalRules: "go" makes the model call the confirm-tier tool "mark";
// once it has run, the model answers and the run ends.
const approvalRules = `[
 {"when":{"user":"^go"},"reply":{"tool_calls":[{"name":"mark","arguments":{}}]}},
 {"when":{"tool_result":"mark"},"reply":{"text":"done"}}
]`

// BenchmarkApprovalLatency measures the time from the approval POST to the
// start of the approved tool's process — agentd's promise to an operator
// who clicks "approve" — and, interleaved with it in the same run, the floor:
// a bare loopback HTTP POST to a trivial net/http handler that does one
// durable SQLite commit (modernc.org/sqlite, WAL, synchronous=FULL, one
// small INSERT in a BEGIN IMMEDIATE transaction) and then fork/execs the
// same command.
//
// The tool command is testdata/markhelper, whose first action is to write
// the wall-clock instant to $AGENTD_BENCH_MARK. A sample is mark − t0, where
// t0 is taken just before the client sends the POST. For agentd each sample
// uses a fresh conversation whose call is parked and whose run is waiting
// (the server is idle, as it is when a human decides), and the next sample
// starts only after the run has finished.
//
// With AGENTD_BENCH_IDEMPOTENT=1 the tool is declared idempotent, so the
// approval claims the call in its own commit (one commit instead of two).
//
// Metrics: p50/p99 of both, in ms, and their ratios (target: agentd ≤ 1.5×
// the floor). ns/op is the wall time of one agentd+floor sample pair,
// including the untimed preparation.
//
//	go test -run '^$' -bench ApprovalLatency -benchtime 1x ./bench/
func BenchmarkApprovalLatency(b *testing.B) {
	helper := markHelper(b)
	dir := benchDir(b)
	mark := filepath.Join(dir, "mark")
	b.Setenv(markEnv, mark)

	inst := startAgentd(b, dir, approvalRules, []toolDef{{name: "mark", command: []string{helper}, confirm: true,
		idempotent: os.Getenv("AGENTD_BENCH_IDEMPOTENT") == "1"}})
	fl := startFloor(b, dir, helper)
	client := newClient()

	// Warm up both paths (connections, page cache, the helper's binary).
	for range 5 {
		inst.approvalSample(b, client, mark)
		fl.sample(b, client, mark)
	}

	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	var agentdS, floorS []approvalSample
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		runAgentd := func() { agentdS = append(agentdS, inst.approvalSample(b, client, mark)) }
		runFloor := func() { floorS = append(floorS, fl.sample(b, client, mark)) }
		if i%2 == 0 {
			runAgentd()
			runFloor()
		} else {
			runFloor()
			runAgentd()
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	col := func(ss []approvalSample, get func(approvalSample) time.Duration) summary {
		ds := make([]time.Duration, len(ss))
		for i, s := range ss {
			ds[i] = get(s)
		}
		return summarize(ds)
	}
	latency := func(s approvalSample) time.Duration { return s.latency }
	rtt := func(s approvalSample) time.Duration { return s.rtt }
	committed := func(s approvalSample) time.Duration { return s.committed }
	started := func(s approvalSample) time.Duration { return s.latency - s.committed }
	a, f := col(agentdS, latency), col(floorS, latency)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(ms(a.p50), "agentd-p50-ms")
	b.ReportMetric(ms(a.p99), "agentd-p99-ms")
	b.ReportMetric(ms(f.p50), "floor-p50-ms")
	b.ReportMetric(ms(f.p99), "floor-p99-ms")
	b.ReportMetric(float64(a.p50)/float64(f.p50), "ratio-p50")
	b.ReportMetric(float64(a.p99)/float64(f.p99), "ratio-p99")

	var t strings.Builder
	fmt.Fprintf(&t, "approval POST → tool process start, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-34s %9s %9s %9s %9s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-34s %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), ms(s.mean))
	}
	row("agentd: POST → tool start", a)
	row("floor:  POST → tool start", f)
	fmt.Fprintf(&t, "  %-34s %9.2f %9.2f %9.2f   (target p50, p99 ≤ 1.50)\n", "ratio agentd / floor",
		float64(a.p50)/float64(f.p50), float64(a.p90)/float64(f.p90), float64(a.p99)/float64(f.p99))
	fmt.Fprintf(&t, "  split at the commit (agentd: the hub has tool_call_started; floor: COMMIT returned)\n")
	row("agentd: POST → committed", col(agentdS, committed))
	row("floor:  POST → committed", col(floorS, committed))
	row("agentd: committed → tool start", col(agentdS, started))
	row("floor:  committed → tool start", col(floorS, started))
	fmt.Fprintf(&t, "  for reference\n")
	row("agentd: POST round trip", col(agentdS, rtt))
	row("floor:  POST round trip", col(floorS, rtt))
	row("floor:  BEGIN…COMMIT in the handler", col(floorS, func(s approvalSample) time.Duration { return s.commit }))
	report(b, t.String())
}

// approvalSample parks one call in a fresh conversation, waits until the
// run is waiting, approves the call and returns the time from just before
// the POST to the tool's start mark, and the POST's round trip. It returns
// after the run has finished, so that the next sample starts on an idle
// server.
func (inst *instance) approvalSample(b *testing.B, c *http.Client, mark string) approvalSample {
	b.Helper()
	conv := inst.createConversation(b, c)
	events := inst.w.watch(conv)
	defer inst.w.unwatch(conv)
	inst.sendMessage(b, c, conv, "go")
	callID := field(b, waitEvent(b, events, agentd.EventConfirmationRequired), "tool_call_id")
	waitEvent(b, events, agentd.EventRunWaiting)
	if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}

	t0 := time.Now()
	status, body := post(b, c, inst.base+"/v1/tool-calls/"+callID+"/approval", `{"decision":"approve"}`)
	rtt := time.Since(t0)
	if status != http.StatusOK {
		b.Fatalf("approve: %d %s", status, body)
	}
	started := waitEvent(b, events, agentd.EventToolCallStarted)
	fin := waitEvent(b, events, agentd.EventRunFinished)
	if s := field(b, fin, "status"); s != string(agentd.RunCompleted) {
		b.Fatalf("run finished %s: %s", s, fin.Data)
	}
	return approvalSample{latency: readMark(b, mark).Sub(t0), rtt: rtt, committed: started.at.Sub(t0)}
}

// floor is the least any approval endpoint can do: a net/http handler that
// commits one small row durably and fork/execs the tool command.
type floor struct {
	db     *sql.DB
	srv    *http.Server
	url    string
	helper string
	dir    string
	env    []string
	done   chan floorRun
}

// floorRun is what the floor's handler measured of one request.
type floorRun struct {
	commitStart, committed time.Time // around BEGIN IMMEDIATE … COMMIT
	err                    error     // of the command
}

// approvalSample is one measurement of agentd or the floor.
type approvalSample struct {
	latency   time.Duration // t0 (before the POST) → the tool's start mark
	rtt       time.Duration // the POST's round trip
	committed time.Duration // t0 → the decision is committed
	commit    time.Duration // floor only: BEGIN … COMMIT
}

func startFloor(b *testing.B, dir, helper string) *floor {
	b.Helper()
	path, err := filepath.Abs(filepath.Join(dir, "floor.db"))
	if err != nil {
		b.Fatal(err)
	}
	// The settings of sqlite.Open's write connection.
	dsn := "file:" + (&url.URL{Path: filepath.ToSlash(path)}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	b.Cleanup(func() { db.Close() })
	var mode string
	var syncMode int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		b.Fatalf("floor journal_mode %q: %v", mode, err)
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 2 {
		b.Fatalf("floor synchronous %d (want 2, FULL): %v", syncMode, err)
	}
	if _, err := db.Exec(`CREATE TABLE decisions (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL,
		decision TEXT NOT NULL, created_at INTEGER NOT NULL)`); err != nil {
		b.Fatal(err)
	}

	toolDir := filepath.Join(dir, "floor-tool")
	if err := os.MkdirAll(toolDir, 0o755); err != nil {
		b.Fatal(err)
	}
	f := &floor{db: db, helper: helper, dir: toolDir, done: make(chan floorRun, 1),
		// The environment tools.Tool.Run gives a command.
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
			markEnv + "=" + os.Getenv(markEnv)}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /approve", f.handle)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	f.srv = &http.Server{Handler: mux}
	f.url = "http://" + ln.Addr().String() + "/approve"
	go func() { _ = f.srv.Serve(ln) }()
	b.Cleanup(func() { _ = f.srv.Close() })
	return f
}

// handle commits one decision row and starts the command, as agentd's
// approval does, and answers once the command has started.
func (f *floor) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var run floorRun
	run.commitStart = time.Now()
	tx, err := f.db.BeginTx(r.Context(), nil)
	if err == nil {
		_, err = tx.Exec(`INSERT INTO decisions (call_id, decision, created_at) VALUES (?, ?, ?)`,
			"call_1", string(body), run.commitStart.UnixNano())
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	run.committed = time.Now()

	cmd := exec.Command(f.helper)
	cmd.Dir = f.dir
	cmd.Env = f.env
	cmd.Stdin = bytes.NewReader([]byte(`{"tool":"mark","call_id":"call_1","input":{}}` + "\n"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	go func() {
		run.err = cmd.Wait()
		f.done <- run
	}()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"decision":"approved"}`))
}

// sample does one floor request and waits for its command to exit.
func (f *floor) sample(b *testing.B, c *http.Client, mark string) approvalSample {
	b.Helper()
	if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	t0 := time.Now()
	status, body := post(b, c, f.url, `{"decision":"approve"}`)
	rtt := time.Since(t0)
	if status != http.StatusOK {
		b.Fatalf("floor: %d %s", status, body)
	}
	var run floorRun
	select {
	case run = <-f.done:
	case <-time.After(waitLimit):
		b.Fatal("floor: the command did not exit")
	}
	if run.err != nil {
		b.Fatalf("floor command: %v", run.err)
	}
	return approvalSample{latency: readMark(b, mark).Sub(t0), rtt: rtt,
		committed: run.committed.Sub(t0), commit: run.committed.Sub(run.commitStart)}
}
