package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd"
)

// TestMigrateFeedBackfill opens a database written by a binary that knew
// migrations up to 0004 only: its events get positions conversation by
// conversation (creation time, then id), each conversation in Seq order,
// and their conversation's tenant and project; the log stays append-only,
// and new events continue after the backfilled ones.
func TestMigrateFeedBackfill(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentd.db")
	old, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.ToSlash(path)}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := old.ExecContext(ctx, q, args...); err != nil {
			old.Close()
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	for _, m := range ms {
		if m.version > 4 {
			break
		}
		exec(m.sql)
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name)
	}
	// conv_b is the oldest, though not first by id; conv_a and conv_c share a
	// creation time, so their ids decide.
	convs := []struct {
		id, tenant, project string
		created             int64
	}{{"conv_c", "t1", "p3", 2000}, {"conv_b", "t1", "p1", 1000}, {"conv_a", "t2", "p2", 2000}}
	for _, c := range convs {
		exec(`INSERT INTO conversations (id, tenant_id, project_id, agent, delegated, created_at, last_seq) VALUES (?, ?, ?, 'a', 0, ?, 3)`,
			c.id, c.tenant, c.project, c.created)
		for seq := 3; seq >= 1; seq-- { // inserted out of order: Seq decides
			exec(`INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, 'message', ?)`, c.id, seq, fmt.Sprintf(`{"s":%d}`, seq))
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.EventsAfter(ctx, agentd.FeedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		conv, tenant, project string
		seq                   int64
	}{{"conv_b", "t1", "p1", 1}, {"conv_b", "t1", "p1", 2}, {"conv_b", "t1", "p1", 3},
		{"conv_a", "t2", "p2", 1}, {"conv_a", "t2", "p2", 2}, {"conv_a", "t2", "p2", 3},
		{"conv_c", "t1", "p3", 1}, {"conv_c", "t1", "p3", 2}, {"conv_c", "t1", "p3", 3}}
	if len(got) != len(want) {
		t.Fatalf("%d events after the migration, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		if e.Position != int64(i+1) || e.ConversationID != w.conv || e.Seq != w.seq || e.TenantID != w.tenant || e.ProjectID != w.project ||
			string(e.Data) != fmt.Sprintf(`{"s":%d}`, w.seq) {
			t.Errorf("event %d = %+v (data %s), want position %d %+v", i, e, e.Data, i+1, w)
		}
	}
	if _, err := db.writer.ExecContext(ctx, `UPDATE events SET type = 'x'`); err == nil {
		t.Error("UPDATE events succeeded after the migration: the log is not append-only any more")
	}
	evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "conv_a", Type: agentd.EventError}})
	if err != nil || len(evs) != 1 || evs[0].Position != 10 || evs[0].Seq != 4 || evs[0].TenantID != "t2" {
		t.Fatalf("append after the migration = %+v, %v; want position 10, seq 4, tenant t2", evs, err)
	}
}
