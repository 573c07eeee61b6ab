package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/seed"
)

// BenchmarkParkedStart measures what parked calls cost a server at start:
// the cmd/agentd binary (or each of $AGENTD_BENCH_BINS, "name=path,..."),
// started on a SQLite file seeded once with $AGENTD_BENCH_PARKED parked
// calls (default 20,000; deadlines a day away, so nothing is due), under
// ulimit -n 1024. The binaries take turns, $AGENTD_BENCH_ROUNDS rounds
// (default 3), so that the machine's load falls on each alike. For each
// start it reports fork/exec → /readyz, VmRSS as /readyz first answers
// ("at ready"), and VmRSS and VmHWM one second later. Nothing is asserted.
//
//	AGENTD_BENCH_BINS=base=/tmp/agentd-base,new=/tmp/agentd-new AGENTD_BENCH_PARKED=100000 \
//	  go test -run '^$' -bench ParkedStart -benchtime 1x -timeout 30m ./bench/
func BenchmarkParkedStart(b *testing.B) {
	n, rounds := envInt("AGENTD_BENCH_PARKED", 20000), envInt("AGENTD_BENCH_ROUNDS", 3)
	bins := benchBinaries(b)
	dir := benchDir(b)
	project := writeParkedProject(b, filepath.Join(dir, "project"), markHelper(b))
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(24 * time.Hour)
	if _, err := (seed.Parked{Agent: "bench", Tool: "mark", Deadline: func(int) time.Time { return deadline }}).
		Write(context.Background(), filepath.Join(data, "agentd.db"), n); err != nil {
		b.Fatal(err)
	}
	type figures struct{ ready, atReady, idle, hwm []float64 }
	got := map[string]*figures{}
	b.ResetTimer()
	for range b.N {
		for r := range rounds {
			for _, bin := range bins {
				srv := parkedServer{tb: b, bin: bin[1], project: project, mark: filepath.Join(dir, "mark"), client: newClient()}
				p := srv.start(data, r)
				pid := p.cmd.Process.Pid
				at := procStatus(b, pid, "VmRSS")
				time.Sleep(time.Second)
				f := got[bin[0]]
				if f == nil {
					f = &figures{}
					got[bin[0]] = f
				}
				f.ready = append(f.ready, ms(p.ready))
				f.atReady = append(f.atReady, float64(at)/(1<<20))
				f.idle = append(f.idle, float64(procStatus(b, pid, "VmRSS"))/(1<<20))
				f.hwm = append(f.hwm, float64(procStatus(b, pid, "VmHWM"))/(1<<20))
				p.stop()
			}
		}
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "parked start: %d parked calls, %d rounds, binaries alternated\n", n, rounds)
	for _, bin := range bins {
		f := got[bin[0]]
		fmt.Fprintf(&out, "  %-6s start → /readyz ms %v | VmRSS at ready MiB %v | VmRSS 1 s later MiB %v | VmHWM MiB %v\n",
			bin[0], rounded(f.ready), rounded(f.atReady), rounded(f.idle), rounded(f.hwm))
	}
	report(b, out.String())
}

// benchBinaries are the binaries to measure, as (name, path): those of
// $AGENTD_BENCH_BINS ("name=path,..."), or this tree's cmd/agentd as "new".
func benchBinaries(tb testing.TB) [][2]string {
	env := os.Getenv("AGENTD_BENCH_BINS")
	if env == "" {
		return [][2]string{{"new", agentdBinary(tb)}}
	}
	var bins [][2]string
	for _, kv := range strings.Split(env, ",") {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			tb.Fatalf("AGENTD_BENCH_BINS: %q is not name=path", kv)
		}
		bins = append(bins, [2]string{name, path})
	}
	return bins
}

// rounded is vs, each to one decimal, in the order measured.
func rounded(vs []float64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%.1f", v)
	}
	return slices.Clip(out)
}
