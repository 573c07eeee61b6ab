package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd"
)

// TestMigrateThreadsPerKey opens a database written before migration 0014:
// a thread bound then belongs to the key that created its conversation,
// and is another key's thread no more (issue 17, finding 5).
func TestMigrateThreadsPerKey(t *testing.T) {
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
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	for _, m := range ms {
		if m.Version >= 14 {
			break
		}
		exec(m.SQL)
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	exec(`INSERT INTO conversations (id, tenant_id, project_id, agent, delegated, created_at, last_seq, created_by) VALUES ('conv_a', 't1', 'p1', 'a', 0, 1, 0, 'k-alice')`)
	exec(`INSERT INTO protocol_threads (tenant_id, project_id, protocol, thread_id, conversation_id, created_at) VALUES ('t1', 'p1', 'ag-ui', 'my-chat', 'conv_a', 1)`)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := agentd.ThreadKey{TenantID: "t1", ProjectID: "p1", KeyID: "k-alice", Protocol: "ag-ui", ThreadID: "my-chat"}
	if got, err := db.ThreadConversation(ctx, key); err != nil || got != "conv_a" {
		t.Errorf("alice's thread after the migration = %q, %v; want conv_a", got, err)
	}
	key.KeyID = "k-bob"
	if _, err := db.ThreadConversation(ctx, key); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Errorf("bob's thread after the migration: %v, want not found", err)
	}
}
