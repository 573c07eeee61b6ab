package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
)

// feedQueries are EventsAfter's statements: of every event (the log itself,
// stored in position order), of a tenant's (its index), of a tenant's
// project's (the tenant's index, skipping its other projects). Their
// parameters are
// the position, then the tenant and project ids the query names, then the
// limit.
var feedQueries = [...]string{
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? ORDER BY position LIMIT ?`,
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? AND tenant_id = ? ORDER BY position LIMIT ?`,
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? AND tenant_id = ? AND project_id = ? ORDER BY position LIMIT ?`,
}

// prepareFeed prepares feedQueries on the read pool. Every wake-up of a
// feed subscription runs one of them, and preparing the SQL text again
// each time cost four times the query itself.
func (db *DB) prepareFeed(ctx context.Context) error {
	for i, q := range feedQueries {
		st, err := db.reader.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare the feed's queries: %w", err)
		}
		db.feedStmts[i] = st
	}
	return nil
}

// EventsAfter returns up to f.PageLimit() events with Position > f.After,
// of every conversation or only of f's tenant (and project), in position
// order. EINVALID when f is invalid (agentd.FeedFilter.Check).
func (db *DB) EventsAfter(ctx context.Context, f agentd.FeedFilter) ([]agentd.Event, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	args := []any{f.After}
	switch {
	case f.ProjectID != "":
		args = append(args, f.TenantID, f.ProjectID)
	case f.TenantID != "":
		args = append(args, f.TenantID)
	}
	// One statement reads one snapshot, so it needs no BEGIN and ROLLBACK
	// around it.
	rows, err := db.feedStmts[len(args)-1].QueryContext(ctx, append(args, f.PageLimit())...)
	if err != nil {
		return nil, storeErr(err)
	}
	out, err := scanEvents(rows)
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// LastPosition returns the Position of the newest committed event, 0 when
// there is none.
func (db *DB) LastPosition(ctx context.Context) (int64, error) {
	var pos int64
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(position), 0) FROM events`).Scan(&pos)
	})
	if err != nil {
		return 0, err
	}
	return pos, nil
}

// ConsumerPosition returns the position recorded for the named consumer, 0
// for one that never recorded any. EINVALID for an invalid name
// (agentd.CheckConsumerName).
func (db *DB) ConsumerPosition(ctx context.Context, name string) (int64, error) {
	if err := agentd.CheckConsumerName(name); err != nil {
		return 0, err
	}
	var pos int64
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT position FROM feed_consumers WHERE name = ?`, name).Scan(&pos)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return pos, nil
}

// SetConsumerPosition records pos for the named consumer unless it has
// recorded pos or a later position already (then nothing changes and the
// result is nil). EINVALID for an invalid name, a negative pos, or a pos
// past the newest event's position.
func (db *DB) SetConsumerPosition(ctx context.Context, name string, pos int64) error {
	if err := checkConsumer(name, pos); err != nil {
		return err
	}
	return db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return setConsumerPosition(ctx, tx, name, pos, time.Now().UnixNano())
	})
}

// checkConsumer returns EINVALID for an invalid consumer name or a
// negative position, before a transaction starts.
func checkConsumer(name string, pos int64) error {
	if err := agentd.CheckConsumerName(name); err != nil {
		return err
	}
	if pos < 0 {
		return agentd.Errorf(agentd.EINVALID, "feed position %d is negative", pos)
	}
	return nil
}

// setConsumerPosition records pos for the named consumer inside tx (a write
// transaction) unless it has recorded pos or a later one; EINVALID for a pos
// past the newest event's position. now is unix nanoseconds.
func setConsumerPosition(ctx context.Context, tx *sql.Tx, name string, pos, now int64) error {
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(position), 0) FROM events`).Scan(&last); err != nil {
		return err
	}
	if pos > last {
		return agentd.Errorf(agentd.EINVALID, "feed position %d is past the newest event %d", pos, last)
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO feed_consumers (name, position, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
		WHERE excluded.position > feed_consumers.position`, name, pos, now)
	return err
}
