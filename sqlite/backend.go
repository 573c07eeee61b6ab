package sqlite

import (
	"context"
	"database/sql"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// backend runs the shared store's transactions (sqlstore.Backend): reads
// on the read pool, writes through the group commit (group.go), each with
// the registered statements prepared (stmt.go).
type backend struct{ db *DB }

func (b backend) Read(ctx context.Context, fn func(q sqlstore.Q) error) error {
	return b.db.readTx(ctx, func(tx *sql.Tx) error {
		return fn(b.db.r(tx))
	})
}

func (b backend) Write(ctx context.Context, fn func(ctx context.Context, tx sqlstore.Tx) error) error {
	return b.db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return fn(ctx, &wtx{b.db.w(tx), b.db})
	})
}

func (b backend) Err(err error) error { return storeErr(err) }

func (b backend) DecisionEntries(f agentd.AuditFilter) (string, []any, bool) {
	return decisionEntries(f, b.db.decisionsFrom)
}

// wtx is a write transaction of the group commit as the shared store sees
// it (sqlstore.Tx): audit entries and decisions are written at once, each
// taking the next audit id (the single writer orders them).
type wtx struct {
	stmtTx
	db *DB
}

// BeforeEvents and AfterEvents have nothing to do: the single writer
// holds the write lock from the transaction's first statement, so event
// positions follow commit order, and readers are woken by the feed's poll.
func (t *wtx) BeforeEvents(context.Context, int) error { return nil }

func (t *wtx) AfterEvents(context.Context) error { return nil }

func (t *wtx) InsertAudit(ctx context.Context, e *agentd.AuditEntry) (int64, error) {
	return t.db.insertAudit(ctx, t.tx, e)
}

func (t *wtx) Audit(ctx context.Context, e *agentd.AuditEntry) error {
	_, err := t.db.insertAudit(ctx, t.tx, e)
	return err
}

func (t *wtx) Decide(ctx context.Context, d *agentd.Decision, at, edited any, _ *agentd.ToolCall) error {
	return insertDecision(ctx, t.stmtTx, d, at, edited)
}

// ReadOne runs fn's one statement on the read pool outside a transaction:
// a single statement reads one snapshot by itself, and the BEGIN and
// ROLLBACK of a transaction cost about a third of a short read.
func (b backend) ReadOne(_ context.Context, fn func(q sqlstore.Q) error) error {
	return storeErr(fn(stmtDB{b.db.reader, b.db.readStmts, &b.db.count.Statements}))
}

// Poll runs fn's statement as ReadOne does, counted apart.
func (b backend) Poll(_ context.Context, fn func(q sqlstore.Q) error) error {
	return storeErr(fn(stmtDB{b.db.reader, b.db.readStmts, &b.db.count.Polls}))
}
