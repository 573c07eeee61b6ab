package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentd-dev/agentd"
)

// EventsAfter returns up to f.PageLimit() events with Position > f.After,
// of every conversation or only of f's tenant (and project), in position
// order. EINVALID when f is invalid (agentd.FeedFilter.Check).
func (db *DB) EventsAfter(ctx context.Context, f agentd.FeedFilter) ([]agentd.Event, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	query := `SELECT ` + eventColumns + ` FROM events WHERE position > ?`
	args := []any{f.After}
	if f.TenantID != "" {
		query += ` AND tenant_id = ?`
		args = append(args, f.TenantID)
	}
	if f.ProjectID != "" {
		query += ` AND project_id = ?`
		args = append(args, f.ProjectID)
	}
	query += ` ORDER BY position LIMIT ?`
	args = append(args, f.PageLimit())
	var out []agentd.Event
	err := db.readTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryEvents(ctx, tx, query, args...)
		return err
	})
	if err != nil {
		return nil, err
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
	if err := agentd.CheckConsumerName(name); err != nil {
		return err
	}
	if pos < 0 {
		return agentd.Errorf(agentd.EINVALID, "feed position %d is negative", pos)
	}
	return db.writeTx(ctx, func(tx *sql.Tx) error {
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
			WHERE excluded.position > feed_consumers.position`, name, pos, time.Now().UnixNano())
		return err
	})
}
