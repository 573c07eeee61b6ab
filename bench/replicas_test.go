package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// arrival is one event read by a benchmark's stream client, stamped when
// its last line was read.
type arrival struct {
	id  int64
	typ string
	at  time.Time
}

// openConvStream opens conv's SSE stream on base, closed when tb ends.
func openConvStream(tb testing.TB, c *http.Client, base, conv string) *http.Response {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/conversations/"+conv+"/events", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("stream on %s: %v %v", base, err, resp)
	}
	return resp
}

// followStream opens conv's SSE stream on base and sends every event read
// to the returned channel until tb ends.
func followStream(tb testing.TB, c *http.Client, base, conv string) <-chan arrival {
	tb.Helper()
	resp := openConvStream(tb, c, base, conv)
	ch := make(chan arrival, 4096)
	go func() {
		defer resp.Body.Close()
		r := newSSEReader(resp.Body)
		for {
			id, typ, _, err := r.next()
			if err != nil {
				return
			}
			ch <- arrival{id: id, typ: typ, at: time.Now()}
		}
	}()
	return ch
}

// untilFinished reads ch until a run_finished and returns the arrivals by
// event id.
func untilFinished(tb testing.TB, ch <-chan arrival) map[int64]time.Time {
	tb.Helper()
	out := map[int64]time.Time{}
	for {
		select {
		case a := <-ch:
			out[a.id] = a.at
			if a.typ == "run_finished" {
				return out
			}
		case <-time.After(waitLimit):
			tb.Fatal("no run_finished in time")
		}
	}
}

// crossReplica measures one pair of replicas (A, B) on a database of its
// own, started with args: rounds runs of one message each, sent to A, whose
// every event is timed from its arrival on a stream from A (the commit on A,
// plus A's own hub and loopback: well under a millisecond) to its arrival on
// a stream from B.
//
// With jitter each round starts after a pause drawn evenly from 0 to jitter,
// so that its commits fall anywhere in B's poll period: back to back, every
// round would start just after the poll that ended the one before, and
// wait for nearly a whole period.
func crossReplica(b *testing.B, project string, rounds int, jitter time.Duration, args ...string) []time.Duration {
	rs := replicas.Start(b, replicas.Options{N: 2, Project: project, DatabaseURL: pgtest.NewDatabase(b, ""), Args: args})
	client := newClient()
	var lat []time.Duration
	for i := range rounds + 2 { // two warm-up rounds
		if jitter > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(jitter))))
		}
		code, body := post(b, client, rs[0].Base+"/v1/conversations", `{}`)
		var conv struct{ ID string }
		if code != http.StatusCreated || json.Unmarshal(body, &conv) != nil {
			b.Fatalf("create conversation: %d %s", code, body)
		}
		onA, onB := followStream(b, client, rs[0].Base, conv.ID), followStream(b, client, rs[1].Base, conv.ID)
		if code, body := post(b, client, rs[0].Base+"/v1/conversations/"+conv.ID+"/messages", `{"content":"talk"}`); code != http.StatusAccepted {
			b.Fatalf("send: %d %s", code, body)
		}
		a, bb := untilFinished(b, onA), untilFinished(b, onB)
		if i < 2 {
			continue
		}
		for id, at := range a {
			if atB, ok := bb[id]; ok {
				lat = append(lat, atB.Sub(at))
			} else {
				b.Fatalf("event %d reached A's stream, not B's", id)
			}
		}
	}
	return lat
}

// notifyFloor times a bare NOTIFY from one connection to a LISTEN on
// another, n times: the least a commit on one replica can take to reach
// another through PostgreSQL.
func notifyFloor(b *testing.B, n int) []time.Duration {
	u := pgtest.NewDatabase(b, "")
	listen, send := pgtest.Conn(b, u), pgtest.Conn(b, u)
	ctx := context.Background()
	if _, err := listen.Exec(ctx, "LISTEN bench_floor"); err != nil {
		b.Fatal(err)
	}
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := send.Exec(ctx, "SELECT pg_notify('bench_floor', '')"); err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		_, err := listen.WaitForNotification(wctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// BenchmarkCrossReplicaLatency measures how late an event committed on
// replica A reaches a client streaming from replica B — two real agentd
// processes (internal/replicas) on one PostgreSQL database — with B's hub
// woken by LISTEN/NOTIFY (the default) and with notifications off, B
// polling the log every second (--feed-notify=false, the default poll).
// Each round is one run of the script model streaming a 60-word answer (18
// events). The floor is a bare NOTIFY between two connections in the same
// run. AGENTD_BENCH_REPLICA_ROUNDS sets the rounds of each side (default
// 20 with NOTIFY, a quarter of that polling: each polling round waits up
// to a second, after a random pause of up to a second that spreads its
// commits over the poll period).
//
//	go test -run '^$' -bench CrossReplica -benchtime 1x ./bench/
func BenchmarkCrossReplicaLatency(b *testing.B) {
	rounds := iterations(b, "AGENTD_BENCH_REPLICA_ROUNDS", 20)
	project := b.TempDir()
	agent := `{"name":"bench","model":{"provider":"script","script":{"rules":[{"when":{"user":"^talk"},"reply":{"text":` + mustJSON(fanoutText) + `}}]}}}`
	if err := os.WriteFile(filepath.Join(project, "agent.json"), []byte(agent), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	notify := summarize(crossReplica(b, project, rounds, 0))
	polling := summarize(crossReplica(b, project, max(rounds/4, 2), time.Second, "--feed-notify=false"))
	floor := summarize(notifyFloor(b, rounds*18))
	b.StopTimer()
	b.ReportMetric(ms(notify.p50), "notify-p50-ms")
	b.ReportMetric(ms(notify.p99), "notify-p99-ms")
	b.ReportMetric(ms(polling.p50), "poll-p50-ms")
	b.ReportMetric(ms(polling.p99), "poll-p99-ms")
	b.ReportMetric(ms(floor.p50), "floor-p50-ms")
	b.ReportMetric(float64(notify.p50)/float64(floor.p50), "ratio-notify-floor-p50")

	var t strings.Builder
	fmt.Fprintf(&t, "event committed on replica A → client streaming from replica B (2 agentd processes, one PostgreSQL)\n")
	fmt.Fprintf(&t, "  %-40s %6s %9s %9s %9s %9s %9s\n", "", "n", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-40s %6d %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, s.n, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), ms(s.mean))
	}
	row("B woken by LISTEN/NOTIFY", notify)
	row("B polling every 1 s (--feed-notify=false)", polling)
	row("floor: bare NOTIFY → LISTEN", floor)
	fmt.Fprintf(&t, "  %-40s %6s %9.2f %9.2f %9.2f\n", "ratio NOTIFY / floor", "",
		float64(notify.p50)/float64(floor.p50), float64(notify.p90)/float64(floor.p90), float64(notify.p99)/float64(floor.p99))
	report(b, t.String())
}
