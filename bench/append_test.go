package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
)

// BenchmarkEventAppend measures one durable commit of one event — what
// every announced state change pays — against its floor, interleaved in the
// same run: agentd's store.AppendEvents of a prebuilt draft (the
// conversation's sequence counter, the feed position, the event row and its
// indexes, one fsynced transaction) and, on a second file with the same
// pragmas (WAL, synchronous=FULL, BEGIN IMMEDIATE), the same counter update
// and an insert into a table of events keyed by (conversation, seq) with no
// other index: the log before it had a feed. Both files hold the same
// preloaded events of 200 conversations, and both append to those
// conversations in turn.
//
//	go test -run '^$' -bench EventAppend -benchtime 1x ./bench/
func BenchmarkEventAppend(b *testing.B) {
	ctx := context.Background()
	dir := benchDir(b)
	store, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	fl := openAppendFloor(b, filepath.Join(dir, "floor.db"))
	defer fl.Close()

	const convs, preload = 200, 20
	now := time.Now().UTC()
	data := &agentd.ToolCallResultPayload{RunID: "run_bench", ToolCallID: "call_bench", ToolName: "echo", Status: agentd.StatusCompleted,
		Result: []byte(`{"ok":true,"text":"` + strings.Repeat("result ", 20) + `"}`)}
	ids := make([]string, convs)
	drafts := make([][]agentd.EventDraft, convs)
	for i := range ids {
		c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "default", ProjectID: "default",
			Agent: "bench", CreatedAt: now}
		if err := store.CreateConversation(ctx, c); err != nil {
			b.Fatal(err)
		}
		ids[i] = c.ID
		d, err := agentd.NewEventDraft(c.ID, now, data)
		if err != nil {
			b.Fatal(err)
		}
		drafts[i] = []agentd.EventDraft{d}
		fl.create(b, c.ID)
	}
	for range preload {
		for i := range ids {
			if _, err := store.AppendEvents(ctx, drafts[i]); err != nil {
				b.Fatal(err)
			}
			fl.append(b, ids[i], drafts[i][0].Data)
		}
	}

	n := iterations(b, "AGENTD_BENCH_SAMPLES", 400)
	var agentdS, floorS []time.Duration
	b.ResetTimer()
	for i := range n {
		c := i % convs
		t0 := time.Now()
		if _, err := store.AppendEvents(ctx, drafts[c]); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		fl.append(b, ids[c], drafts[c][0].Data)
		agentdS, floorS = append(agentdS, t1.Sub(t0)), append(floorS, time.Since(t1))
	}
	b.StopTimer()
	a, f := summarize(agentdS), summarize(floorS)
	b.ReportMetric(float64(a.p50.Nanoseconds()), "agentd-p50-ns")
	b.ReportMetric(float64(f.p50.Nanoseconds()), "floor-p50-ns")
	b.ReportMetric(float64(a.p50)/float64(f.p50), "ratio-p50")
	b.ReportMetric(float64(a.mean)/float64(f.mean), "ratio-mean")
	report(b, fmt.Sprintf("BenchmarkEventAppend: one event, one fsynced commit (%d samples each, interleaved; ms)\n"+
		"  %-34s %9s %9s %9s %9s\n  %-34s %9.3f %9.3f %9.3f %9.3f\n  %-34s %9.3f %9.3f %9.3f %9.3f\n  %-34s %9.2f %9.2f\n",
		n, "", "p50", "p99", "mean", "max",
		"agentd: store.AppendEvents", ms(a.p50), ms(a.p99), ms(a.mean), ms(a.max),
		"floor: counter + keyed insert", ms(f.p50), ms(f.p99), ms(f.mean), ms(f.max),
		"ratio agentd / floor (p50, mean)", float64(a.p50)/float64(f.p50), float64(a.mean)/float64(f.mean)))
}

// appendFloor is a SQLite file holding the least an event log can be.
type appendFloor struct {
	*sql.DB
}

func openAppendFloor(b *testing.B, path string) appendFloor {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.ToSlash(path)}).EscapedPath()+
		"?_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE conversations (id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL DEFAULT 0) STRICT, WITHOUT ROWID`,
		`CREATE TABLE events (conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT,
			PRIMARY KEY (conversation_id, seq)) STRICT, WITHOUT ROWID`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	return appendFloor{db}
}

func (f appendFloor) create(b *testing.B, conv string) {
	b.Helper()
	if _, err := f.Exec(`INSERT INTO conversations (id) VALUES (?)`, conv); err != nil {
		b.Fatal(err)
	}
}

func (f appendFloor) append(b *testing.B, conv string, data []byte) {
	b.Helper()
	tx, err := f.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	var seq int64
	if err := tx.QueryRow(`UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq`, conv).Scan(&seq); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, 'tool_call_result', ?)`, conv, seq, string(data)); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
