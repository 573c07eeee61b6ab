// Package postgres is the agentd.Store on PostgreSQL (pgx and its pool).
// It passes the same contract as package sqlite (storetest.Run), with the
// same schema in PostgreSQL's terms (migrations) and the same semantics
// method by method. docs/storage.md has how feed positions follow commit
// order here (a feed lock), the pool and timeouts, the retry of a lost
// connection, and what running several replicas on one database still
// lacks (that is not built yet: one agentd process per database).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Defaults of the connection pool and statement timeout (Open's options).
const (
	// DefaultMaxConns is the most connections open at once; a transaction
	// that finds them all busy waits for one until its context ends.
	DefaultMaxConns = 16
	// DefaultMinConns connections are kept open while idle.
	DefaultMinConns = 0
	// DefaultConnMaxIdleTime closes a connection unused for this long.
	DefaultConnMaxIdleTime = time.Minute
	// DefaultStatementTimeout aborts a statement that runs longer (the
	// server's statement_timeout): no query of the store reads more than
	// an index range, so one that runs this long is stuck on a lock or a
	// sick server, and its caller gets an error instead of waiting on.
	DefaultStatementTimeout = 30 * time.Second
	// DefaultReconnectWait is how long a transaction whose connection was
	// lost before COMMIT is tried again on new connections: a restarting
	// server (pg_ctl restart, a failover) refuses connections for a moment,
	// and a caller waits it out rather than getting an error.
	DefaultReconnectWait = 10 * time.Second
)

// Lock keys of the transaction-level advisory locks: the feed lock every
// transaction that takes event positions or audit ids holds until it
// commits, and the migration lock.
const (
	feedLockKey    = 0x61676e7464_01 // "agntd" 1
	migrateLockKey = 0x61676e7464_02
)

// Option configures Open.
type Option func(*options)

type options struct {
	maxConns, minConns int32
	idleTime, stmtTime time.Duration
	reconnect          time.Duration
}

// WithPool bounds the pool: at most maxConns connections open at once, at
// least minConns kept open, each idle one closed after maxIdleTime. A
// value <= 0 (minConns < 0) keeps its default; minConns is capped at
// maxConns.
func WithPool(maxConns, minConns int, maxIdleTime time.Duration) Option {
	return func(o *options) {
		if maxConns > 0 {
			o.maxConns = int32(min(maxConns, math.MaxInt32))
		}
		if minConns >= 0 {
			o.minConns = int32(min(minConns, math.MaxInt32))
		}
		if maxIdleTime > 0 {
			o.idleTime = maxIdleTime
		}
	}
}

// WithStatementTimeout sets the server's statement_timeout on every
// connection; d <= 0 keeps DefaultStatementTimeout.
func WithStatementTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.stmtTime = d
		}
	}
}

// WithReconnectWait sets how long a transaction whose connection was lost
// before COMMIT is tried again (DefaultReconnectWait when d <= 0).
func WithReconnectWait(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.reconnect = d
		}
	}
}

// DB is an agentd.Store on one PostgreSQL database. It is safe for
// concurrent use, and several processes may use one database at once.
type DB struct {
	// The roles written once for every SQL backend (package sqlstore).
	*sqlstore.Store

	pool *pgxpool.Pool
	// conn is the pool's connection configuration, for the connection of
	// its own that ListenEvents holds.
	conn *pgx.ConnConfig
	// reconnect is how long runTx tries a transaction again.
	reconnect time.Duration
	// count counts the statements, transactions and round trips run
	// (Counts).
	count *sqlstore.Counter
}

// Open connects to the database url names (a postgres:// URL or a
// key=value connection string) and brings its schema up to date by
// applying the embedded migrations not yet applied, under an advisory lock
// so that replicas starting at once apply each exactly once. It fails with
// a descriptive error when the URL is invalid, the server cannot be
// reached, or the schema is newer than this binary.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	o := options{maxConns: DefaultMaxConns, minConns: DefaultMinConns, idleTime: DefaultConnMaxIdleTime, stmtTime: DefaultStatementTimeout,
		reconnect: DefaultReconnectWait}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = o.maxConns, min(o.minConns, o.maxConns)
	cfg.MaxConnIdleTime = o.idleTime
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(o.stmtTime.Milliseconds(), 10)
	count := &sqlstore.Counter{}
	cfg.ConnConfig.Tracer = roundTrips{count}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	db := &DB{pool: pool, conn: cfg.ConnConfig, reconnect: o.reconnect, count: count}
	db.Store = sqlstore.New(backend{db}, sqlstore.Postgres)
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return db, nil
}

// Counts returns the statements, transactions and round trips the store
// has run since it opened (sqlstore.Counts; Savepoints is 0).
func (db *DB) Counts() sqlstore.Counts { return db.count.Counts() }

