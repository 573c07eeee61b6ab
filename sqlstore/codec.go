package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/agentd-dev/agentd"
)

// Times are stored as unix nanoseconds in UTC (an INTEGER in SQLite, a
// BIGINT in PostgreSQL); the zero time as NULL.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// EncTime returns the column value of t, or EINVALID when t cannot be held
// in int64 nanoseconds (before 1677 or after 2262).
func EncTime(field string, t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	} else if t.Before(minTime) || t.After(maxTime) {
		return nil, agentd.Errorf(agentd.EINVALID, "%s out of range: %s", field, t.Format(time.RFC3339Nano))
	}
	return t.UnixNano(), nil
}

// EncBound is the column value of a time used as a bound of a query: as
// EncTime, but a time the columns cannot hold is clamped to the range they
// can (no stored time lies outside it), so a far-future bound means "any".
func EncBound(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	switch {
	case t.Before(minTime):
		return minTime.UnixNano()
	case t.After(maxTime):
		return maxTime.UnixNano()
	}
	return t.UnixNano()
}

// decTime is the inverse of EncTime; times come back in UTC.
func decTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// EncJSON returns the column value of raw: NULL when empty, else the bytes
// unchanged as TEXT. EINVALID when raw is not valid JSON.
func EncJSON(field string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	} else if !json.Valid(raw) {
		return nil, agentd.Errorf(agentd.EINVALID, "%s is not valid JSON", field)
	}
	return string(raw), nil
}

// decJSON is the inverse of EncJSON.
func decJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// nullString maps "" to NULL, for optional references.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// InsertErr is err, an insert's, mapped by the backend (mapErr) and named
// for the kind of object and its id: ECONFLICT when it exists already,
// ENOTFOUND when what it belongs to does not.
func InsertErr(mapErr func(error) error, err error, kind, id string) error {
	err = mapErr(err)
	switch agentd.ErrorCode(err) {
	case agentd.ECONFLICT:
		return &agentd.Error{Code: agentd.ECONFLICT, Message: kind + " " + strconv.Quote(id) + " already exists", Detail: err}
	case agentd.ENOTFOUND:
		return &agentd.Error{Code: agentd.ENOTFOUND, Message: kind + " " + strconv.Quote(id) + ": the conversation or run it belongs to was not found", Detail: err}
	}
	return err
}

// checkEvents validates drafts before they are appended: each names its
// conversation and type, and its data is empty or valid JSON.
func checkEvents(events []agentd.EventDraft) error {
	for i, e := range events {
		if e.ConversationID == "" {
			return agentd.Errorf(agentd.EINVALID, "event %d: conversation id is required", i)
		} else if e.Type == "" {
			return agentd.Errorf(agentd.EINVALID, "event %d: type is required", i)
		} else if _, err := EncJSON("event "+strconv.Itoa(i)+" data", e.Data); err != nil {
			return err
		}
	}
	return nil
}

// scanner is a Row or Rows.
type scanner interface {
	Scan(dest ...any) error
}

// queryAll runs query in q and returns its rows, each read by scan.
func queryAll[T any](ctx context.Context, q Q, scan func(scanner) (*T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}
