package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/agentd-dev/agentd"
)

// ClaimTick claims one tick of a scheduled tool (agentd.ScheduleStore).
func (db *DB) ClaimTick(ctx context.Context, tool string, at time.Time) (time.Time, bool, error) {
	if tool == "" || at.IsZero() {
		return time.Time{}, false, agentd.Errorf(agentd.EINVALID, "a tick claim needs its tool and time")
	}
	tick, err := encTime("tick", at)
	if err != nil {
		return time.Time{}, false, err
	}
	var prev sql.NullInt64
	claimed := false
	err = db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT MAX(tick) FROM schedule_ticks WHERE tool = ?`, tool).Scan(&prev); err != nil {
			return storeErr(err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO schedule_ticks (tool, tick, claimed_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			tool, tick, time.Now().UnixNano())
		if err != nil {
			return storeErr(err)
		}
		n, err := res.RowsAffected()
		claimed = err == nil && n == 1
		return storeErr(err)
	})
	if err != nil || !claimed || !prev.Valid {
		return time.Time{}, claimed, err
	}
	return time.Unix(0, prev.Int64).UTC(), true, nil
}
