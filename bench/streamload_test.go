package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/replicas"
)

// BenchmarkStreamingLoad is issue 19's load run, tried as a user would: the
// real agentd binary (a separate process, so that its CPU is its own) on
// the embedded SQLite store, AGENTD_BENCH_CONVS conversations (default
// 500) each with one SSE client over loopback, all sent a message at the
// same moment; the script model answers each with AGENTD_BENCH_DELTAS
// text_delta events (default 50, four words each). A round ends when every
// client has read its run_finished. Beside it, in the same run and on the
// same disk, the same number of events as one durable commit per event and
// as 64 events per commit (BenchmarkGroupCommit's floors).
//
// Reported: persisted events/s (every event of the round: run_started,
// message, the deltas, run_finished …, counted once, when its client has it)
// and its ratio to each floor; text_delta latency from the event's
// timestamp (set by the loop when it drafts the event, before its commit)
// to the client's read, p50/p99; the server's CPU per event (user+system
// of the agentd process over the round, from /proc); the server's CPU per
// turn all-in (creating the conversation and opening its stream too, as a
// user's first turn costs: issue 38); its peak RSS. Each
// client checks its ids are gap-free and its deltas are 1..n in order.
//
//	go test -run '^$' -bench StreamingLoad -benchtime 1x ./bench/
//
// The script streams its deltas as fast as the server takes them; with
// AGENTD_BENCH_DELTA_INTERVAL=20ms it paces them like a model (the script's
// delta_interval), which the text_delta latency figures mean most with:
// a delta's timestamp is when the model produced it.
//
// With AGENTD_BENCH_INPROCESS=1 the server runs in the benchmark's own
// process instead (the harness of the other benchmarks), and
// AGENTD_BENCH_CPUPROFILE=file writes a CPU profile of the rounds only (not
// the floors); its CPU per event then includes the clients'.
func BenchmarkStreamingLoad(b *testing.B) {
	convs, deltas := envInt("AGENTD_BENCH_CONVS", 500), envInt("AGENTD_BENCH_DELTAS", 50)
	rounds := iterations(b, "AGENTD_BENCH_ROUNDS", 1)
	dir := benchDir(b)
	srv := startLoadServer(b, dir, deltas)
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 2 * convs, MaxIdleConnsPerHost: 2 * convs, DisableCompression: true,
	}}
	var total loadRound
	stopProfile := startProfile(b, os.Getenv("AGENTD_BENCH_CPUPROFILE"))
	b.ResetTimer()
	for r := range rounds {
		round := runLoadRound(b, client, srv, convs, deltas)
		b.Logf("round %d: %d events in %v, cpu %v", r, round.events, round.wall, round.cpu)
		total.add(round)
	}
	b.StopTimer()
	stopProfile()
	one, batch := loadFloors(b, dir, convs, int(total.events)/(rounds*convs))
	rate := float64(total.events) / total.wall.Seconds()
	slices.Sort(total.lat)
	p50, p99 := percentile(total.lat, 50), percentile(total.lat, 99)
	cpuPer := float64(total.cpu.Microseconds()) / float64(total.events)
	turnCPU := float64(total.turnCPU.Microseconds()) / float64(total.turns)
	rss := srv.peakRSS()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(rate/one, "ratio-to-one")
	b.ReportMetric(rate/batch, "ratio-to-batch64")
	b.ReportMetric(ms(p50), "delta-p50-ms")
	b.ReportMetric(ms(p99), "delta-p99-ms")
	b.ReportMetric(cpuPer, "cpu-µs/event")
	b.ReportMetric(turnCPU, "cpu-µs/turn")
	b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MiB")
	report(b, fmt.Sprintf("BenchmarkStreamingLoad: %d conversations × %d deltas, one SSE client each, %d round(s), %s\n"+
		"  %-44s %12.0f\n  %-44s %12.0f\n  %-44s %12.0f\n  %-44s %12.2f\n  %-44s %12.2f\n"+
		"  %-44s %12.2f\n  %-44s %12.2f\n  %-44s %12.1f\n  %-44s %12.1f\n  %-44s %12.1f\n",
		convs, deltas, rounds, srv.kind,
		"agentd: persisted events/s, delivered", rate,
		"floor: one commit per event (events/s)", one,
		"floor: 64 events per commit (events/s)", batch,
		"ratio agentd / one per commit", rate/one,
		"ratio agentd / 64 per commit", rate/batch,
		"text_delta timestamp → client p50 (ms)", ms(p50),
		"text_delta timestamp → client p99 (ms)", ms(p99),
		"server CPU per event (µs)", cpuPer,
		"server CPU per turn, all-in (µs)", turnCPU,
		"server peak RSS (MiB)", float64(rss)/(1<<20)))
}

