// Package sqlstore is the store's logic and queries written once, for
// every SQL backend: package sqlite and package postgres open their
// databases, apply their migrations and run transactions their own way
// (Backend, Tx), and the roles here (Store: ConversationStore,
// ToolCallStore, …) hold what each method does and the statements it
// runs, in the backend's Dialect. docs/storage.md has the design.
package sqlstore

import (
	"context"

	"github.com/agentd-dev/agentd"
)

// Result is what Q.Exec returns.
type Result interface {
	// RowsAffected is the number of rows the statement changed.
	RowsAffected() (int64, error)
}

// Row is the answer of Q.QueryRow; Scan returns an error that is
// database/sql's ErrNoRows (errors.Is) when there is no row.
type Row interface {
	Scan(dest ...any) error
}

// Rows is the answer of Q.Query, read as database/sql's Rows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Q runs statements, written with ? placeholders, in one transaction (or,
// for a backend that can, one statement alone on a read connection).
// Nullable columns are scanned into database/sql's Null types.
type Q interface {
	Exec(ctx context.Context, query string, args ...any) (Result, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Tx is a write transaction, with the writes whose order or timing is the
// backend's own: how an audit entry takes its id, how event positions
// follow commit order, who is told of new events.
type Tx interface {
	Q
	// BeforeEvents readies the transaction to append n events (n may be
	// 0), after every row lock it takes on calls and runs.
	BeforeEvents(ctx context.Context, n int) error
	// AfterEvents follows the append of one or more events.
	AfterEvents(ctx context.Context) error
	// InsertAudit writes e now and returns its id.
	InsertAudit(ctx context.Context, e *agentd.AuditEntry) (int64, error)
	// Audit records e, now or when the transaction commits.
	Audit(ctx context.Context, e *agentd.AuditEntry) error
	// Decide records decision d of call c (as c is stored now), now or
	// when the transaction commits; at and edited are its encoded time and
	// edited arguments.
	Decide(ctx context.Context, d *agentd.Decision, at, edited any, c *agentd.ToolCall) error
}

// Backend runs the transactions of the roles.
type Backend interface {
	// Read runs fn on one consistent snapshot.
	Read(ctx context.Context, fn func(q Q) error) error
	// ReadOne runs fn, which runs one statement: a backend that can runs
	// it outside a transaction (one statement reads one snapshot).
	ReadOne(ctx context.Context, fn func(q Q) error) error
	// Poll runs fn, which runs one statement a poller repeats (the feed's
	// read), outside any transaction; a lost connection is the poller's
	// error, and its next read tries again.
	Poll(ctx context.Context, fn func(q Q) error) error
	// Write runs fn in one write transaction and commits when it returns
	// nil; any error rolls back everything fn did. fn's context is the one
	// its statements must use.
	Write(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// DecisionEntries is the read of f's audit entries held by decisions
	// rows, and its parameters but the limit (a last ? in the query);
	// false when f's kind is not one a decision is.
	DecisionEntries(f agentd.AuditFilter) (string, []any, bool)
	// Err maps an error of the driver to the store's (constraint
	// violations to agentd codes).
	Err(err error) error
}
