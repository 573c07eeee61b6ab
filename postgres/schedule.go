package postgres

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// ClaimTick claims one tick of a scheduled tool (agentd.ScheduleStore).
// Two replicas claiming the same tick at once both insert; the primary key
// lets one commit and the other finds the row (ON CONFLICT DO NOTHING
// waits for the first transaction's outcome).
func (db *DB) ClaimTick(ctx context.Context, tool string, at time.Time) (time.Time, bool, error) {
	if tool == "" || at.IsZero() {
		return time.Time{}, false, agentd.Errorf(agentd.EINVALID, "a tick claim needs its tool and time")
	}
	tick, err := encTime("tick", at)
	if err != nil {
		return time.Time{}, false, err
	}
	var prev *int64
	claimed := false
	err = db.writeTx(ctx, func(tx *txn) error {
		if err := tx.QueryRow(ctx, `SELECT MAX(tick) FROM schedule_ticks WHERE tool = ?`, tool).Scan(&prev); err != nil {
			return err
		}
		res, err := tx.Exec(ctx, `INSERT INTO schedule_ticks (tool, tick, claimed_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			tool, tick, time.Now().UnixNano())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		claimed = n == 1
		return nil
	})
	if err != nil || !claimed || prev == nil {
		return time.Time{}, claimed, err
	}
	return time.Unix(0, *prev).UTC(), true, nil
}