// loadServer is the agentd under load: the real binary, or the in-process
// harness.
type loadServer struct {
	base string
	kind string
	pid  int // the process whose CPU is measured
}

// cpu returns the user+system CPU time the server's process has used.
func (s loadServer) cpu(tb testing.TB) time.Duration {
	tb.Helper()
	if s.pid == os.Getpid() {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			tb.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime and stime are fields 14 and 15, in clock ticks (100 per second
	// on Linux).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// peakRSS returns the server process's peak resident set (VmHWM), in bytes.
func (s loadServer) peakRSS() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadText is the script model's answer: deltas × four words, which the
// script streams as that many text_delta events; one word for one delta.
func loadText(deltas int) string {
	if deltas == 1 {
		return "w0" // a one-word reply, one delta (the script splits four words into four)
	}
	words := make([]string, 0, 4*deltas)
	for i := range 4 * deltas {
		words = append(words, "w"+strconv.Itoa(i))
	}
	return strings.Join(words, " ")
}

// startLoadServer starts agentd for the load run: the binary built from
// ../cmd/agentd, or the in-process harness with AGENTD_BENCH_INPROCESS=1.
func startLoadServer(b *testing.B, dir string, deltas int) loadServer {
	b.Helper()
	reply := map[string]any{"text": loadText(deltas)}
	if every := os.Getenv("AGENTD_BENCH_DELTA_INTERVAL"); every != "" {
		reply["delta_interval"] = every // a model's pace: a delta every so often
	}
	rules := mustJSON([]map[string]any{{"when": map[string]string{"user": "."}, "reply": reply}})
	if os.Getenv("AGENTD_BENCH_INPROCESS") == "1" {
		inst := startAgentd(b, dir, rules, nil)
		return loadServer{base: inst.base, kind: "in-process", pid: os.Getpid()}
	}
	bin := replicas.Binary(b) // the one build of this test process
	proj := filepath.Join(dir, "project")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		b.Fatal(err)
	}
	agent := `{"name":"bench","system_prompt":"You are a benchmark agent.","model":{"provider":"script","script":{"rules":` + rules + `}}}`
	if err := os.WriteFile(filepath.Join(proj, "agent.json"), []byte(agent), 0o644); err != nil {
		b.Fatal(err)
	}
	// A stream limit above the load: every client is the one dev key.
	cfg := `{"limits":{"max_streams_per_key":100000}}`
	if err := os.WriteFile(filepath.Join(proj, "agentd.json"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--project", proj, "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "AGENTD_LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		b.Fatalf("agentd did not start: %v\n%s", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return loadServer{base: strings.TrimSpace(strings.TrimPrefix(line, "agentd listening on ")), kind: "agentd binary",
		pid: cmd.Process.Pid}
}

// loadRound is what one round measured.
type loadRound struct {
	events int64
	wall   time.Duration
	cpu    time.Duration
	// turnCPU is the server's CPU over the whole turn of every client:
	// creating its conversation and opening its stream too (issue 38).
	turnCPU time.Duration
	turns   int
	lat     []time.Duration // text_delta timestamp → client read
}

func (r *loadRound) add(o loadRound) {
	r.events += o.events
	r.wall += o.wall
	r.cpu += o.cpu
	r.turnCPU += o.turnCPU
	r.turns += o.turns
	r.lat = append(r.lat, o.lat...)
}

// runLoadRound creates convs conversations, opens one stream each, sends
// every conversation a message at once and waits for every run_finished.
func runLoadRound(b *testing.B, client *http.Client, srv loadServer, convs, deltas int) loadRound {
	b.Helper()
	ids := make([]string, convs)
	turn0 := srv.cpu(b)
	parallel(b, convs, func(i int) error {
		status, body := post(b, client, srv.base+"/v1/conversations", `{}`)
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &c); status != http.StatusCreated || err != nil || c.ID == "" {
			return fmt.Errorf("create conversation: %d %s", status, body)
		}
		ids[i] = c.ID
		return nil
	})
	clients := make([]*loadClient, convs)
	parallel(b, convs, func(i int) error {
		c, err := openLoadClient(srv.base+"/v1/conversations/"+ids[i]+"/events", deltas)
		clients[i] = c
		return err
	})
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	cpu0, t0 := srv.cpu(b), time.Now()
	parallel(b, convs, func(i int) error {
		status, body := post(b, client, srv.base+"/v1/conversations/"+ids[i]+"/messages", `{"content":"stream"}`)
		if status != http.StatusAccepted {
			return fmt.Errorf("send message: %d %s", status, body)
		}
		return nil
	})
	var round loadRound
	for _, c := range clients {
		if err := c.wait(2 * time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	cpu1 := srv.cpu(b)
	round.wall, round.cpu, round.turnCPU, round.turns = time.Since(t0), cpu1-cpu0, cpu1-turn0, convs
	for _, c := range clients {
		round.events += c.events
		round.lat = append(round.lat, c.lat...)
	}
	return round
}

// parallel runs f(0..n-1) on 64 goroutines and fails on the first error.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// loadClient is one SSE client of the load run: it reads its
// conversation's stream until run_finished, checks the ids are gap-free and
// the deltas arrive in order, and records each text_delta's latency.
type loadClient struct {
	resp   *http.Response
	done   chan error
	events int64
	lat    []time.Duration
}

func openLoadClient(url string, deltas int) (*loadClient, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Transport: streamTransport}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("stream: %s", resp.Status)
	}
	c := &loadClient{resp: resp, done: make(chan error, 1), lat: make([]time.Duration, 0, deltas)}
	go func() { c.done <- c.read(deltas) }()
	return c, nil
}

// streamTransport carries the load run's streams, one connection each.
var streamTransport = &http.Transport{MaxIdleConnsPerHost: 1 << 16, DisableCompression: true}

func (c *loadClient) read(deltas int) error {
	br := bufio.NewReaderSize(c.resp.Body, 8<<10)
	var last int64
	var typ string
	var data []byte
	seen := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("stream ended after id %d: %v", last, err)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, _ := strconv.ParseInt(string(line[4:]), 10, 64)
			if last != 0 && id != last+1 {
				return fmt.Errorf("id %d after %d", id, last)
			}
			last = id
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data[:0], line[6:]...)
		case len(line) == 0 && typ != "":
			now := time.Now()
			c.events++
			switch typ {
			case "text_delta":
				if err := checkDelta(data, seen); err != nil {
					return err
				}
				seen++
				c.lat = append(c.lat, now.Sub(eventTime(data)))
			case "run_finished":
				if seen != deltas {
					return fmt.Errorf("run_finished after %d deltas, want %d", seen, deltas)
				}
				return nil
			}
			typ = ""
		}
	}
}

