package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/postgres"
	"github.com/agentd-dev/agentd/storetest"
)

// open opens a store on the database url names, closed when t ends.
func open(t *testing.T, u string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// backend opens each case's store in a schema of its own (an empty store,
// migrated by Open) in the database u names.
func backend(u string) storetest.Backend {
	urls := map[agentd.Store]string{}
	var mu sync.Mutex
	return storetest.Backend{
		Open: func(t *testing.T) agentd.Store {
			su := pgtest.NewSchema(t, u)
			db := open(t, su)
			mu.Lock()
			urls[db] = su
			mu.Unlock()
			return db
		},
		Reopen: func(t *testing.T, s agentd.Store) agentd.Store {
			s.Close()
			mu.Lock()
			su := urls[s]
			mu.Unlock()
			return open(t, su)
		},
	}
}

// TestStore runs the contract suite, every role, on a database of its own.
func TestStore(t *testing.T) {
	storetest.Run(t, backend(pgtest.NewDatabase(t, "")))
}

// TestMigrateConcurrently opens stores on one empty database from several
// goroutines at once, as replicas starting together would: each opens, and
// every migration is applied exactly once.
func TestMigrateConcurrently(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			db, err := postgres.Open(context.Background(), u, postgres.WithPool(2, 0, 0))
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	db := open(t, u)
	var versions, distinct int
	conn := pgtest.Conn(t, u)
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&versions, &distinct); err != nil {
		t.Fatal(err)
	}
	if versions == 0 || versions != distinct {
		t.Errorf("schema_migrations has %d rows of %d versions, want each version once", versions, distinct)
	}
	if err := db.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// TestOpenRefusesNewerSchema: a database migrated by a newer binary is not
// touched (migrations are forward-only).
func TestOpenRefusesNewerSchema(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	open(t, u).Close()
	pgtest.Exec(t, u, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`)
	db, err := postgres.Open(context.Background(), u)
	if err == nil {
		db.Close()
		t.Fatal("Open of a database with a newer schema succeeded")
	} else if !strings.Contains(err.Error(), "newer than this binary") {
		t.Errorf("Open: %v, want an error saying the schema is newer", err)
	}
}

// TestOpenErrors: a URL that is not one, and a server that is not there,
// are errors that say so.
func TestOpenErrors(t *testing.T) {
	for _, u := range []string{"postgres://%zz", "postgres:///nodb?host=/nonexistent&connect_timeout=2"} {
		db, err := postgres.Open(context.Background(), u)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) succeeded", u)
		} else if !strings.HasPrefix(err.Error(), "postgres: open: ") {
			t.Errorf("Open(%q) = %v, want a postgres: open: error", u, err)
		}
	}
}

// TestStatementTimeout: a statement that runs past the timeout is aborted
// with an error, not waited on.
func TestStatementTimeout(t *testing.T) {
	u := pgtest.NewSchema(t, pgtest.NewDatabase(t, ""))
	// Migrate without the timeout first: on a busy machine a migration's
	// statement may take longer than the timeout this test is about.
	migrated, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	migrated.Close()
	db, err := postgres.Open(context.Background(), u, postgres.WithStatementTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Hold the feed's counter row of a conversation in another
	// transaction: an append to it waits for the lock until the timeout.
	conv := &agentd.Conversation{ID: "cv_1", TenantID: "t", ProjectID: "p", Agent: "a"}
	if err := db.CreateConversation(context.Background(), conv); err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Conn(t, u)
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(context.Background(), `SELECT * FROM conversations WHERE id = 'cv_1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	_, err = db.AppendEvents(context.Background(), []agentd.EventDraft{{ConversationID: "cv_1", Type: "x"}})
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Errorf("AppendEvents under a held lock = %v, want a statement timeout", err)
	}
}

// TestLostConnectionRetried: the server closes the store's connections
// (as a restart or a failover does) between two writes; the next write
// runs on a new connection, once, and nothing written before is lost.
func TestLostConnectionRetried(t *testing.T) {
	u := pgtest.NewSchema(t, pgtest.NewDatabase(t, ""))
	db, err := postgres.Open(context.Background(), u, postgres.WithPool(2, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conv := &agentd.Conversation{ID: "cv_1", TenantID: "t", ProjectID: "p", Agent: "a"}
	if err := db.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	other := pgtest.Conn(t, u)
	for round := range 3 {
		var killed int
		if err := other.QueryRow(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed == 0 {
			t.Fatalf("round %d: no connection of the store to close", round)
		}
		evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "cv_1", Type: "x"}})
		if err != nil {
			t.Fatalf("round %d: AppendEvents after the connections were closed: %v", round, err)
		}
		if evs[0].Seq != int64(round+1) {
			t.Errorf("round %d: Seq %d, want %d (each append once)", round, evs[0].Seq, round+1)
		}
	}
	evs, err := db.Events(ctx, "cv_1", 0, 0)
	if err != nil || len(evs) != 3 {
		t.Fatalf("Events = %d events, %v; want 3", len(evs), err)
	}
}

// TestServerDownRetried: a write that starts while the server is down (a
// restart: pg_ctl stop, then start) waits for it and commits once, instead
// of failing at its first refused connection; a server still down after the
// reconnect wait (WithReconnectWait) is EUNAVAILABLE. The server is one of
// this test's own (pgtest.NewServer).
func TestServerDownRetried(t *testing.T) {
	srv := pgtest.NewServer(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, srv.URL, postgres.WithReconnectWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateConversation(ctx, &agentd.Conversation{ID: "cv_1", TenantID: "t", ProjectID: "p", Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { time.Sleep(300 * time.Millisecond); started <- srv.Start() }()
	evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "cv_1", Type: "x"}})
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if err != nil || evs[0].Seq != 1 {
		t.Fatalf("AppendEvents while the server restarted: %v %v", evs, err)
	}
	if all, err := db.Events(ctx, "cv_1", 0, 0); err != nil || len(all) != 1 {
		t.Fatalf("Events = %d events, %v; want 1", len(all), err)
	}

	short, err := postgres.Open(ctx, srv.URL, postgres.WithReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = short.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "cv_1", Type: "x"}})
	if agentd.ErrorCode(err) != agentd.EUNAVAILABLE {
		t.Fatalf("AppendEvents with the server down: %v, want EUNAVAILABLE", err)
	}
}

