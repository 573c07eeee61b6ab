package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// dataEvent is one SSE event with its data, as read by followData.
type dataEvent struct {
	typ  string
	data map[string]any
	at   time.Time
}

// followData opens conv's stream on base and sends every event, with its
// decoded data, to the returned channel until tb ends.
func followData(tb testing.TB, c *http.Client, base, conv string) <-chan dataEvent {
	tb.Helper()
	resp := openConvStream(tb, c, base, conv)
	ch := make(chan dataEvent, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		var ev dataEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.typ != "":
				ev.at = time.Now()
				ch <- ev
				ev = dataEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.data)
			}
		}
	}()
	return ch
}

// waitData reads ch until an event of type typ.
func waitData(tb testing.TB, ch <-chan dataEvent, typ string) dataEvent {
	tb.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case ev := <-ch:
			if ev.typ == typ {
				return ev
			}
		case <-timeout:
			tb.Fatalf("no %s in time", typ)
		}
	}
}

// newConv creates a conversation on base and returns its id.
func newConv(tb testing.TB, c *http.Client, base string) string {
	tb.Helper()
	code, body := post(tb, c, base+"/v1/conversations", `{}`)
	var conv struct{ ID string }
	if code != http.StatusCreated || json.Unmarshal(body, &conv) != nil {
		tb.Fatalf("create conversation: %d %s", code, body)
	}
	return conv.ID
}

// processApprovalSample parks one call on the agentd process at base,
// approves it and returns the time from just before the POST to the tool's
// start mark; it returns once the run has finished.
func processApprovalSample(b *testing.B, c *http.Client, base, mark string) time.Duration {
	b.Helper()
	conv := newConv(b, c, base)
	evs := followData(b, c, base, conv)
	if code, body := post(b, c, base+"/v1/conversations/"+conv+"/messages", `{"content":"go"}`); code != http.StatusAccepted {
		b.Fatalf("send: %d %s", code, body)
	}
	callID, _ := waitData(b, evs, "confirmation_required").data["tool_call_id"].(string)
	waitData(b, evs, "run_waiting")
	if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	t0 := time.Now()
	if code, body := post(b, c, base+"/v1/tool-calls/"+callID+"/approval", `{"decision":"approve"}`); code != http.StatusOK {
		b.Fatalf("approve: %d %s", code, body)
	}
	waitData(b, evs, "run_finished")
	return readMark(b, mark).Sub(t0)
}

// BenchmarkApprovalLatencyStores measures approval POST → tool process
// start on two real `agentd serve` processes of the same project, one on
// SQLite (the file under --data, synchronous=FULL) and one on PostgreSQL (a
// server of its own from pgtest.NewServer with fsync and synchronous_commit
// on, over its unix socket, data in the temp dir: the same disk), samples
// interleaved in one run. The tool is
// testdata/markhelper, as in BenchmarkApprovalLatency (which compares the
// in-process engine with its floor). AGENTD_BENCH_SAMPLES sets the samples
// of each (default 50; docs/performance.md §21 used 100).
//
//	go test -run '^$' -bench ApprovalLatencyStores -benchtime 1x ./bench/
func BenchmarkApprovalLatencyStores(b *testing.B) {
	helper := markHelper(b)
	project := b.TempDir()
	agent := `{"name":"bench","model":{"provider":"script","script":{"rules":` + approvalRules + `}}}`
	td := filepath.Join(project, "tools", "mark")
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.MkdirAll(td, 0o755))
	must(os.WriteFile(filepath.Join(project, "agent.json"), []byte(agent), 0o644))
	tool, _ := json.Marshal(map[string]any{"name": "mark", "description": "benchmark tool mark", "command": []string{helper},
		"env": []string{markEnv}, "exposure": map[string]string{"kind": "requires-confirmation"}})
	must(os.WriteFile(filepath.Join(td, "tool.json"), tool, 0o644))
	markS, markP := filepath.Join(b.TempDir(), "mark"), filepath.Join(b.TempDir(), "mark")
	lite := replicas.Add(b, "sqlite", replicas.Options{Project: project, Env: []string{markEnv + "=" + markS}})
	// A durable server of its own: the shared test server runs with fsync
	// off, SQLite here with synchronous=FULL.
	srv := pgtest.NewServer(b, "fsync=on", "synchronous_commit=on")
	pg := replicas.Add(b, "postgres", replicas.Options{Project: project, DatabaseURL: srv.URL, Env: []string{markEnv + "=" + markP}})
	client := newClient()
	for range 5 {
		processApprovalSample(b, client, lite.Base, markS)
		processApprovalSample(b, client, pg.Base, markP)
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 50)
	var sl, pl []time.Duration
	b.ResetTimer()
	for i := range n {
		if i%2 == 0 {
			sl = append(sl, processApprovalSample(b, client, lite.Base, markS))
			pl = append(pl, processApprovalSample(b, client, pg.Base, markP))
		} else {
			pl = append(pl, processApprovalSample(b, client, pg.Base, markP))
			sl = append(sl, processApprovalSample(b, client, lite.Base, markS))
		}
	}
	b.StopTimer()
	s, p := summarize(sl), summarize(pl)
	b.ReportMetric(ms(s.p50), "sqlite-p50-ms")
	b.ReportMetric(ms(s.p99), "sqlite-p99-ms")
	b.ReportMetric(ms(p.p50), "postgres-p50-ms")
	b.ReportMetric(ms(p.p99), "postgres-p99-ms")
	b.ReportMetric(float64(p.p50)/float64(s.p50), "ratio-p50")
	var t strings.Builder
	fmt.Fprintf(&t, "approval POST → tool process start, agentd serve on SQLite vs PostgreSQL, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-28s %9s %9s %9s %9s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-28s %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), ms(s.mean))
	}
	row("SQLite (baseline)", s)
	row("PostgreSQL", p)
	fmt.Fprintf(&t, "  %-28s %9.2f %9.2f %9.2f\n", "ratio PostgreSQL / SQLite",
		float64(p.p50)/float64(s.p50), float64(p.p90)/float64(s.p90), float64(p.p99)/float64(s.p99))
	report(b, t.String())
}

