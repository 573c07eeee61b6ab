// Package sqlite is the embedded, durable implementation of agentd.Store: one
// SQLite file in WAL mode, written through a single connection, read through
// a pool, using the pure-Go driver modernc.org/sqlite (no cgo).
//
// Every Store method is one transaction, and its writes reach the disk by
// group commit (group.go): the write transactions that arrive while a
// commit is in flight share the next commit and its fsync, each inside a
// savepoint of its own, so one caller's failure fails no other and a failed
// commit fails them all. Every state change of a run or a
// tool call is one conditional UPDATE (… WHERE id = ? AND status IN (…))
// whose affected-row count decides the race, so concurrent approvals of one
// parked call produce exactly one transition, one decision row and one set of
// events. The contract it implements is agentd.Store, checked by
// storetest.Run; see docs/storage.md.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ agentd.Store = (*DB)(nil)

//go:embed migrations/*.sql
var migrationFS embed.FS

// BusyTimeout is how long a connection waits for a lock held by another
// connection (another process on the same file, or a checkpoint) before
// failing with SQLITE_BUSY. Within one process writes never wait on each
// other in SQLite: they queue for the single write connection instead.
const BusyTimeout = 10 * time.Second

// Defaults of the read pool (WithReadPool). Reads in the pure-Go driver use
// the CPU while they run, so more parallel reads than cores gain little;
// every read connection holds about two file descriptors (the database file
// and its WAL), so the bound is also what keeps the process's descriptors
// bounded however many SSE streams and API requests arrive at once.
const (
	// DefaultMaxReadConns is the most read connections open at once. A read
	// that finds them all busy waits for one until its context ends.
	DefaultMaxReadConns = 8
	// DefaultMaxIdleReadConns is how many unused read connections stay open
	// for the next reads; the rest are closed when released. All of them:
	// under load a connection closed on release is opened again at once,
	// and opening one (the schema read, then each statement it runs
	// prepared again) cost about 7% of a streaming run's CPU with 4.
	DefaultMaxIdleReadConns = DefaultMaxReadConns
	// DefaultReadConnMaxIdleTime closes a read connection unused for this
	// long, so a quiet server holds no read connections.
	DefaultReadConnMaxIdleTime = time.Minute
)

// Option configures Open.
type Option func(*options)

type options struct {
	maxRead, maxIdleRead int
	readIdleTime         time.Duration
}

// WithReadPool bounds the read pool: at most maxOpen connections open at
// once (a read that finds them all in use waits for one until its context
// ends), at most maxIdle of them kept open while unused, each closed after
// maxIdleTime unused. A value <= 0 keeps its default (DefaultMaxReadConns,
// DefaultMaxIdleReadConns, DefaultReadConnMaxIdleTime); maxIdle is capped
// at maxOpen.
func WithReadPool(maxOpen, maxIdle int, maxIdleTime time.Duration) Option {
	return func(o *options) {
		if maxOpen > 0 {
			o.maxRead = maxOpen
		}
		if maxIdle > 0 {
			o.maxIdleRead = maxIdle
		}
		if maxIdleTime > 0 {
			o.readIdleTime = maxIdleTime
		}
	}
}

