package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"

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

// backend opens each case's store on a database of its own.
func backend(tmpl string) storetest.Backend {
	urls := map[agentd.Store]string{}
	var mu sync.Mutex
	return storetest.Backend{
		Open: func(t *testing.T) agentd.Store {
			u := pgtest.NewDatabase(t, tmpl)
			db := open(t, u)
			mu.Lock()
			urls[db] = u
			mu.Unlock()
			return db
		},
		Reopen: func(t *testing.T, s agentd.Store) agentd.Store {
			s.Close()
			mu.Lock()
			u := urls[s]
			mu.Unlock()
			return open(t, u)
		},
	}
}

// TestStore runs the contract suite's roles that pass on PostgreSQL
// (docs/storage.md lists those that do not yet).
func TestStore(t *testing.T) {
	tmpl := migratedTemplate(t)
	b := backend(tmpl)
	storetest.RunHealth(t, b.Open)
	storetest.RunConversations(t, b.Open)
	storetest.RunRuns(t, b.Open)
	storetest.RunToolCalls(t, b.Open)
	storetest.RunAudit(t, b.Open)
	storetest.RunEventLog(t, b)
	storetest.RunThreads(t, b.Open)
	storetest.RunWebhookOutbox(t, b.Open)
}

// migratedTemplate creates a database, migrates it, and returns its name
// for CREATE DATABASE … TEMPLATE; it is dropped when t ends.
func migratedTemplate(t *testing.T) string {
	t.Helper()
	u := pgtest.NewDatabase(t, "")
	db, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	db.Close()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(parsed.Path, "/")
}
