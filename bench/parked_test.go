package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/seed"
)

// parkedConfig sizes one parked-scale measurement.
type parkedConfig struct {
	parked    int // parked calls of the large database, each in its own waiting run
	starts    int // starts of the large server, each after stopping the previous one
	pages     int // GET /v1/approvals requests per server
	decisions int // decisions per server
	// idle is how long a server idles after start before its memory is
	// read.
	idle time.Duration
}

// parkedNoFile is the open-file limit the servers run under: far below
// the 20,000 under which a server with 20,000 parked calls failed to
// restart when every parked run had a driver reading the store.
const parkedNoFile = 1024

// BenchmarkParkedScale measures what parked approvals cost the real
// server: the cmd/agentd binary, started as a process on a SQLite file
// seeded (untimed, internal/seed) with $AGENTD_BENCH_PARKED parked calls
// (default 2,000), each in its own waiting run, beside the same binary on
// a file with one parked call. Both run under an open-file limit of 1,024.
// For each it reports:
//
//   - start → /readyz: from fork/exec until /readyz first answers 200, for
//     each of 3 starts of the large server (every start recovers the same
//     100,000 parked runs) and 1 of the small one;
//   - RSS of the process idle after start (VmRSS in /proc/<pid>/status, one
//     second after /readyz), its peak (VmHWM) and its open files;
//   - GET /v1/approvals, the first page (50 calls), p50/p99 over
//     $AGENTD_BENCH_SAMPLES requests (default 200), one at a time;
//   - a decision: the approval POST's round trip and POST → the approved
//     tool's process start (bench/testdata/markhelper), over
//     $AGENTD_BENCH_DECISIONS decisions (default 20), each waited on until
//     its run has finished. Large: seeded calls, untouched since start.
//     Small: the one seeded call, then calls parked through the API, one
//     at a time, so exactly one call is parked at every decision.
//
// Targets (large server, 100,000 parked): start → /readyz ≤ 1 s, idle RSS
// ≤ 100 MiB, first page p99 ≤ 10 ms, a decision as fast as with one parked
// call (ratio ≈ 1). Nothing is asserted on time.
//
//	AGENTD_BENCH_PARKED=100000 go test -run '^$' -bench ParkedScale -benchtime 1x -timeout 30m ./bench/
func BenchmarkParkedScale(b *testing.B) {
	cfg := parkedConfig{parked: envInt("AGENTD_BENCH_PARKED", 2000), starts: 3,
		pages: envInt("AGENTD_BENCH_SAMPLES", 200), decisions: envInt("AGENTD_BENCH_DECISIONS", 20), idle: time.Second}
	b.ResetTimer()
	start := time.Now()
	var large, small parkedFigures
	for range b.N {
		large, small = parkedScale(b, cfg)
	}
	b.StopTimer()
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(ms(maxDuration(large.starts)), "start-max-ms")
	b.ReportMetric(float64(large.idleRSS)/(1<<20), "idle-rss-MiB")
	b.ReportMetric(ms(large.page.p99), "page-p99-ms")
	b.ReportMetric(float64(large.decide.p50)/float64(small.decide.p50), "decide-p50-ratio")
	report(b, parkedTable(cfg, large, small))
}

// TestParkedScaleSmoke runs the measurement of BenchmarkParkedScale small
// (300 parked calls), so that a plain `go test ./bench/` keeps it working;
// it reports nothing and asserts nothing on time. -short skips it.
func TestParkedScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the real binary")
	}
	large, small := parkedScale(t, parkedConfig{parked: 300, starts: 1, pages: 10, decisions: 2})
	if len(large.starts) != 1 || large.page.n != 10 || large.decide.n != 2 || small.decide.n != 2 {
		t.Fatalf("figures: %+v %+v", large, small)
	}
}