// Ping reports whether the database can be reached and answers a query.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for connections in use to be returned.
// Every committed transaction is already durable. Calling Close twice is
// harmless.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// migrations returns the embedded migrations in version order.
func migrations() ([]sqlstore.Migration, error) {
	return sqlstore.Migrations(migrationFS, "migrations/*.sql")
}

// migrate applies, in version order, each embedded migration not yet
// recorded in schema_migrations, all in one transaction that holds the
// migration lock: a replica that starts while another migrates waits for
// it, then finds nothing left to apply. A failed migration leaves the
// schema as it was (PostgreSQL's DDL is transactional). Forward only: a
// database whose schema is newer than this binary is refused.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at BIGINT NOT NULL
		)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		applied, current := map[int]bool{}, 0
		for _, v := range versions {
			applied[int(v)], current = true, max(current, int(v))
		}
		if n := len(ms); n > 0 && current > ms[n-1].Version {
			return fmt.Errorf("migrate: database schema version %d is newer than this binary's %d", current, ms[n-1].Version)
		}
		for _, m := range ms {
			if applied[m.Version] {
				continue // a version below the newest that is missing is applied too
			}
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// txn is one transaction of the store. Its statements are written with ?
// placeholders, as in package sqlite, and run as PostgreSQL's $1, $2, …
// (rebind). A write transaction also queues the audit entries of the facts
// it records and takes the feed lock before it takes an event position or
// an audit id (lockFeed).
type txn struct {
	tx       pgx.Tx
	count    *sqlstore.Counter
	locked   bool
	notified bool
	audit    []queued
}

// result is what Exec returns, shaped as database/sql's.
type result struct{ tag pgconn.CommandTag }

// RowsAffected is the number of rows the statement changed.
func (r result) RowsAffected() (int64, error) { return r.tag.RowsAffected(), nil }

// Exec runs a statement that returns no rows.
func (t *txn) Exec(ctx context.Context, q string, args ...any) (result, error) {
	t.count.Statements.Add(1)
	tag, err := t.tx.Exec(ctx, rebind(q), args...)
	return result{tag}, err
}

// Query runs a statement that returns rows.
func (t *txn) Query(ctx context.Context, q string, args ...any) (pgx.Rows, error) {
	t.count.Statements.Add(1)
	return t.tx.Query(ctx, rebind(q), args...)
}

// QueryRow runs a statement that returns at most one row.
func (t *txn) QueryRow(ctx context.Context, q string, args ...any) pgx.Row {
	t.count.Statements.Add(1)
	return t.tx.QueryRow(ctx, rebind(q), args...)
}

// lockFeed takes the feed lock (once per transaction): a transaction-level
// advisory lock held until the transaction ends. Every transaction that
// takes an event position or an audit id (from their identity sequences)
// takes it first, so a position (an id) is taken only while no other
// uncommitted transaction holds one, and positions commit in the order they
// were taken: once a reader sees position P, no position below P can
// commit later (docs/storage.md). A transaction holds the lock from its
// first event or audit entry to its commit; those are its last statements
// (audit entries are queued until then), so the rows it locks while holding
// it are conversations' counters only, and no two transactions can wait for
// each other.
func (t *txn) lockFeed(ctx context.Context) error {
	if t.locked {
		return nil
	}
	t.count.Statements.Add(1)
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(feedLockKey)); err != nil {
		return err
	}
	t.locked = true
	return nil
}

// rebound caches rebind's results: the store's statements are a fixed set
// of texts.
var rebound sync.Map

// rebind returns q with its ? placeholders numbered $1, $2, … in order. The
// store's statements hold no ? other than placeholders (no string literal
// or operator uses one).
func rebind(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	rebound.Store(q, b.String())
	return b.String()
}

// writeTx runs fn in one read-committed transaction, writes the audit
// entries fn queued, and commits when fn returns nil; any error rolls back
// everything fn did. Conditional updates (… WHERE status = ANY(…)) resolve
// races in the database: a concurrent update of the same row waits for the
// first to commit and re-checks its condition against the new row. A
// transaction whose connection is lost before it asks to commit is run
// again (runTx).
func (db *DB) writeTx(ctx context.Context, fn func(tx *txn) error) error {
	return db.runTx(ctx, pgx.TxOptions{}, true, fn)
}

// readTx runs fn in one read-only repeatable-read transaction, so that
// everything fn reads comes from one consistent snapshot.
func (db *DB) readTx(ctx context.Context, fn func(tx *txn) error) error {
	return db.runTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, false, fn)
}