// TestTextPostgresCannotHold: text with a NUL byte or invalid UTF-8, which
// PostgreSQL's text type refuses, is EINVALID and writes nothing.
func TestTextPostgresCannotHold(t *testing.T) {
	db := open(t, pgtest.NewSchema(t, pgtest.NewDatabase(t, "")))
	ctx := context.Background()
	conv := &agentd.Conversation{ID: "cv_1", TenantID: "t", ProjectID: "p", Agent: "a"}
	if err := db.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	for i, content := range []string{"a\x00b", "a\xffb"} {
		m := &agentd.Message{ID: fmt.Sprintf("msg_%d", i), ConversationID: "cv_1", Role: agentd.RoleUser, Content: content}
		_, err := db.AddMessage(ctx, m, []agentd.EventDraft{{ConversationID: "cv_1", Type: "x"}})
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("AddMessage(%q) = %v, want EINVALID", content, err)
		}
	}
	if ms, err := db.Messages(ctx, "cv_1"); err != nil || len(ms) != 0 {
		t.Errorf("Messages = %d, %v; want none", len(ms), err)
	}
	if seq, err := db.LastSeq(ctx, "cv_1"); err != nil || seq != 0 {
		t.Errorf("LastSeq = %d, %v; want 0", seq, err)
	}
}

// A migration below the newest applied one that a database lacks (branches
// that each added one, merged out of number order) is applied at the next
// open.
func TestMigrateAppliesAMissingLowerVersion(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	open(t, u).Close()
	ctx := context.Background()
	conn := pgtest.Conn(t, u)
	// As if 0003 (the runs' trace columns) had not been there when the
	// newer ones were applied.
	for _, q := range []string{`ALTER TABLE runs DROP COLUMN trace_parent, DROP COLUMN trace_caller`,
		`DELETE FROM schema_migrations WHERE version = 3`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db := open(t, u)
	if err := db.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = 3`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 3 recorded %d times (%v), want once", n, err)
	}
	if _, err := conn.Exec(ctx, `SELECT trace_parent, trace_caller FROM runs`); err != nil {
		t.Fatalf("the runs' trace columns after reopening: %v", err)
	}
}
