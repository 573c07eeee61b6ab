package sqlstore

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// LinkStore is the store's decision links: their secret and the spent
// ones (agentd.LinkStore).
type LinkStore struct{ b Backend }

// LinkSecret returns the decision links' signing secret, storing candidate
// when none is stored (agentd.LinkStore). Two replicas on PostgreSQL
// storing at once both insert; the primary key lets one commit and both
// read its secret.
func (s *LinkStore) LinkSecret(ctx context.Context, candidate []byte) ([]byte, error) {
	if len(candidate) < 32 {
		return nil, agentd.Errorf(agentd.EINVALID, "a link secret has at least 32 bytes")
	}
	var secret []byte
	err := s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO link_secret (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`,
			candidate, time.Now().UnixNano()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT secret FROM link_secret WHERE id = 1`).Scan(&secret)
	})
	return secret, err
}

// SpendLink records a decision link as used (agentd.LinkStore).
func (s *LinkStore) SpendLink(ctx context.Context, id, toolCallID string, at time.Time) (bool, error) {
	if id == "" {
		return false, agentd.Errorf(agentd.EINVALID, "a spent link needs its id")
	}
	spent := false
	err := s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		res, err := tx.Exec(ctx, `INSERT INTO spent_links (id, tool_call_id, spent_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			id, toolCallID, at.UnixNano())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		spent = err == nil && n == 1
		return err
	})
	return spent, err
}

// LinkSpent reports whether a decision link was used (agentd.LinkStore).
func (s *LinkStore) LinkSpent(ctx context.Context, id string) (bool, error) {
	var n int
	err := s.b.Read(ctx, func(tx Q) error {
		return tx.QueryRow(ctx, `SELECT COUNT(*) FROM spent_links WHERE id = ?`, id).Scan(&n)
	})
	return n > 0, err
}
