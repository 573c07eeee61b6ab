package postgres

import (
	"context"

	"github.com/agentd-dev/agentd"
)

// feedQueries are EventsAfter's statements: of every event (the log itself,
// keyed by position), of a tenant's (its index), of a tenant's project's
// (the tenant's index, skipping its other projects). Their parameters are
// the position, then the tenant and project ids the query names, then the
// limit.
var feedQueries = [...]string{
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? ORDER BY position LIMIT ?`,
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? AND tenant_id = ? ORDER BY position LIMIT ?`,
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? AND tenant_id = ? AND project_id = ? ORDER BY position LIMIT ?`,
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
	// One statement reads one snapshot, so it needs no transaction around it.
	rows, err := db.pool.Query(ctx, rebind(feedQueries[len(args)-1]), append(args, f.PageLimit())...)
	if err != nil {
		return nil, storeErr(err)
	}
	out, err := scanEvents(rows)
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}