// DB is an agentd.Store backed by one SQLite file. It is safe for concurrent
// use.
//
// Settings and why:
//
//   - journal_mode=WAL: readers never block the writer and the writer never
//     blocks readers, so SSE replays and API reads proceed while the loop
//     writes.
//   - synchronous=FULL: every commit is fsynced before it returns. In WAL
//     mode the cheaper NORMAL setting is corruption-safe but may lose the
//     last commits on a power cut. Here the last commit can be an approval:
//     the API would have answered 200 and started the call, and after the
//     restart the call would again be requires_confirmation — approved a
//     second time, it would run twice. A decision must be on disk before
//     anyone acts on it, so commits pay for an fsync.
//   - one write connection (SetMaxOpenConns(1)) with BEGIN IMMEDIATE, used
//     by one committer goroutine: writers of this process queue for it (and
//     share its next group commit) instead of racing for SQLite's write
//     lock, so they never see SQLITE_BUSY, and each write transaction
//     holds the lock from its first statement, so a read-then-write inside
//     it sees no interleaved writer.
//   - a separate read pool with query_only=1: reads run in parallel on WAL
//     snapshots and cannot write by accident.
//   - a bounded read pool (WithReadPool; default DefaultMaxReadConns open,
//     DefaultMaxIdleReadConns idle, idle ones closed after
//     DefaultReadConnMaxIdleTime): every connection costs file descriptors,
//     and an unbounded pool opened one per concurrent read until the process
//     ran out of them. Reads beyond the bound queue in database/sql, bounded
//     by their context; every read releases its connection when it returns.
//   - busy_timeout: covers the remaining lock waits (another process on the
//     same file, WAL checkpoints).
//   - temp_store=MEMORY: the statement journals of a group commit's
//     savepoints (group.go) stay in memory; on a file they spilled with a
//     write system call per page once a group passed 64 KiB.
//   - foreign_keys=ON: references between conversations, runs, messages,
//     tool calls, decisions and events are enforced.
type DB struct {
	// The roles written once for every SQL backend (package sqlstore).
	*sqlstore.Store

	path   string
	writer *sql.DB
	reader *sql.DB
	// writeStmts and readStmts are the registered statements (prepared,
	// stmt.go) prepared on each pool.
	writeStmts, readStmts map[string]*sql.Stmt
	// bound is the group commit's statements bound to its transaction
	// (stmt.go); only the commit loop uses it.
	bound boundStmts
	// group is the committer every write transaction goes through
	// (group.go): writes that arrive while a commit is in flight share
	// the next one.
	group *committer
	// decisionsFrom is the last decision rid whose audit entry is in the
	// audit table (0024): later decisions are entries themselves.
	decisionsFrom int64
	// count counts the statements and transactions run (Counts).
	count sqlstore.Counter
}