// retryPause bounds the pause between two tries of a transaction whose
// connection was lost: it grows by 50ms a try up to this.
const retryPause = 500 * time.Millisecond

// runTx runs fn in a transaction (tryTx), again on another connection
// when the connection was lost before COMMIT was sent (a server restart, a
// dropped connection, a pooled connection the server closed, a server that
// refuses connections while it starts) or the server aborted it as a
// deadlock's victim (two writes that lock the same rows in opposite
// orders, as a decision and a cancel of one run can), for up to DefaultReconnectWait
// (WithReconnectWait): the server rolled that attempt back, so running it
// again neither loses an accepted write nor doubles one. A transaction that
// failed at COMMIT may or may not have committed and is not run again: its
// error goes to the caller, as every other error does. A connection still
// lost after the wait is EUNAVAILABLE (503 at the API).
func (db *DB) runTx(ctx context.Context, opts pgx.TxOptions, write bool, fn func(tx *txn) error) error {
	giveUp := time.Now().Add(db.reconnect)
	for attempt := 1; ; attempt++ {
		retry, err := db.tryTx(ctx, opts, write, fn)
		switch {
		case err == nil || !retry || ctx.Err() != nil:
			return storeErr(err)
		case time.Now().After(giveUp):
			return &agentd.Error{Code: agentd.EUNAVAILABLE, Message: "the database is unreachable", Detail: err}
		}
		select {
		case <-ctx.Done():
			return storeErr(err)
		case <-time.After(min(time.Duration(attempt)*50*time.Millisecond, retryPause)):
		}
	}
}

// tryTx runs fn in one transaction and reports, on error, whether the
// attempt was rolled back by a lost connection before COMMIT (lostBefore).
func (db *DB) tryTx(ctx context.Context, opts pgx.TxOptions, write bool, fn func(tx *txn) error) (retry bool, err error) {
	if write {
		db.count.Writes.Add(1)
	} else {
		db.count.Reads.Add(1)
	}
	tx, err := db.pool.BeginTx(ctx, opts)
	if err != nil {
		return lostBefore(err, nil), err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	t := &txn{tx: tx, count: db.count}
	if err := fn(t); err != nil {
		return lostBefore(err, tx), err
	}
	if write {
		if err := t.flushAudit(ctx); err != nil {
			return lostBefore(err, tx), err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	if write {
		db.count.Commits.Add(1)
	}
	return false, nil
}

// lostBefore reports whether err, met before COMMIT was sent, is the loss
// of the connection (or a server shutting down or starting up) or the
// server's abort of a deadlock's victim, rather than an answer to a
// statement: then the server has rolled the transaction back, and it can
// run again.
func lostBefore(err error, tx pgx.Tx) bool {
	var ae *agentd.Error
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ae) && ae.Detail == nil) {
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// admin_shutdown, crash_shutdown, cannot_connect_now (a server
		// starting up), and the connection exceptions; not, say, a
		// refused password. And deadlock_detected and
		// serialization_failure: the server aborted the transaction
		// (TestDeadlockRetried), rolled back whole like a lost one.
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || strings.HasPrefix(pe.Code, "08") ||
			pe.Code == "40P01" || pe.Code == "40001"
	}
	var ce *pgconn.ConnectError
	if tx == nil && errors.As(err, &ce) {
		return true // no server to connect to: nothing was sent
	}
	return tx != nil && tx.Conn().IsClosed()
}

// insertErr gives the constraint violations of inserting the object kind
// with id their agentd codes and a message naming the object.
func insertErr(err error, kind, id string) error { return sqlstore.InsertErr(storeErr, err, kind, id) }

// storeErr passes *agentd.Error and context errors through, maps
// constraint violations to agentd codes, and prefixes anything else.
func storeErr(err error) error {
	if err == nil {
		return nil // before ae, which escapes: no allocation for no error
	}
	var ae *agentd.Error
	if errors.As(err, &ae) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505" && pe.ConstraintName == "runs_one_active":
			return &agentd.Error{Code: agentd.ERUNACTIVE, Message: "the conversation already has an active run", Detail: err}
		case pe.Code == "23505":
			return &agentd.Error{Code: agentd.ECONFLICT, Message: "already exists", Detail: err}
		case pe.Code == "23503":
			return &agentd.Error{Code: agentd.ENOTFOUND, Message: "referenced object not found", Detail: err}
		case pe.Code == "22021" || pe.Code == "22P05":
			// PostgreSQL's text holds no NUL byte and no invalid UTF-8
			// (SQLite's does): refused as input, not a server failure.
			return &agentd.Error{Code: agentd.EINVALID, Message: "text with a NUL byte or invalid UTF-8", Detail: err}
		}
	}
	return fmt.Errorf("postgres: %w", err)
}
