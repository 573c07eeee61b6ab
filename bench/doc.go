// Package bench holds agentd's performance benchmarks. It has no library
// code: everything is in its _test.go files, and nothing in them asserts on
// time. A plain `go test ./bench/` runs only quick correctness checks of the
// helpers, a small parked-scale run that reports nothing
// (TestParkedScaleSmoke, skipped by -short) and the statement budget of a
// chat turn (TestTurnBudget: counts, not time); the measurements run with
// -bench:
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/
//	bench/load.sh
//
// Each benchmark measures agentd in-process — the real SQLite store on a
// file, the real SSE hub, the real loop with the script model and real
// command tools, the real echo API on a loopback listener — and, in the
// same run on the same machine, a baseline that does only the unavoidable
// work, so that every figure is reported beside a ratio. docs/performance.md
// has the figures of one run and how to read them.
//
// Where the database files go: $AGENTD_BENCH_DIR if set (put it on the disk
// you mean to measure: fsync cost is most of the story), else a temporary
// folder of the test.
package bench