// Open opens (creating if needed) the SQLite database file at path and
// brings its schema up to date by applying the embedded migrations that have
// not yet been applied. Reopening an existing file keeps its data and applies
// nothing twice. It fails with a descriptive error when the file cannot be
// opened or created (for example when its directory does not exist), when it
// is not a SQLite database, or when its schema is newer than this binary.
// path must name a file; ":memory:" is refused because the read pool and the
// write connection must share one database. opts tune the read pool.
func Open(path string, opts ...Option) (*DB, error) {
	o := options{maxRead: DefaultMaxReadConns, maxIdleRead: DefaultMaxIdleReadConns, readIdleTime: DefaultReadConnMaxIdleTime}
	for _, opt := range opts {
		opt(&o)
	}
	o.maxIdleRead = min(o.maxIdleRead, o.maxRead)
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: path must name a database file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	// A file: URI lets any character appear in the path ('?' and '#' are
	// percent-encoded); the driver's own parameters follow the '?'.
	uri := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()
	common := "_pragma=busy_timeout(" + strconv.FormatInt(BusyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_pragma=temp_store(2)"

	db := &DB{path: abs}
	db.Store = sqlstore.New(backend{db}, sqlstore.SQLite)
	// The writer is opened first: it sets WAL mode (persistent in the file)
	// and migrates before any reader connects.
	db.writer, err = sql.Open("sqlite", uri+"?"+common+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	db.writer.SetMaxOpenConns(1)
	db.writer.SetMaxIdleConns(1)
	db.writer.SetConnMaxIdleTime(0)
	db.writer.SetConnMaxLifetime(0)

	ctx := context.Background()
	if err := db.writer.PingContext(ctx); err != nil {
		db.writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	var mode string
	if err := db.writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	} else if !strings.EqualFold(mode, "wal") {
		db.writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: journal_mode is %q, want wal", abs, mode)
	}
	if err := db.migrate(ctx); err != nil {
		db.writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	if err := db.writer.QueryRowContext(ctx, `SELECT rid FROM audit_decisions_from`).Scan(&db.decisionsFrom); err != nil {
		db.writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}

	db.reader, err = sql.Open("sqlite", uri+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		db.writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	db.reader.SetMaxOpenConns(o.maxRead)
	db.reader.SetMaxIdleConns(o.maxIdleRead)
	db.reader.SetConnMaxIdleTime(o.readIdleTime)
	if err := db.reader.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	if err := db.prepareAll(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	db.group = newCommitter()
	go db.commitLoop()
	return db, nil
}

// Counts returns the statements, transactions and group commits the
// store has run since it opened (sqlstore.Counts; RoundTrips is 0).
func (db *DB) Counts() sqlstore.Counts { return db.count.Counts() }

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// ReadStats returns the statistics of the read pool: connections open, in
// use and idle, and how many reads waited for a connection and for how long.
func (db *DB) ReadStats() sql.DBStats { return db.reader.Stats() }

// Ping reports whether both the write connection and the read pool can
// reach the database.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.writer.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	var one int
	if err := db.reader.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// Close closes the database. Every committed transaction is already on disk;
// Close waits only for the writes already queued for a group commit, which
// commit (or fail) before it returns; a write after Close fails. Calling
// Close twice is harmless.
func (db *DB) Close() error {
	if db.group != nil {
		db.group.close()
	}
	var errs []error
	var stmts []*sql.Stmt
	for _, m := range []map[string]*sql.Stmt{db.writeStmts, db.readStmts} {
		for _, st := range m {
			stmts = append(stmts, st)
		}
	}
	for _, st := range stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if db.reader != nil {
		errs = append(errs, db.reader.Close())
	}
	if db.writer != nil {
		errs = append(errs, db.writer.Close())
	}
	return errors.Join(errs...)
}

// migrations returns the embedded migrations in version order.
func migrations() ([]sqlstore.Migration, error) {
	return sqlstore.Migrations(migrationFS, "migrations/*.sql")
}

// migrate applies, in version order, each embedded migration not yet
// recorded in schema_migrations — one below the newest applied too, as
// when branches that each added a migration are merged out of number order
// — and mirrors the newest version in user_version.
// Everything happens in one IMMEDIATE transaction, so two processes opening
// a new file at once cannot both migrate, and a failed migration leaves the
// schema as it was.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return db.migrateTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at INTEGER NOT NULL
		) STRICT`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		applied, current, err := appliedVersions(ctx, tx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if n := len(ms); n > 0 && current > ms[n-1].Version {
			return fmt.Errorf("migrate: database schema version %d is newer than this binary's %d", current, ms[n-1].Version)
		}
		for _, m := range ms {
			if applied[m.Version] {
				continue // a version below the newest that is missing is applied too
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
			current = max(current, m.Version)
			if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(current)); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// appliedVersions returns the versions recorded in schema_migrations and
// the newest of them.
func appliedVersions(ctx context.Context, tx *sql.Tx) (map[int]bool, int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	applied, newest := map[int]bool{}, 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, 0, err
		}
		applied[v], newest = true, max(newest, v)
	}
	return applied, newest, rows.Err()
}

// migrateTx runs fn in one write transaction of its own (BEGIN IMMEDIATE
// on the write connection, before the committer starts) and commits when
// fn returns nil; any error rolls back everything fn did. Every other write
// goes through writeTx's group commit (group.go).
func (db *DB) migrateTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return storeErr(err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return storeErr(err)
	}
	if err := tx.Commit(); err != nil {
		return storeErr(err)
	}
	return nil
}

// readTx runs fn in one read-only transaction on the read pool, so that
// everything fn reads comes from one consistent snapshot.
func (db *DB) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	db.count.Reads.Add(1)
	tx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return storeErr(err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return storeErr(err)
	}
	return nil
}

// insertErr gives the constraint violations of inserting the object kind
// with id their agentd codes and a message naming the object.
func insertErr(err error, kind, id string) error { return sqlstore.InsertErr(storeErr, err, kind, id) }

// storeErr passes *agentd.Error and context errors through, maps SQLite
// constraint violations to agentd codes, and prefixes anything else.
func storeErr(err error) error {
	if err == nil {
		return nil // before ae, which escapes: no allocation for no error
	}
	var ae *agentd.Error
	if errors.As(err, &ae) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return &agentd.Error{Code: agentd.ECONFLICT, Message: "already exists", Detail: err}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return &agentd.Error{Code: agentd.ENOTFOUND, Message: "referenced object not found", Detail: err}
		}
	}
	return fmt.Errorf("sqlite: %w", err)
}
