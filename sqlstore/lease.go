package sqlstore

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// The run lease's statements (docs/scale-out.md): one conditional UPDATE
// each, so of two replicas racing for a free or expired lease one gets it.
// One process uses a SQLite file, so agentd takes no lease on it there;
// the store keeps the contract all the same.
const (
	leaseRunQuery = `UPDATE runs SET lease_owner = ?, lease_until = ?
		WHERE id = ? AND status IN ('running', 'waiting') AND (lease_owner = '' OR lease_owner = ? OR lease_until <= ?)`
	releaseRunQuery = `UPDATE runs SET lease_owner = '', lease_until = 0 WHERE id = ? AND lease_owner = ?`
)

// LeaseRun takes or renews owner's lease of an active run until until
// (agentd.RunStore.LeaseRun).
func (s *RunStore) LeaseRun(ctx context.Context, runID, owner string, now, until time.Time) (bool, error) {
	if err := checkLease(owner, now, until); err != nil {
		return false, err
	}
	var ok bool
	err := s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		res, err := tx.Exec(ctx, leaseRunQuery, owner, until.UnixNano(), runID, owner, now.UnixNano())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, err
}

// ReleaseRun frees owner's lease of a run (agentd.RunStore.ReleaseRun).
func (s *RunStore) ReleaseRun(ctx context.Context, runID, owner string) error {
	if owner == "" {
		return agentd.Errorf(agentd.EINVALID, "a lease owner is required")
	}
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.Exec(ctx, releaseRunQuery, runID, owner)
		return err
	})
}

// checkLease returns EINVALID for an empty owner or a lease that ends no
// later than it starts.
func checkLease(owner string, now, until time.Time) error {
	if owner == "" {
		return agentd.Errorf(agentd.EINVALID, "a lease owner is required")
	} else if !until.After(now) {
		return agentd.Errorf(agentd.EINVALID, "a lease must end after now")
	}
	return nil
}
