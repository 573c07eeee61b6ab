package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/agentd-dev/agentd"
)

// ScheduleStore is the store's claims of scheduled tools' ticks
// (agentd.ScheduleStore).
type ScheduleStore struct{ b Backend }

// ClaimTick claims one tick of a scheduled tool (agentd.ScheduleStore).
// Two replicas on PostgreSQL claiming the same tick at once both insert;
// the primary key lets one commit and the other finds the row (ON
// CONFLICT DO NOTHING waits for the first transaction's outcome).
func (s *ScheduleStore) ClaimTick(ctx context.Context, tool string, at time.Time) (time.Time, bool, error) {
	if tool == "" || at.IsZero() {
		return time.Time{}, false, agentd.Errorf(agentd.EINVALID, "a tick claim needs its tool and time")
	}
	tick, err := EncTime("tick", at)
	if err != nil {
		return time.Time{}, false, err
	}
	var prev sql.NullInt64
	claimed := false
	err = s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		if err := tx.QueryRow(ctx, `SELECT MAX(tick) FROM schedule_ticks WHERE tool = ?`, tool).Scan(&prev); err != nil {
			return err
		}
		res, err := tx.Exec(ctx, `INSERT INTO schedule_ticks (tool, tick, claimed_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			tool, tick, time.Now().UnixNano())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		claimed = err == nil && n == 1
		return err
	})
	if err != nil || !claimed || !prev.Valid {
		return time.Time{}, claimed, err
	}
	return time.Unix(0, prev.Int64).UTC(), true, nil
}
