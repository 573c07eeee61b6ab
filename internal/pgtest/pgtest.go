// Package pgtest gives tests a PostgreSQL database of their own. The
// server is AGENTD_TEST_POSTGRES_URL's when it is set (scripts/postgres.sh
// starts one, and scripts/test.sh sources it); else the test process starts
// a throwaway server of its own on first use, where PostgreSQL is installed
// (initdb and pg_ctl in PATH, pg_config --bindir or
// /usr/lib/postgresql/*/bin), in a temp dir, listening on a unix socket in
// that dir only, with fsync off, and stopped and removed when the test
// process ends (under root it runs as the user agentd-pg, which
// scripts/postgres.sh creates). Where there is neither, a test that needs
// a database skips, or fails when AGENTD_POSTGRES_REQUIRED=1 (set by the
// script), so a broken install cannot pass CI; a package whose tests all
// need one uses Main as its TestMain, so that its summary line says that
// none ran (docs/testing.md).
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
	u, err := serverURL()
	if err != nil {
		msg := "no PostgreSQL for the tests: AGENTD_TEST_POSTGRES_URL is not set and none could be started (" + err.Error() +
			"); install PostgreSQL, or run `source scripts/postgres.sh` (scripts/test.sh does)"
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
	name := randomName("agentd_test_")
	stmt := "CREATE DATABASE " + name
	if template != "" {
		stmt += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	exec(t, server, stmt)
	t.Cleanup(func() { exec(t, server, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	return WithDatabase(t, server, name)
}

// NewSchema creates an empty schema with a random name in the database u
// names and returns u with that schema as its search_path: a store opened
// on it creates its tables there, as if in a database of its own, for a
// fraction of the cost of CREATE DATABASE. The schema is dropped when t
// ends.
func NewSchema(t testing.TB, u string) string {
	t.Helper()
	name := randomName("agentd_test_")
	exec(t, u, "CREATE SCHEMA "+name)
	t.Cleanup(func() { exec(t, u, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	q.Set("search_path", name)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// randomName is prefix and 16 random hex digits: a valid SQL identifier.
func randomName(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
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

// Conn returns a connection of its own to the database u names, closed
// when t ends.
func Conn(t testing.TB, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// exec runs one statement on the database u names, on a connection of its
// own.
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

// Exec runs one statement on the database u names, on a connection of its
// own.
func Exec(t testing.TB, u, stmt string) { t.Helper(); exec(t, u, stmt) }
