// Command markhelper is the tool process of the approval-latency benchmark.
// Its first action is to read the wall clock; it writes that instant, in
// unix nanoseconds, to the file named by $AGENTD_BENCH_MARK, then behaves
// like a well-mannered command tool: it reads its request from stdin and
// prints an empty JSON object.
//
// It is a compiled Go program rather than a shell script so that the
// measured start is not inflated by /bin/sh and date(1); the benchmark
// builds it once (go build) and uses the same binary for agentd's tool and
// for the floor's fork/exec.
package main

import (
	"io"
	"os"
	"strconv"
	"time"
)

func main() {
	now := time.Now().UnixNano()
	if path := os.Getenv("AGENTD_BENCH_MARK"); path != "" {
		_ = os.WriteFile(path, strconv.AppendInt(nil, now, 10), 0o644)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	_, _ = os.Stdout.WriteString("{}")
}