// checkDelta checks the i-th delta carries words 4i..4i+3 of loadText.
func checkDelta(data []byte, i int) error {
	var d struct {
		Delta string `json:"delta"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	if f := strings.Fields(d.Delta); len(f) == 0 || f[0] != "w"+strconv.Itoa(4*i) {
		return fmt.Errorf("delta %d is %q", i, d.Delta)
	}
	return nil
}

// eventTime returns an event's timestamp field.
func eventTime(data []byte) time.Time {
	const key = `"timestamp":"`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return time.Time{}
	}
	rest := data[i+len(key):]
	t, _ := time.Parse(time.RFC3339Nano, string(rest[:bytes.IndexByte(rest, '"')]))
	return t
}

func (c *loadClient) wait(d time.Duration) error {
	select {
	case err := <-c.done:
		return err
	case <-time.After(d):
		return fmt.Errorf("no run_finished within %v", d)
	}
}

func (c *loadClient) close() {
	if c != nil {
		c.resp.Body.Close()
	}
}

// loadFloors measures, on the benchmark's disk, the events of a round
// (convs × per) as one durable commit per event and as 64 per commit.
func loadFloors(b *testing.B, dir string, convs, per int) (one, batch float64) {
	b.Helper()
	of, bf := openAppendFloor(b, filepath.Join(dir, "one.db")), openAppendFloor(b, filepath.Join(dir, "batch.db"))
	defer of.Close()
	defer bf.Close()
	ids := make([]string, convs)
	for i := range ids {
		ids[i] = "conv_" + strconv.Itoa(i)
		of.create(b, ids[i])
		bf.create(b, ids[i])
	}
	data := []byte(`{"run_id":"run_bench","message_id":"msg_bench","delta":"w0 w1 w2 w3 "}`)
	t0 := time.Now()
	for range per {
		for _, c := range ids {
			of.append(b, c, data)
		}
	}
	t1 := time.Now()
	bf.appendBatches(b, ids, per, 64, data)
	n := float64(convs * per)
	return n / t1.Sub(t0).Seconds(), n / time.Since(t1).Seconds()
}

// startProfile writes a CPU profile of this process to path until the
// returned function is called; with no path it does nothing.
func startProfile(b *testing.B, path string) func() {
	b.Helper()
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
