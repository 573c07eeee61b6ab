package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/agentd-dev/agentd"
)

// LinkSecret returns the decision links' signing secret, storing candidate
// when none is stored (agentd.LinkStore).
func (db *DB) LinkSecret(ctx context.Context, candidate []byte) ([]byte, error) {
	if len(candidate) < 32 {
		return nil, agentd.Errorf(agentd.EINVALID, "a link secret has at least 32 bytes")
	}
	var secret []byte
	err := db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO link_secret (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`,
			candidate, time.Now().UnixNano()); err != nil {
			return storeErr(err)
		}
		return storeErr(tx.QueryRowContext(ctx, `SELECT secret FROM link_secret WHERE id = 1`).Scan(&secret))
	})
	return secret, err
}

// SpendLink records a decision link as used (agentd.LinkStore).
func (db *DB) SpendLink(ctx context.Context, id, toolCallID string, at time.Time) (bool, error) {
	if id == "" {
		return false, agentd.Errorf(agentd.EINVALID, "a spent link needs its id")
	}
	spent := false
	err := db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO spent_links (id, tool_call_id, spent_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			id, toolCallID, at.UnixNano())
		if err != nil {
			return storeErr(err)
		}
		n, err := res.RowsAffected()
		spent = err == nil && n == 1
		return storeErr(err)
	})
	return spent, err
}

// LinkSpent reports whether a decision link was used (agentd.LinkStore).
func (db *DB) LinkSpent(ctx context.Context, id string) (bool, error) {
	var n int
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM spent_links WHERE id = ?`, id).Scan(&n)
	})
	return n > 0, err
}
