package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Group commit (SPEC §8.1, docs/storage.md). Every write method hands its
// transaction body to one committer goroutine, which runs the bodies queued
// so far — at most maxGroup of them — one after the other in one write
// transaction and commits them together with one fsync. Bodies that arrive
// while a commit is in flight wait for the next one. Each body runs inside a
// SAVEPOINT of its own (when the group has more than one), so a body that
// fails (ECONFLICT, EINVALID, …) is rolled back to its savepoint and fails
// its own caller only; the others commit. Bodies run in queue order, so each
// sees the writes of those before it as if they had committed first: a
// conditional transition that an earlier member of the group won is a
// conflict for every later one, as it would be across commits. A caller
// learns its outcome only after the shared commit: its sequence numbers and
// positions when the commit succeeded, else the commit's error, which every
// caller whose body ran gets — including one whose body had failed on its
// own, since what it saw may not have committed.

// maxGroup bounds the callers in one group commit, so the first caller of a
// large group waits for the bodies of at most maxGroup-1 others (each a few
// statements) besides the fsync it would pay anyway.
const maxGroup = 256

// errClosed is the error of a write after Close.
var errClosed = errors.New("sqlite: the store is closed")

// Savepoint statements of a group's members: one savepoint name is enough,
// since members run one at a time and each releases its own.
var (
	savepointQuery  = prepared(`SAVEPOINT member`)
	rollbackToQuery = prepared(`ROLLBACK TO member`)
	releaseQuery    = prepared(`RELEASE member`)
)

// txReq is one caller's transaction body waiting for, or in, a group.
type txReq struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *sql.Tx) error
	// app, set instead of fn, is an append the committer writes in one
	// batch with the appends queued next to it (appendrun.go).
	app   *appendReq
	err   error
	panic any // what fn panicked with, re-panicked in the caller
	done  chan struct{}
}

// committer queues the bodies of write transactions for its goroutine
// (DB.commitLoop).
type committer struct {
	mu     sync.Mutex
	queue  []*txReq
	closed bool
	wake   chan struct{} // capacity 1: the loop has something to take
	exited chan struct{} // closed when the loop has returned
	// hook, when set (tests only), runs before each commit with the
	// number of callers in the group; an error fails the commit.
	hook atomic.Pointer[func(group int) error]
}

func newCommitter() *committer {
	return &committer{wake: make(chan struct{}, 1), exited: make(chan struct{})}
}

// submit queues r; false after close.
func (c *committer) submit(r *txReq) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	c.signal()
	return true
}

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to maxGroup queued bodies, and whether the
// committer is closed.
func (c *committer) take() ([]*txReq, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), maxGroup)
	batch := make([]*txReq, n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:]) // hold no finished request
	c.queue = c.queue[:rest]
	return batch, c.closed
}

// close stops the loop once it has run every body queued before, and
// waits for it.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
	<-c.exited
}

// writeTx runs fn in a write transaction shared with the other writes of
// its group, and returns once that transaction has committed (nil, and
// what fn wrote is durable) or not (fn's own error, or the commit's; then
// nothing fn wrote is). fn runs on the committer's goroutine with a context
// that carries ctx's values but not its cancellation: a statement
// interrupted by one caller's cancellation could roll back the whole
// group's transaction. A caller whose ctx ends before its body starts gets
// ctx's error and writes nothing; once its body has run, the caller waits
// for the commit, so an error always means nothing was written.
func (db *DB) writeTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.count.Writes.Add(1)
	r := &txReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	if !db.group.submit(r) {
		return errClosed
	}
	<-r.done
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// writeApp queues an append for the committer's batch path and returns
// once its group has committed, as writeTx does for a body.
func (db *DB) writeApp(ctx context.Context, app *appendReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.count.Writes.Add(1)
	r := &txReq{ctx: ctx, app: app, done: make(chan struct{})}
	if !db.group.submit(r) {
		return errClosed
	}
	<-r.done
	return r.err
}

// commitLoop runs the queued bodies group by group until the committer is
// closed and its queue empty.
func (db *DB) commitLoop() {
	defer close(db.group.exited)
	for {
		batch, closed := db.group.take()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-db.group.wake
			continue
		}
		db.commitGroup(batch)
		for _, r := range batch {
			close(r.done)
		}
	}
}

// commitGroup runs the bodies of batch in one transaction and commits it,
// setting each caller's error.
func (db *DB) commitGroup(batch []*txReq) {
	ctx := context.Background()
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		failAll(batch, storeErr(err))
		return
	}
	defer tx.Rollback()
	db.bound.begin(tx)
	defer db.bound.end()
	ran, ok := make([]*txReq, 0, len(batch)), 0
	for i := 0; i < len(batch); {
		r := batch[i]
		if r.err = r.ctx.Err(); r.err != nil {
			i++
			continue
		}
		run := []*txReq{r}
		if r.app != nil {
			run = appendsFrom(batch[i+1:], run)
		}
		i += len(run)
		run = slices.DeleteFunc(run, func(r *txReq) bool { return r.err != nil })
		ran = append(ran, run...)
		var err error
		switch {
		case r.app != nil:
			err = db.runAppends(tx, run, len(run) < len(batch))
		case len(batch) == 1:
			runBody(r, tx)
		default:
			err = db.runMember(tx, r)
		}
		if err != nil {
			// The savepoint could not be taken or undone: the
			// transaction is lost (SQLite rolls it back on some
			// errors), and with it every member's work.
			failAll(batch, storeErr(err))
			return
		}
		for _, r := range run {
			if r.err == nil {
				ok++
			}
		}
	}
	if ok == 0 {
		return // every body failed on its own: nothing to commit
	}
	if err := db.commit(tx, len(ran)); err != nil {
		failAll(ran, err)
	}
}

// appendsFrom returns run extended with the appends at the head of rest,
// up to the first body that is not one. A cancelled caller among them gets
// its context's error (and is dropped from the run by the caller).
func appendsFrom(rest, run []*txReq) []*txReq {
	for _, r := range rest {
		if r.app == nil {
			break
		}
		r.err = r.ctx.Err()
		run = append(run, r)
	}
	return run
}

// commit commits tx, a group of n callers, after the test hook if any.
func (db *DB) commit(tx *sql.Tx, n int) error {
	if h := db.group.hook.Load(); h != nil {
		if err := (*h)(n); err != nil {
			return fmt.Errorf("sqlite: commit: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return storeErr(err)
	}
	db.count.Commits.Add(1)
	return nil
}

// runMember runs r's body inside a savepoint, rolled back when the body
// fails. The error is the savepoint's own, when it fails.
func (db *DB) runMember(tx *sql.Tx, r *txReq) error {
	q, ctx := db.sp(tx), context.Background()
	if _, err := q.ExecContext(ctx, savepointQuery); err != nil {
		return err
	}
	runBody(r, tx)
	if r.err != nil {
		if _, err := q.ExecContext(ctx, rollbackToQuery); err != nil {
			return err
		}
	}
	_, err := q.ExecContext(ctx, releaseQuery)
	return err
}

// runBody runs r's body in tx and records its error; a panic is recorded
// as an error too, and re-raised in the caller by writeTx.
func runBody(r *txReq, tx *sql.Tx) {
	defer func() {
		if v := recover(); v != nil {
			r.panic = v
			r.err = fmt.Errorf("sqlite: transaction body panicked: %v", v)
		}
	}()
	r.err = storeErr(r.fn(context.WithoutCancel(r.ctx), tx))
}

// failAll sets err as the outcome of every caller in rs.
func failAll(rs []*txReq, err error) {
	for _, r := range rs {
		r.err = err
	}
}
