package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/agentd-dev/agentd/sqlstore"
)

// Statements that transactions run often are prepared once per pool when
// the database opens, not parsed again on every call: preparing one of them
// cost more than running it (about 24 µs against 16 µs for an UPDATE of a
// tool call). A statement is registered by wrapping its SQL text in
// prepared where it is declared; a transaction runs it through the querier
// that db.w or db.r wraps around it, which uses the prepared statement when
// the text is registered and runs the text as it is otherwise, so an
// unregistered statement is slower, never wrong.
//
// They cannot be prepared lazily: the write pool has one connection, which
// a write transaction holds while it runs, so preparing on the pool from
// inside one would wait for itself.

// preparedQueries is every registered statement's SQL text.
var preparedQueries []string

// prepared registers q as a statement to prepare at Open and returns it.
func prepared(q string) string {
	preparedQueries = append(preparedQueries, q)
	return q
}

// querier is what a transaction's statements run through: a *sql.Tx, or
// one wrapped by db.w or db.r.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// stmtTx runs a transaction's registered statements prepared.
type stmtTx struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	// bound, when set, keeps the statements bound to tx for the rest of
	// the transaction (a group commit's, which runs many bodies).
	bound *boundStmts
	// n counts the statements run (one of DB.count's counters).
	n *atomic.Int64
}

// boundStmts are the registered statements bound to the group commit's
// transaction (sql.Tx.StmtContext, which allocates and registers a
// statement on each call), so that the group's many bodies bind each
// statement once. Only the commit loop's goroutine, which runs the
// bodies, uses it; commitGroup sets and clears it.
type boundStmts struct {
	tx *sql.Tx
	m  map[*sql.Stmt]*sql.Stmt
}

// begin binds the cache to tx; end empties it when tx is over.
func (b *boundStmts) begin(tx *sql.Tx) { b.tx = tx }
func (b *boundStmts) end()             { b.tx = nil; clear(b.m) }

// w wraps a write transaction (of writeTx).
func (db *DB) w(tx *sql.Tx) stmtTx { return stmtTx{tx, db.writeStmts, &db.bound, &db.count.Statements} }

// sp wraps the group commit's transaction for its savepoint statements,
// counted apart (sqlstore.Counts.Savepoints).
func (db *DB) sp(tx *sql.Tx) stmtTx {
	return stmtTx{tx, db.writeStmts, &db.bound, &db.count.Savepoints}
}

// r wraps a read transaction (of readTx).
func (db *DB) r(tx *sql.Tx) stmtTx { return stmtTx{tx, db.readStmts, nil, &db.count.Statements} }

// stmt returns q's prepared statement bound to the transaction, or nil when
// q is not registered.
func (s stmtTx) stmt(ctx context.Context, q string) *sql.Stmt {
	st := s.stmts[q]
	if st == nil {
		return nil
	}
	if s.bound == nil || s.bound.tx != s.tx {
		return s.tx.StmtContext(ctx, st)
	}
	if ts := s.bound.m[st]; ts != nil {
		return ts
	}
	ts := s.tx.StmtContext(ctx, st)
	if s.bound.m == nil {
		s.bound.m = map[*sql.Stmt]*sql.Stmt{}
	}
	s.bound.m[st] = ts
	return ts
}

func (s stmtTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s.n.Add(1)
	if st := s.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return s.tx.ExecContext(ctx, q, args...)
}

func (s stmtTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s.n.Add(1)
	if st := s.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.tx.QueryContext(ctx, q, args...)
}

func (s stmtTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	s.n.Add(1)
	if st := s.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.tx.QueryRowContext(ctx, q, args...)
}

// prepareAll prepares every registered statement on both pools. A write
// statement prepared on the read pool is harmless (query_only refuses it
// when run), and so the two pools share one list.
func (db *DB) prepareAll(ctx context.Context) error {
	queries := append(slices.Clip(preparedQueries), db.Store.Prepared()...)
	db.writeStmts = make(map[string]*sql.Stmt, len(queries))
	db.readStmts = make(map[string]*sql.Stmt, len(queries))
	for _, q := range queries {
		if db.writeStmts[q] != nil {
			continue // registered twice
		}
		for pool, m := range map[*sql.DB]map[string]*sql.Stmt{db.writer: db.writeStmts, db.reader: db.readStmts} {
			st, err := pool.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("prepare %.60q: %w", q, err)
			}
			m[q] = st
		}
	}
	return nil
}

// stmtDB runs single statements on a pool, outside any transaction, with
// the registered statements prepared (backend.ReadOne).
type stmtDB struct {
	db    *sql.DB
	stmts map[string]*sql.Stmt
	n     *atomic.Int64 // counts the statements run
}

func (s stmtDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s.n.Add(1)
	if st := s.stmts[q]; st != nil {
		return st.ExecContext(ctx, args...)
	}
	return s.db.ExecContext(ctx, q, args...)
}

func (s stmtDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s.n.Add(1)
	if st := s.stmts[q]; st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.db.QueryContext(ctx, q, args...)
}

func (s stmtDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	s.n.Add(1)
	if st := s.stmts[q]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.db.QueryRowContext(ctx, q, args...)
}

// Exec, Query and QueryRow run statements for the shared store
// (sqlstore.Q).
func (s stmtTx) Exec(ctx context.Context, q string, args ...any) (sqlstore.Result, error) {
	return s.ExecContext(ctx, q, args...)
}

func (s stmtTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := s.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (s stmtTx) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return s.QueryRowContext(ctx, q, args...)
}

// Exec, Query and QueryRow run single statements for the shared store
// (sqlstore.Q).
func (s stmtDB) Exec(ctx context.Context, q string, args ...any) (sqlstore.Result, error) {
	return s.ExecContext(ctx, q, args...)
}

func (s stmtDB) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := s.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (s stmtDB) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return s.QueryRowContext(ctx, q, args...)
}
