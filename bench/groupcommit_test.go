package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
)

// BenchmarkGroupCommit measures persisted events per second when many
// writers append at once — 500 goroutines (AGENTD_BENCH_WRITERS), each
// appending 50 text_delta events (AGENTD_BENCH_EVENTS) to its own
// conversation, one store.AppendEvents per event, as the loop streams a
// reply — against two floors on files with the same pragmas (WAL,
// synchronous=FULL), measured in turn in the same run,
// AGENTD_BENCH_ROUNDS rounds (default 3) of all three:
//
//   - one: the same events appended one durable commit per event (counter
//     update and keyed insert, as BenchmarkEventAppend's floor), one writer
//     after the other: what a store without group commit is bound by;
//   - batch: the same events 64 per commit: what a writer that batched
//     events itself (and so delayed each one) would reach.
//
// Every conversation's log is checked to be 1..n afterwards.
//
//	go test -run '^$' -bench GroupCommit -benchtime 1x ./bench/
func BenchmarkGroupCommit(b *testing.B) {
	writers, per := envInt("AGENTD_BENCH_WRITERS", 500), envInt("AGENTD_BENCH_EVENTS", 50)
	rounds := iterations(b, "AGENTD_BENCH_ROUNDS", 3)
	dir := benchDir(b)
	store, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	one, batch := openAppendFloor(b, filepath.Join(dir, "one.db")), openAppendFloor(b, filepath.Join(dir, "batch.db"))
	defer one.Close()
	defer batch.Close()

	var agentdT, oneT, batchT, agentdCPU time.Duration
	self := loadServer{pid: os.Getpid()}
	b.ResetTimer()
	for r := range rounds {
		convs, drafts := benchGroupConvs(b, store, one, batch, writers)
		c0, t0 := self.cpu(b), time.Now()
		appendAll(b, store, drafts, per)
		t1 := time.Now()
		agentdCPU += self.cpu(b) - c0
		for range per {
			for _, c := range convs {
				one.append(b, c, drafts[0][0].Data)
			}
		}
		t2 := time.Now()
		batch.appendBatches(b, convs, per, 64, drafts[0][0].Data)
		agentdT, oneT, batchT = agentdT+t1.Sub(t0), oneT+t2.Sub(t1), batchT+time.Since(t2)
		checkLogs(b, store, convs, per)
		b.Logf("round %d: agentd %v, one per commit %v, 64 per commit %v", r, t1.Sub(t0), t2.Sub(t1), time.Since(t2))
	}
	b.StopTimer()
	n := float64(rounds * writers * per)
	rate := func(d time.Duration) float64 { return n / d.Seconds() }
	b.ReportMetric(rate(agentdT), "agentd-events/s")
	b.ReportMetric(float64(agentdCPU.Microseconds())/n, "agentd-cpu-µs/event")
	b.ReportMetric(rate(oneT), "one-events/s")
	b.ReportMetric(rate(batchT), "batch64-events/s")
	b.ReportMetric(rate(agentdT)/rate(oneT), "ratio-to-one")
	b.ReportMetric(rate(agentdT)/rate(batchT), "ratio-to-batch64")
	report(b, fmt.Sprintf("BenchmarkGroupCommit: %d writers × %d events, %d rounds (persisted events/s)\n"+
		"  %-40s %12.0f\n  %-40s %12.1f\n  %-40s %12.0f\n  %-40s %12.0f\n  %-40s %12.2f\n  %-40s %12.2f\n",
		writers, per, rounds,
		"agentd: store.AppendEvents, group commit", rate(agentdT),
		"agentd: process CPU per event (µs)", float64(agentdCPU.Microseconds())/n,
		"floor: one commit per event", rate(oneT),
		"floor: 64 events per commit", rate(batchT),
		"ratio agentd / one per commit", rate(agentdT)/rate(oneT),
		"ratio agentd / 64 per commit", rate(agentdT)/rate(batchT)))
}

// benchGroupConvs creates n conversations in the store and both floors, and a
// text_delta draft for each.
func benchGroupConvs(b *testing.B, store *sqlite.DB, one, batch appendFloor, n int) ([]string, [][]agentd.EventDraft) {
	b.Helper()
	ctx, now := context.Background(), time.Now().UTC()
	convs, drafts := make([]string, n), make([][]agentd.EventDraft, n)
	for i := range convs {
		c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "default", ProjectID: "default",
			Agent: "bench", CreatedAt: now}
		if err := store.CreateConversation(ctx, c); err != nil {
			b.Fatal(err)
		}
		d, err := agentd.NewEventDraft(c.ID, now, &agentd.TextDeltaPayload{RunID: "run_bench", MessageID: "msg_bench", Delta: "a token "})
		if err != nil {
			b.Fatal(err)
		}
		convs[i], drafts[i] = c.ID, []agentd.EventDraft{d}
		one.create(b, c.ID)
		batch.create(b, c.ID)
	}
	return convs, drafts
}

// appendAll appends per events to each conversation, one goroutine per
// conversation, one AppendEvents per event.
func appendAll(b *testing.B, store *sqlite.DB, drafts [][]agentd.EventDraft, per int) {
	var wg sync.WaitGroup
	for _, d := range drafts {
		wg.Go(func() {
			for range per {
				if _, err := store.AppendEvents(context.Background(), d); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// checkLogs fails unless each conversation's log is 1..per.
func checkLogs(b *testing.B, store *sqlite.DB, convs []string, per int) {
	b.Helper()
	for _, c := range convs {
		evs, err := store.Events(context.Background(), c, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				b.Fatalf("%s: event %d has seq %d", c, i, e.Seq)
			}
		}
		if len(evs) != per {
			b.Fatalf("%s: %d events, want %d", c, len(evs), per)
		}
	}
}

// appendBatches appends per events to each conversation, size events per
// commit, in the order the writers would (round by round).
func (f appendFloor) appendBatches(b *testing.B, convs []string, per, size int, data []byte) {
	b.Helper()
	var pending []string
	flush := func() {
		tx, err := f.Begin()
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback()
		for _, c := range pending {
			var seq int64
			if err := tx.QueryRow(`UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq`, c).Scan(&seq); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, 'text_delta', ?)`, c, seq, string(data)); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		pending = pending[:0]
	}
	for range per {
		for _, c := range convs {
			if pending = append(pending, c); len(pending) == size {
				flush()
			}
		}
	}
	if len(pending) > 0 {
		flush()
	}
}
