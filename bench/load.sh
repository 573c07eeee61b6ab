#!/usr/bin/env bash
# Runs agentd's benchmarks (package bench) and prints the machine they ran
# on, the benchmark lines and the tables with each figure beside its
# baseline. Nothing here passes or fails on time; docs/performance.md says
# how to read the output.
#
#   bench/load.sh                      # everything, 200 latency samples each
#   BENCH=ApprovalLatency bench/load.sh
#   AGENTD_BENCH_SAMPLES=1000 AGENTD_BENCH_ROUNDS=50 bench/load.sh
#   AGENTD_BENCH_DIR=/var/lib/agentd-bench bench/load.sh   # measure that disk
#   bench/load.sh -count 3            # extra arguments go to go test
#
# Environment:
#   BENCH                 benchmark name regexp (default: all, ".")
#   BENCHTIME             go test -benchtime (default 1x: each benchmark
#                         takes its own minimum number of samples)
#   AGENTD_BENCH_SAMPLES  latency samples per side (default 200)
#   AGENTD_BENCH_ROUNDS   fan-out rounds (default 20) and memory iterations (default 1)
#   AGENTD_BENCH_PARKED   parked calls of BenchmarkParkedScale (default 2000; 100000 for the target)
#                         and of BenchmarkParkedStart (default 20000)
#   AGENTD_BENCH_BINS     BenchmarkParkedStart's binaries, name=path,... taking turns (default: this tree's)
#   AGENTD_BENCH_DECISIONS decisions per server in BenchmarkParkedScale (default 20)
#   AGENTD_BENCH_DIR      folder for the SQLite files (default: a temp folder)
#   AGENTD_BENCH_IDEMPOTENT=1  ApprovalLatency with an idempotent tool (one commit)
#   AGENTD_BENCH_CONVS    StreamingLoad conversations (default 500); AGENTD_BENCH_DELTAS deltas each (50)
#   AGENTD_BENCH_WIRING   how the SSE hub is fed: direct (default, as serve.go)
#                         or feed (from the event feed); HubWiring runs both
#   OUT                   also write everything to this file
set -euo pipefail
cd "$(dirname "$0")/.."

bench=${BENCH:-.}
benchtime=${BENCHTIME:-1x}

run() {
  echo "== machine"
  echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit:   $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "uname:    $(uname -a)"
  echo "cpu:      $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || echo unknown)"
  echo "nproc:    $(nproc 2>/dev/null || echo unknown)"
  echo "go:       $(go version)"
  echo "loadavg:  $(cat /proc/loadavg 2>/dev/null || echo unknown) (before; other work on the machine skews every figure)"
  dir=${AGENTD_BENCH_DIR:-${TMPDIR:-/tmp}}
  echo "db disk:  $(df -hT "$dir" 2>/dev/null | awk 'NR==2 {print $1, $2, "mounted on", $7}') ($dir)"
  if command -v free >/dev/null; then
    echo "free -g:"
    free -g | sed 's/^/  /'
  fi
  echo
  echo "== go test -run '^\$' -bench '$bench' -benchtime $benchtime ./bench/ $*"
  go test -run '^$' -bench "$bench" -benchtime "$benchtime" -timeout 30m "$@" ./bench/
  echo "loadavg:  $(cat /proc/loadavg 2>/dev/null || echo unknown) (after)"
}

if [ -n "${OUT:-}" ]; then
  run "$@" 2>&1 | tee "$OUT"
else
  run "$@"
fi