// replicaThroughput runs n replicas on a database of their own, with
// workers clients per replica, each doing rounds runs (one message, the
// script model streaming a 60-word answer) one after the other on
// conversations of its own, and returns the events persisted per second:
// the rows in the events table over the wall time from the first send to
// the last run_finished.
func replicaThroughput(b *testing.B, srv *pgtest.Server, project string, n, workers, rounds int) (float64, int) {
	name := fmt.Sprintf("replicas_%d", n)
	pgtest.Exec(b, srv.URL, "CREATE DATABASE "+name)
	u := pgtest.WithDatabase(b, srv.URL, name)
	rs := replicas.Start(b, replicas.Options{N: n, Project: project, DatabaseURL: u})
	client := newClient()
	processRound(b, client, rs[0].Base) // warm up
	var before int
	conn := pgtest.Conn(b, u)
	if err := conn.QueryRow(context.Background(), "SELECT COUNT(*) FROM events").Scan(&before); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range rs {
		for range workers {
			wg.Go(func() {
				for range rounds {
					processRound(b, client, r.Base)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	var after int
	if err := conn.QueryRow(context.Background(), "SELECT COUNT(*) FROM events").Scan(&after); err != nil {
		b.Fatal(err)
	}
	return float64(after-before) / elapsed.Seconds(), after - before
}

// processRound sends one "talk" message on a new conversation on base and
// waits for its run_finished.
func processRound(b *testing.B, c *http.Client, base string) {
	conv := newConv(b, c, base)
	evs := followStream(b, c, base, conv)
	if code, body := post(b, c, base+"/v1/conversations/"+conv+"/messages", `{"content":"talk"}`); code != http.StatusAccepted {
		b.Fatalf("send: %d %s", code, body)
	}
	untilFinished(b, evs)
}

// BenchmarkReplicaThroughput measures the events persisted per second by 1,
// 2 and 3 agentd replicas on one PostgreSQL database (a durable server of
// its own: fsync and synchronous_commit on), each replica with 4
// concurrent clients running one message after another (18 events a run);
// the ratio is to 1 replica in the same run. On a machine with fewer cores
// than replicas plus PostgreSQL, more replicas share the same CPUs: the
// figure then shows the cost of the shared database and the fan-out, not
// added capacity. AGENTD_BENCH_REPLICA_ROUNDS sets the runs per client
// (default 5; docs/performance.md §21 used 10).
//
//	go test -run '^$' -bench ReplicaThroughput -benchtime 1x ./bench/
func BenchmarkReplicaThroughput(b *testing.B) {
	rounds := iterations(b, "AGENTD_BENCH_REPLICA_ROUNDS", 5)
	project := b.TempDir()
	agent := `{"name":"bench","model":{"provider":"script","script":{"rules":[{"when":{"user":"^talk"},"reply":{"text":` + mustJSON(fanoutText) + `}}]}}}`
	if err := os.WriteFile(filepath.Join(project, "agent.json"), []byte(agent), 0o644); err != nil {
		b.Fatal(err)
	}
	const workers = 4
	srv := pgtest.NewServer(b, "fsync=on", "synchronous_commit=on") // durable, as in production
	b.ResetTimer()
	var rates [3]float64
	var counts [3]int
	for i := range rates {
		rates[i], counts[i] = replicaThroughput(b, srv, project, i+1, workers, rounds)
	}
	b.StopTimer()
	var t strings.Builder
	fmt.Fprintf(&t, "events persisted per second, N replicas on one PostgreSQL, %d clients per replica, %d runs each\n", workers, rounds)
	fmt.Fprintf(&t, "  %-12s %9s %12s %12s\n", "replicas", "events", "events/s", "ratio to 1")
	for i, r := range rates {
		b.ReportMetric(r, strconv.Itoa(i+1)+"-replicas-events/s")
		fmt.Fprintf(&t, "  %-12d %9d %12.0f %12.2f\n", i+1, counts[i], r, r/rates[0])
	}
	report(b, t.String())
}
