package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentd-dev/agentd"
)

// FeedStore is the one event feed of every conversation as the store
// keeps it (agentd.FeedStore): the newest position and the positions its
// consumers have recorded.
type FeedStore struct {
	b Backend
}

// LastPosition returns the Position of the newest committed event, 0 when
// there is none.
func (s *FeedStore) LastPosition(ctx context.Context) (int64, error) {
	var pos int64
	err := s.b.Read(ctx, func(q Q) error {
		return q.QueryRow(ctx, `SELECT COALESCE(MAX(position), 0) FROM events`).Scan(&pos)
	})
	if err != nil {
		return 0, err
	}
	return pos, nil
}

// ConsumerPosition returns the position recorded for the named consumer, 0
// for one that never recorded any. EINVALID for an invalid name
// (agentd.CheckConsumerName).
func (s *FeedStore) ConsumerPosition(ctx context.Context, name string) (int64, error) {
	if err := agentd.CheckConsumerName(name); err != nil {
		return 0, err
	}
	var pos int64
	err := s.b.Read(ctx, func(q Q) error {
		err := q.QueryRow(ctx, `SELECT position FROM feed_consumers WHERE name = ?`, name).Scan(&pos)
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
func (s *FeedStore) SetConsumerPosition(ctx context.Context, name string, pos int64) error {
	if err := checkConsumer(name, pos); err != nil {
		return err
	}
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
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
func setConsumerPosition(ctx context.Context, tx Q, name string, pos, now int64) error {
	var last int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(position), 0) FROM events`).Scan(&last); err != nil {
		return err
	}
	if pos > last {
		return agentd.Errorf(agentd.EINVALID, "feed position %d is past the newest event %d", pos, last)
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO feed_consumers (name, position, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
		WHERE excluded.position > feed_consumers.position`, name, pos, now)
	return err
}
