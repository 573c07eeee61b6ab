package postgres

import (
	"context"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// backend runs the shared store's transactions (sqlstore.Backend) with
// runTx: a read on one repeatable-read snapshot, a write read-committed
// with its row locks, each tried again when its connection was lost.
type backend struct{ db *DB }

func (b backend) Read(ctx context.Context, fn func(q sqlstore.Q) error) error {
	return b.db.readTx(ctx, func(tx *txn) error { return fn(query{tx}) })
}

func (b backend) Write(ctx context.Context, fn func(ctx context.Context, tx sqlstore.Tx) error) error {
	return b.db.writeTx(ctx, func(tx *txn) error { return fn(ctx, write{query{tx}}) })
}

func (b backend) Err(err error) error { return storeErr(err) }

func (b backend) DecisionEntries(f agentd.AuditFilter) (string, []any, bool) {
	return decisionEntries(f)
}

// query is a transaction as the shared store runs statements in it
// (sqlstore.Q).
type query struct{ t *txn }

func (q query) Exec(ctx context.Context, s string, args ...any) (sqlstore.Result, error) {
	return q.t.Exec(ctx, s, args...)
}

func (q query) Query(ctx context.Context, s string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.t.Query(ctx, s, args...)
	if err != nil {
		return nil, err
	}
	return rowsOf{rows}, nil
}

func (q query) QueryRow(ctx context.Context, s string, args ...any) sqlstore.Row {
	return q.t.QueryRow(ctx, s, args...)
}

// rowsOf is pgx's rows read as database/sql's (sqlstore.Rows).
type rowsOf struct{ pgx.Rows }

func (r rowsOf) Close() error {
	r.Rows.Close()
	return nil
}

// write is a write transaction as the shared store sees it (sqlstore.Tx):
// audit entries and decisions are queued and written under the feed lock
// when the transaction appends its events or commits (flushAudit).
type write struct{ query }

// BeforeEvents writes the queued audit entries, then, when events follow,
// takes the feed lock (txn.lockFeed): their positions are taken from the
// events' identity sequence under it, so position order is commit order.
func (w write) BeforeEvents(ctx context.Context, n int) error {
	if err := w.t.flushAudit(ctx); err != nil || n == 0 {
		return err
	}
	return w.t.lockFeed(ctx)
}

// AfterEvents notifies the listeners of EventsChannel when the
// transaction commits.
func (w write) AfterEvents(ctx context.Context) error { return w.t.notify(ctx) }

// InsertAudit writes e under the feed lock and returns its id.
func (w write) InsertAudit(ctx context.Context, e *agentd.AuditEntry) (int64, error) {
	return w.t.insertAudit(ctx, e)
}

// Audit queues e until the transaction appends its events or commits;
// once it holds the feed lock, e is written at once, in the order queued
// entries would have been.
func (w write) Audit(ctx context.Context, e *agentd.AuditEntry) error {
	if w.t.locked {
		_, err := w.t.insertAudit(ctx, e)
		return err
	}
	return w.t.queueAudit(e)
}

func (w write) Decide(_ context.Context, d *agentd.Decision, at, edited any, c *agentd.ToolCall) error {
	w.t.queueDecision(d, at, edited, c)
	return nil
}

// ReadOne runs fn in a read transaction, as Read.
func (b backend) ReadOne(ctx context.Context, fn func(q sqlstore.Q) error) error {
	return b.Read(ctx, fn)
}

// Poll runs fn's one statement on a pooled connection: one statement reads
// one snapshot, so it needs no transaction around it.
func (b backend) Poll(ctx context.Context, fn func(q sqlstore.Q) error) error {
	return storeErr(fn(pooled{b.db.pool, b.db.count}))
}

// pooled runs single statements on the pool, outside any transaction
// (sqlstore.Q).
type pooled struct {
	pool  *pgxpool.Pool
	count *sqlstore.Counter // counts its statements as Polls
}

func (p pooled) Exec(ctx context.Context, s string, args ...any) (sqlstore.Result, error) {
	p.count.Polls.Add(1)
	tag, err := p.pool.Exec(ctx, rebind(s), args...)
	return result{tag}, err
}

func (p pooled) Query(ctx context.Context, s string, args ...any) (sqlstore.Rows, error) {
	p.count.Polls.Add(1)
	rows, err := p.pool.Query(ctx, rebind(s), args...)
	if err != nil {
		return nil, err
	}
	return rowsOf{rows}, nil
}

func (p pooled) QueryRow(ctx context.Context, s string, args ...any) sqlstore.Row {
	p.count.Polls.Add(1)
	return p.pool.QueryRow(ctx, rebind(s), args...)
}

// roundTrips counts the requests a connection sends the server
// (sqlstore.Counts.RoundTrips): every query (statements, BEGIN, COMMIT,
// ROLLBACK) and every prepare of a statement new to the connection.
type roundTrips struct{ count *sqlstore.Counter }

func (r roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.count.RoundTrips.Add(1)
	return ctx
}

func (roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.count.RoundTrips.Add(1)
	return ctx
}

func (roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