// parkedFigures is what parkedScale measured of one server.
type parkedFigures struct {
	parked       int
	starts       []time.Duration // fork/exec → /readyz 200
	idleRSS, hwm int64           // bytes, after the last start
	fds          int             // open files after the last start
	afterRSS     int64           // bytes, after the pages and decisions
	page         summary
	// filtered are first pages of GET /v1/approvals with one filter each
	// (filterQueries), and a scrape of /metrics (its parked gauge counts
	// every parked call).
	filtered    map[string]summary
	decide, rtt summary
}

// filterQueries are the filtered first pages BenchmarkParkedScale
// measures, by name; %s is the conversation of the first seeded call. The
// ones that match nothing are the worst case: nothing stops the walk of
// the index early.
var filterQueries = []struct{ name, query string }{
	{"tool_name (all match)", "?tool_name=mark"},
	{"tool_name (none match)", "?tool_name=nope"},
	{"server_id (none match)", "?server_id=nope"},
	{"conversation_id (one match)", "?conversation_id=%s"},
	{"expires_before (all match)", "?expires_before=2999-01-01T00:00:00Z"},
	{"expires_before (none match)", "?expires_before=2000-01-01T00:00:00Z"},
}

// parkedScale seeds the two databases, then starts and measures the large
// server and the small one.
func parkedScale(tb testing.TB, cfg parkedConfig) (large, small parkedFigures) {
	tb.Helper()
	bin, helper := agentdBinary(tb), markHelper(tb)
	dir := benchDir(tb)
	project := writeParkedProject(tb, filepath.Join(dir, "project"), helper)
	mark := filepath.Join(dir, "mark")
	deadline := time.Now().Add(24 * time.Hour) // nothing expires while measured
	seedDB := func(name string, n int) (string, []string) {
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			tb.Fatal(err)
		}
		ids, err := seed.Parked{Agent: "bench", Tool: "mark", Deadline: func(int) time.Time { return deadline }}.
			Write(context.Background(), filepath.Join(data, "agentd.db"), n)
		if err != nil {
			tb.Fatal(err)
		}
		return data, ids
	}
	largeData, largeIDs := seedDB("large", cfg.parked)
	smallData, smallIDs := seedDB("small", 1)
	srv := parkedServer{tb: tb, bin: bin, project: project, mark: mark, client: &http.Client{Timeout: waitLimit}}
	large = srv.measure(largeData, cfg.starts, cfg, largeIDs)
	small = srv.measure(smallData, 1, cfg, smallIDs)
	large.parked, small.parked = cfg.parked, 1
	return large, small
}

