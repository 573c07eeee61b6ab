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

// oldConv is a conversation of a database from before migration 0005.
type oldConv struct {
	id, tenant, project string
	created             int64
}

// writeVersion4 writes, at path, a database as a binary that knew the
// migrations up to 0004 only left it: convs, each with events of Seq 1 to
// 3, inserted in reverse Seq order.
func writeVersion4(t *testing.T, path string, convs []oldConv) {
	t.Helper()
	ctx := context.Background()
	old, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.ToSlash(path)}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := old.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	for _, m := range ms {
		if m.Version > 4 {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	for _, c := range convs {
		exec(`INSERT INTO conversations (id, tenant_id, project_id, agent, delegated, created_at, last_seq) VALUES (?, ?, ?, 'a', 0, ?, 3)`,
			c.id, c.tenant, c.project, c.created)
		for seq := 3; seq >= 1; seq-- {
			exec(`INSERT INTO events (conversation_id, seq, type, data) VALUES (?, ?, 'message', ?)`, c.id, seq, fmt.Sprintf(`{"s":%d}`, seq))
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFeedBackfill opens a database written by a binary that knew
// migrations up to 0004 only: its events get positions conversation by
// conversation (creation time, then id), each conversation in Seq order,
// and their conversation's tenant and project for the feed's filters; the
// log stays append-only, and new events continue after the backfilled ones.
func TestMigrateFeedBackfill(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentd.db")
	// conv_b is the oldest, though not first by id; conv_a and conv_c share a
	// creation time, so their ids decide.
	convs := []oldConv{{"conv_c", "t1", "p3", 2000}, {"conv_b", "t1", "p1", 1000}, {"conv_a", "t2", "p2", 2000}}
	writeVersion4(t, path, convs)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	got, err := db.EventsAfter(ctx, agentd.FeedFilter{})
	if err != nil {
		t.Fatal(err)
	}
	order := []oldConv{convs[1], convs[2], convs[0]}
	if len(got) != 3*len(order) {
		t.Fatalf("%d events after the migration, want %d", len(got), 3*len(order))
	}
	for i, e := range got {
		c, seq := order[i/3], int64(i%3+1)
		if e.Position != int64(i+1) || e.ConversationID != c.id || e.Seq != seq || string(e.Data) != fmt.Sprintf(`{"s":%d}`, seq) {
			t.Errorf("event %d = %+v (data %s), want position %d of %s seq %d", i, e, e.Data, i+1, c.id, seq)
		}
	}
	// Each event took its conversation's tenant and project.
	for _, f := range []agentd.FeedFilter{{TenantID: "t1"}, {TenantID: "t1", ProjectID: "p3"}, {TenantID: "t2", ProjectID: "p2"}, {TenantID: "t2", ProjectID: "p1"}} {
		evs, err := db.EventsAfter(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, c := range order {
			if c.tenant == f.TenantID && (f.ProjectID == "" || c.project == f.ProjectID) {
				want = append(want, c.id, c.id, c.id)
			}
		}
		if len(evs) != len(want) {
			t.Fatalf("EventsAfter(%+v): %d events, want %d", f, len(evs), len(want))
		}
		for i, e := range evs {
			if e.ConversationID != want[i] {
				t.Errorf("EventsAfter(%+v) event %d is of %s, want %s", f, i, e.ConversationID, want[i])
			}
		}
	}

	if _, err := db.writer.ExecContext(ctx, `UPDATE events SET type = 'x'`); err == nil {
		t.Error("UPDATE events succeeded after the migration: the log is not append-only any more")
	}
	evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "conv_a", Type: agentd.EventError}})
	if err != nil || len(evs) != 1 || evs[0].Position != 10 || evs[0].Seq != 4 {
		t.Fatalf("append after the migration = %+v, %v; want position 10, seq 4", evs, err)
	}
	if evs, err := db.EventsAfter(ctx, agentd.FeedFilter{After: 9, TenantID: "t2", ProjectID: "p2"}); err != nil || len(evs) != 1 {
		t.Fatalf("the new event of t2/p2 by its tenant and project: %+v, %v", evs, err)
	}
}
