package bench

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkHubWiring compares, in one run, the two ways the SSE hub can be
// fed: directly (serve.go's wiring: the loop's commit publishes to the hub,
// and wakes the event feed) and from the event feed (the loop's commit only
// wakes the feed, whose follower re-reads the store and publishes to the
// hub).
// Two agentd instances, one per wiring, each on its own SQLite file, and
// the floor of BenchmarkApprovalLatency take approval samples in turn,
// rotating which goes first, so that load on the machine falls on all
// three alike.
//
// Metrics: the p50 and p99 of approval POST → tool process start of each
// wiring against the floor, and feed against direct for that and for POST
// → the hub has tool_call_started (the moment an SSE stream can send it).
//
//	go test -run '^$' -bench HubWiring -benchtime 1x ./bench/
func BenchmarkHubWiring(b *testing.B) {
	helper := markHelper(b)
	dir := benchDir(b)
	mark := filepath.Join(dir, "mark")
	b.Setenv(markEnv, mark)
	defs := []toolDef{{name: "mark", command: []string{helper}, confirm: true}}
	direct := startAgentdWired(b, filepath.Join(dir, wiringDirect), approvalRules, defs, wiringDirect)
	fed := startAgentdWired(b, filepath.Join(dir, wiringFeed), approvalRules, defs, wiringFeed)
	fl := startFloor(b, dir, helper)
	client := newClient()
	for range 5 { // warm up
		direct.approvalSample(b, client, mark)
		fed.approvalSample(b, client, mark)
		fl.sample(b, client, mark)
	}

	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	var directS, fedS, floorS []approvalSample
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		take := []func(){
			func() { directS = append(directS, direct.approvalSample(b, client, mark)) },
			func() { fedS = append(fedS, fed.approvalSample(b, client, mark)) },
			func() { floorS = append(floorS, fl.sample(b, client, mark)) },
		}
		for k := range take {
			take[(i+k)%len(take)]()
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
	committed := func(s approvalSample) time.Duration { return s.committed }
	d, f, fl0 := col(directS, latency), col(fedS, latency), col(floorS, latency)
	dHub, fHub := col(directS, committed), col(fedS, committed)
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(ratio(d.p50, fl0.p50), "direct/floor-p50")
	b.ReportMetric(ratio(f.p50, fl0.p50), "feed/floor-p50")
	b.ReportMetric(ratio(f.p50, d.p50), "feed/direct-p50")
	b.ReportMetric(ratio(fHub.p50, dHub.p50), "hub-feed/direct-p50")

	var t strings.Builder
	fmt.Fprintf(&t, "SSE hub fed from the event feed vs directly, %d approval samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-44s %9s %9s %9s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "mean ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-44s %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.mean))
	}
	row("feed:   POST → tool start", f)
	row("direct: POST → tool start", d)
	row("floor:  POST → tool start", fl0)
	fmt.Fprintf(&t, "  %-44s %9.2f %9s %9.2f\n", "ratio feed / floor", ratio(f.p50, fl0.p50), "", ratio(f.p99, fl0.p99))
	fmt.Fprintf(&t, "  %-44s %9.2f %9s %9.2f\n", "ratio direct / floor", ratio(d.p50, fl0.p50), "", ratio(d.p99, fl0.p99))
	fmt.Fprintf(&t, "  %-44s %9.2f %9s %9.2f\n", "ratio feed / direct", ratio(f.p50, d.p50), "", ratio(f.p99, d.p99))
	row("feed:   POST → the hub has tool_call_started", fHub)
	row("direct: POST → the hub has tool_call_started", dHub)
	fmt.Fprintf(&t, "  %-44s %9.2f %9s %9.2f\n", "ratio feed / direct", ratio(fHub.p50, dHub.p50), "", ratio(fHub.p99, dHub.p99))
	report(b, t.String())
}