// writeParkedProject writes a project whose script model calls the
// requires-confirmation tool mark (the helper) on "go" and answers "done"
// after its result.
func writeParkedProject(tb testing.TB, dir, helper string) string {
	tb.Helper()
	td := filepath.Join(dir, "tools", "mark")
	if err := os.MkdirAll(td, 0o755); err != nil {
		tb.Fatal(err)
	}
	agent := `{"name":"bench","system_prompt":"You are a benchmark agent.","model":{"provider":"script","script":{"rules":` +
		approvalRules + `}},"approval_timeout":"24h","max_turns":10}`
	tool, _ := json.Marshal(map[string]any{"name": "mark", "description": "benchmark tool mark", "command": []string{helper},
		"env": []string{markEnv}, "exposure": map[string]string{"kind": "requires-confirmation"}})
	for path, body := range map[string][]byte{filepath.Join(dir, "agent.json"): []byte(agent), filepath.Join(td, "tool.json"): tool} {
		if err := os.WriteFile(path, body, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// parkedServer starts the real binary and measures it.
type parkedServer struct {
	tb                 testing.TB
	bin, project, mark string
	client             *http.Client
}

// measure starts the server on data `starts` times (stopping it in
// between), reads its memory after the last start, then times the pending
// page and the decisions; ids are the seeded calls.
func (s parkedServer) measure(data string, starts int, cfg parkedConfig, ids []string) parkedFigures {
	var f parkedFigures
	var p *process
	for i := range starts {
		if p != nil {
			p.stop()
		}
		p = s.start(data, i)
		f.starts = append(f.starts, p.ready)
	}
	defer p.stop()
	time.Sleep(cfg.idle) // idle, as a server is after start
	f.idleRSS, f.hwm = procStatus(s.tb, p.cmd.Process.Pid, "VmRSS"), procStatus(s.tb, p.cmd.Process.Pid, "VmHWM")
	f.fds = openFiles(p.cmd.Process.Pid)

	var pages []time.Duration
	for range cfg.pages {
		t0 := time.Now()
		var body struct {
			Approvals []json.RawMessage `json:"approvals"`
		}
		s.get(p.base+"/v1/approvals", &body)
		pages = append(pages, time.Since(t0))
		if want := min(50, len(ids)); len(body.Approvals) != want {
			s.tb.Fatalf("first page has %d approvals, want %d", len(body.Approvals), want)
		}
	}
	f.page = summarize(pages)
	f.filtered = s.filteredPages(p.base, ids[0], cfg.pages)

	var lat, rtt []time.Duration
	for i := range cfg.decisions {
		id := ""
		switch {
		case i < len(ids) && len(ids) > 1, i == 0:
			id = ids[i]
		default:
			id = s.parkOne(p.base)
		}
		l, r := s.decide(p.base, id)
		lat, rtt = append(lat, l), append(rtt, r)
	}
	f.decide, f.rtt = summarize(lat), summarize(rtt)
	f.afterRSS = procStatus(s.tb, p.cmd.Process.Pid, "VmRSS")
	return f
}

// filteredPages measures n requests of each of filterQueries and of
// /metrics.
func (s parkedServer) filteredPages(base, firstID string, n int) map[string]summary {
	var call struct {
		ConversationID string `json:"conversation_id"`
	}
	s.get(base+"/v1/tool-calls/"+firstID, &call)
	out := map[string]summary{}
	for _, q := range filterQueries {
		url := base + "/v1/approvals" + q.query
		if strings.Contains(url, "%s") {
			url = fmt.Sprintf(url, call.ConversationID)
		}
		var ds []time.Duration
		for range n {
			t0 := time.Now()
			var body struct {
				Approvals []json.RawMessage `json:"approvals"`
			}
			s.get(url, &body)
			ds = append(ds, time.Since(t0))
		}
		out[q.name] = summarize(ds)
	}
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		resp, err := s.client.Get(base + "/metrics")
		if err != nil {
			s.tb.Fatalf("GET /metrics: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ds = append(ds, time.Since(t0))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "agentd_parked_tool_calls ") {
			s.tb.Fatalf("GET /metrics: %d %.200s", resp.StatusCode, b)
		}
	}
	out["/metrics scrape"] = summarize(ds)
	return out
}

// process is a running server.
type process struct {
	cmd   *exec.Cmd
	base  string
	ready time.Duration // fork/exec → /readyz 200
	done  chan struct{}
}

// start starts the binary on data under the open-file limit and waits for
// /readyz. Its log goes to data/server-<n>.log.
func (s parkedServer) start(data string, n int) *process {
	s.tb.Helper()
	logf, err := os.Create(filepath.Join(data, fmt.Sprintf("server-%d.log", n)))
	if err != nil {
		s.tb.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("/bin/sh", "-c", "ulimit -n "+strconv.Itoa(parkedNoFile)+` && exec "$0" "$@"`,
		s.bin, "serve", "--project", s.project, "--addr", "127.0.0.1:0", "--data", data)
	cmd.Env = append(os.Environ(), markEnv+"="+s.mark)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.tb.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	s.tb.Cleanup(p.stop)
	lines := bufio.NewReader(stdout)
	line, err := lines.ReadString('\n')
	if err != nil {
		s.tb.Fatalf("the server did not start (%v); see %s", err, logf.Name())
	}
	go func() {
		_, _ = io.Copy(io.Discard, lines)
		_ = cmd.Wait()
		close(p.done)
	}()
	p.base = strings.TrimSpace(strings.TrimPrefix(line, "agentd listening on "))
	for {
		resp, err := s.client.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(t0) > waitLimit {
			s.tb.Fatalf("/readyz: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	p.ready = time.Since(t0)
	return p
}

// stop ends the server with SIGTERM (SIGKILL after waitLimit) and waits
// for it. Calling it again does nothing.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(waitLimit):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// get decodes the JSON of a 200 answer to GET url into v.
func (s parkedServer) get(url string, v any) {
	s.tb.Helper()
	resp, err := s.client.Get(url)
	if err != nil {
		s.tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.tb.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		s.tb.Fatalf("GET %s: %v", url, err)
	}
}

// parkOne parks a call through the API and returns its id once its run is
// waiting (and has had a moment to let its driver go).
func (s parkedServer) parkOne(base string) string {
	s.tb.Helper()
	status, body := post(s.tb, s.client, base+"/v1/conversations", `{}`)
	var conv struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &conv); err != nil || status != http.StatusCreated {
		s.tb.Fatalf("create conversation: %d %s", status, body)
	}
	if status, body := post(s.tb, s.client, base+"/v1/conversations/"+conv.ID+"/messages", `{"content":"go"}`); status != http.StatusAccepted {
		s.tb.Fatalf("send: %d %s", status, body)
	}
	for t0 := time.Now(); time.Since(t0) < waitLimit; time.Sleep(2 * time.Millisecond) {
		var detail struct {
			ToolCalls []struct {
				ID     string `json:"id"`
				RunID  string `json:"run_id"`
				Status string `json:"status"`
			} `json:"tool_calls"`
		}
		s.get(base+"/v1/conversations/"+conv.ID, &detail)
		if len(detail.ToolCalls) == 1 && detail.ToolCalls[0].Status == "requires_confirmation" && s.runStatus(base, detail.ToolCalls[0].RunID) == "waiting" {
			time.Sleep(20 * time.Millisecond)
			return detail.ToolCalls[0].ID
		}
	}
	s.tb.Fatal("the call was not parked")
	return ""
}

func (s parkedServer) runStatus(base, runID string) string {
	var run struct {
		Status string `json:"status"`
	}
	s.get(base+"/v1/runs/"+runID, &run)
	return run.Status
}

// decide approves call id and returns the time from just before the POST
// to the tool's start mark, and the POST's round trip. It returns once
// the call's run has finished.
func (s parkedServer) decide(base, id string) (latency, rtt time.Duration) {
	s.tb.Helper()
	var call struct {
		RunID string `json:"run_id"`
	}
	s.get(base+"/v1/tool-calls/"+id, &call)
	if err := os.Remove(s.mark); err != nil && !os.IsNotExist(err) {
		s.tb.Fatal(err)
	}
	t0 := time.Now()
	status, body := post(s.tb, s.client, base+"/v1/tool-calls/"+id+"/approval", `{"decision":"approve"}`)
	rtt = time.Since(t0)
	if status != http.StatusOK {
		s.tb.Fatalf("approve %s: %d %s", id, status, body)
	}
	var started time.Time
	for started.IsZero() {
		if b, err := os.ReadFile(s.mark); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				started = time.Unix(0, n)
			}
		}
		if time.Since(t0) > waitLimit {
			s.tb.Fatalf("the approved call %s did not start", id)
		}
		time.Sleep(100 * time.Microsecond)
	}
	for s.runStatus(base, call.RunID) != "completed" {
		if time.Since(t0) > waitLimit {
			s.tb.Fatalf("run %s did not complete", call.RunID)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return started.Sub(t0), rtt
}

// procStatus returns a "kB" field of /proc/<pid>/status in bytes (0 where
// there is no /proc).
func procStatus(tb testing.TB, pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("/proc status %s: %q", field, line)
			}
			return kb << 10
		}
	}
	return 0
}

// openFiles counts the process's open file descriptors (0 without /proc).
func openFiles(pid int) int {
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(fds)
}

var (
	agentdOnce sync.Once
	agentdPath string
	agentdErr  error
)

// agentdBinary builds cmd/agentd once per test binary and returns the path
// of the executable.
func agentdBinary(tb testing.TB) string {
	tb.Helper()
	agentdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentd-bench-bin-")
		if err != nil {
			agentdErr = err
			return
		}
		agentdPath = filepath.Join(dir, "agentd")
		if out, err := exec.Command("go", "build", "-o", agentdPath, "../cmd/agentd").CombinedOutput(); err != nil {
			agentdErr = fmt.Errorf("go build cmd/agentd: %v\n%s", err, out)
		}
	})
	if agentdErr != nil {
		tb.Fatal(agentdErr)
	}
	return agentdPath
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func maxDuration(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// parkedTable is BenchmarkParkedScale's report.
func parkedTable(cfg parkedConfig, large, small parkedFigures) string {
	var t strings.Builder
	fmt.Fprintf(&t, "parked-call scale: the cmd/agentd binary on %d parked calls (each in its own waiting run) vs 1; ulimit -n %d\n",
		cfg.parked, parkedNoFile)
	fmt.Fprintf(&t, "  %-44s %14s %14s %8s\n", "", fmt.Sprintf("%d parked", large.parked), "1 parked", "ratio")
	row := func(name string, l, s float64, unit string) {
		fmt.Fprintf(&t, "  %-44s %11.2f %-2s %11.2f %-2s %7.2f×\n", name, l, unit, s, unit, l/s)
	}
	for i, d := range large.starts {
		row(fmt.Sprintf("start → /readyz, start %d", i+1), ms(d), ms(small.starts[0]), "ms")
	}
	row("RSS idle after start (VmRSS)", mib(large.idleRSS), mib(small.idleRSS), "Mi")
	row("peak RSS (VmHWM)", mib(large.hwm), mib(small.hwm), "Mi")
	row("open files after start", float64(large.fds), float64(small.fds), "")
	row(fmt.Sprintf("GET /v1/approvals page p50 (%d; 50 calls vs 1)", large.page.n), ms(large.page.p50), ms(small.page.p50), "ms")
	row("GET /v1/approvals page p99", ms(large.page.p99), ms(small.page.p99), "ms")
	for _, q := range filterQueries {
		l, sm := large.filtered[q.name], small.filtered[q.name]
		row("  by "+q.name+" p50", ms(l.p50), ms(sm.p50), "ms")
		row("  by "+q.name+" p99", ms(l.p99), ms(sm.p99), "ms")
	}
	l, sm := large.filtered["/metrics scrape"], small.filtered["/metrics scrape"]
	row("GET /metrics scrape p50", ms(l.p50), ms(sm.p50), "ms")
	row("GET /metrics scrape p99", ms(l.p99), ms(sm.p99), "ms")
	row(fmt.Sprintf("decision: POST → tool start p50 (%d)", large.decide.n), ms(large.decide.p50), ms(small.decide.p50), "ms")
	row("decision: POST → tool start max", ms(large.decide.max), ms(small.decide.max), "ms")
	row("decision: POST round trip p50", ms(large.rtt.p50), ms(small.rtt.p50), "ms")
	row("decision: POST round trip max", ms(large.rtt.max), ms(small.rtt.max), "ms")
	row("RSS after the pages and decisions", mib(large.afterRSS), mib(small.afterRSS), "Mi")
	fmt.Fprintf(&t, "  (targets at 100,000 parked: start ≤ 1 s, idle RSS ≤ 100 MiB, page p99 ≤ 10 ms, decision ratio ≈ 1)\n")
	return t.String()
}
