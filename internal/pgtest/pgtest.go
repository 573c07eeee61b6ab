// Package pgtest gives tests a PostgreSQL database of their own on the
// server scripts/postgres.sh starts (scripts/test.sh sources it): the
// server's URL is AGENTD_TEST_POSTGRES_URL, and a test without it skips, or
// fails when AGENTD_POSTGRES_REQUIRED=1 (set by the script), so a broken
// install cannot pass CI.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// ServerURL returns the URL of the test server (a database any test may
// connect to, to create others), or skips or fails t when there is none.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("AGENTD_TEST_POSTGRES_URL")
	if u == "" {
		msg := "no PostgreSQL for the tests: AGENTD_TEST_POSTGRES_URL is not set; run `source scripts/postgres.sh` (scripts/test.sh does)"
		if os.Getenv("AGENTD_POSTGRES_REQUIRED") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u
}

// NewDatabase creates an empty database with a random name on the test
// server and returns its URL; it is dropped (its connections closed) when
// t ends. template, when not empty, names the database it is copied from.
func NewDatabase(t testing.TB, template string) string {
	t.Helper()
	server := ServerURL(t)
	b := make([]byte, 8)
	rand.Read(b)
	name := "agentd_test_" + hex.EncodeToString(b)
	stmt := "CREATE DATABASE " + name
	if template != "" {
		stmt += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	exec(t, server, stmt)
	t.Cleanup(func() { exec(t, server, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	return WithDatabase(t, server, name)
}

// WithDatabase returns server's URL naming database name instead.
func WithDatabase(t testing.TB, server, name string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("AGENTD_TEST_POSTGRES_URL %q is not a postgres:// URL", server)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs one statement on the database url names, on a connection of
// its own.
func exec(t testing.TB, u, stmt string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		t.Fatalf("pgtest: %s: %v", stmt, err)
	}
}

// Exec runs one statement on the database url names.
func Exec(t testing.TB, u, stmt string) { t.Helper(); exec(t, u, stmt) }
