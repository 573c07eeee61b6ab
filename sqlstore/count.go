package sqlstore

import "sync/atomic"

// Counts is what a backend has run since it opened, for measuring what one
// request or one chat turn costs the database (docs/performance.md, "What
// one chat turn costs, counted"). Take two and subtract (Sub).
type Counts struct {
	// Statements are the SQL statements the store's methods ran (every
	// Exec, Query and QueryRow, in a transaction or alone), but Polls and
	// Savepoints.
	Statements int64
	// Polls are the statements of Backend.Poll (the event feed's read),
	// which repeat at the poller's pace rather than a request's.
	Polls int64
	// Reads are read transactions: Backend.Read, and on PostgreSQL
	// ReadOne too (SQLite runs ReadOne's statement without one).
	Reads int64
	// Writes are the write transactions the store's methods ran:
	// Backend.Write, and SQLite's appends of the group commit's batch.
	Writes int64
	// Commits are the commits of writes that reached the database: on
	// SQLite the group commits (one fsync each, however many Writes they
	// hold), on PostgreSQL one per Write.
	Commits int64
	// Savepoints are the statements SQLite's group commit runs around a
	// Write that shares its commit with others (SAVEPOINT, RELEASE,
	// ROLLBACK TO): their number depends on how writes meet in time.
	Savepoints int64
	// RoundTrips are PostgreSQL's requests to the server: every statement,
	// BEGIN and COMMIT, and the prepare of a statement new to its
	// connection. 0 on SQLite.
	RoundTrips int64
}

// Sub returns c less before: what ran between the two.
func (c Counts) Sub(before Counts) Counts {
	return Counts{
		Statements: c.Statements - before.Statements,
		Polls:      c.Polls - before.Polls,
		Reads:      c.Reads - before.Reads,
		Writes:     c.Writes - before.Writes,
		Commits:    c.Commits - before.Commits,
		Savepoints: c.Savepoints - before.Savepoints,
		RoundTrips: c.RoundTrips - before.RoundTrips,
	}
}

// Counter is where a backend counts its Counts: one atomic add each, so
// counting costs no allocation and no lock.
type Counter struct {
	Statements, Polls, Reads, Writes, Commits, Savepoints, RoundTrips atomic.Int64
}

// Counts returns the counts so far. Each is read on its own: a snapshot
// taken while statements run may be off by those in flight.
func (c *Counter) Counts() Counts {
	return Counts{
		Statements: c.Statements.Load(),
		Polls:      c.Polls.Load(),
		Reads:      c.Reads.Load(),
		Writes:     c.Writes.Load(),
		Commits:    c.Commits.Load(),
		Savepoints: c.Savepoints.Load(),
		RoundTrips: c.RoundTrips.Load(),
	}
}
