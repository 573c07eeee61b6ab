package postgres

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// LinkSecret returns the decision links' signing secret, storing candidate
// when none is stored (agentd.LinkStore). Two replicas storing at once
// both insert; the primary key lets one commit and both read its secret.
func (db *DB) LinkSecret(ctx context.Context, candidate []byte) ([]byte, error) {
	if len(candidate) < 32 {
		return nil, agentd.Errorf(agentd.EINVALID, "a link secret has at least 32 bytes")
	}
	var secret []byte
	err := db.writeTx(ctx, func(tx *txn) error {
		if _, err := tx.Exec(ctx, `INSERT INTO link_secret (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`,
			candidate, time.Now().UnixNano()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT secret FROM link_secret WHERE id = 1`).Scan(&secret)
	})
	return secret, err
}

// SpendLink records a decision link as used (agentd.LinkStore).
func (db *DB) SpendLink(ctx context.Context, id, toolCallID string, at time.Time) (bool, error) {
	if id == "" {
		return false, agentd.Errorf(agentd.EINVALID, "a spent link needs its id")
	}
	spent := false
	err := db.writeTx(ctx, func(tx *txn) error {
		res, err := tx.Exec(ctx, `INSERT INTO spent_links (id, tool_call_id, spent_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			id, toolCallID, at.UnixNano())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		spent = n == 1
		return nil
	})
	return spent, err
}

// LinkSpent reports whether a decision link was used (agentd.LinkStore).
func (db *DB) LinkSpent(ctx context.Context, id string) (bool, error) {
	var n int64
	err := db.readTx(ctx, func(tx *txn) error {
		return tx.QueryRow(ctx, `SELECT COUNT(*) FROM spent_links WHERE id = ?`, id).Scan(&n)
	})
	return n > 0, err
}
