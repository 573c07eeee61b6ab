package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/agentd-dev/agentd"
)

// AppendEvents appends events to their conversations' logs in one
// transaction and returns them with their sequence numbers. ENOTFOUND if a
// conversation does not exist, EINVALID if an event has no conversation or
// type or its data is not valid JSON; on any error nothing is appended.
func (db *DB) AppendEvents(ctx context.Context, events []agentd.EventDraft) ([]agentd.Event, error) {
	data, err := encodeEvents(events)
	if err != nil {
		return nil, err
	}
	if app := batchable(events, data); app != nil {
		if err := db.writeApp(ctx, app); err != nil {
			return nil, err
		}
		return app.out, nil
	}
	var out []agentd.Event
	err = db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
		out, err = db.appendEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Events returns up to limit events of a conversation with Seq > afterSeq,
// in sequence order; limit <= 0 means no limit. An unknown conversation has
// no events.
func (db *DB) Events(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]agentd.Event, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var out []agentd.Event
	err := db.readOne(func(q querier) (err error) {
		out, err = queryEvents(ctx, q, eventsQuery, conversationID, afterSeq, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eventsQuery is a page of a conversation's log (Events).
var eventsQuery = prepared(`SELECT ` + eventColumns + ` FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`)

// lastSeqQuery is a conversation's newest sequence number (LastSeq).
var lastSeqQuery = prepared(`SELECT last_seq FROM conversations WHERE id = ?`)

// LastSeq returns the Seq of the conversation's newest committed event: 0
// when it has none or does not exist.
func (db *DB) LastSeq(ctx context.Context, conversationID string) (int64, error) {
	var seq int64
	err := db.readOne(func(q querier) error {
		err := q.QueryRowContext(ctx, lastSeqQuery, conversationID).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// encodeEvents validates drafts and returns each one's data encoded for
// its row.
func encodeEvents(events []agentd.EventDraft) ([]any, error) {
	data := make([]any, len(events))
	for i, e := range events {
		if e.ConversationID == "" {
			return nil, agentd.Errorf(agentd.EINVALID, "event %d: conversation id is required", i)
		} else if e.Type == "" {
			return nil, agentd.Errorf(agentd.EINVALID, "event %d: type is required", i)
		}
		v, err := encJSON("event "+strconv.Itoa(i)+" data", e.Data)
		if err != nil {
			return nil, err
		}
		data[i] = v
	}
	return data, nil
}

// appendEvents' statements: the conversation's next sequence number, the
// insert (which takes the next position).
var (
	nextSeqQuery     = prepared(`UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq, tenant_id, project_id`)
	insertEventQuery = prepared(`INSERT INTO events (conversation_id, seq, tenant_id, project_id, type, data) VALUES (?, ?, ?, ?, ?, ?) RETURNING position`)
)

// appendEvents appends drafts inside tx. Each event takes the next value of
// its conversation's last_seq counter, which the same transaction
// increments, so sequence numbers are gapless: a rollback undoes both. Its
// feed position is the row id SQLite gives the insert, the newest event's of
// any conversation plus one (migration 0011): tx is a write transaction,
// which holds SQLite's one write lock from its first statement (BEGIN
// IMMEDIATE) to its commit, so no other transaction can take or commit a
// position meanwhile and position order is commit order. Each event row
// also records its conversation's tenant and project, for EventsAfter's
// filters.
func (db *DB) appendEvents(ctx context.Context, tx *sql.Tx, drafts []agentd.EventDraft) ([]agentd.Event, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	q := db.w(tx)
	out := make([]agentd.Event, 0, len(drafts))
	for _, d := range drafts {
		data, err := encJSON("event data", d.Data)
		if err != nil {
			return nil, err
		}
		e := agentd.Event{ConversationID: d.ConversationID, Type: d.Type, Data: d.Data}
		var tenant, project string
		err = q.QueryRowContext(ctx, nextSeqQuery, d.ConversationID).Scan(&e.Seq, &tenant, &project)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, agentd.Errorf(agentd.ENOTFOUND, "conversation %q not found", d.ConversationID)
		} else if err != nil {
			return nil, err
		}
		if err := q.QueryRowContext(ctx, insertEventQuery,
			e.ConversationID, e.Seq, tenant, project, e.Type, data).Scan(&e.Position); err != nil {
			return nil, err
		}
		if err := db.auditDraft(ctx, tx, d, tenant, project); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// eventColumns are the columns scanEvents scans, in its order.
const eventColumns = `conversation_id, seq, position, type, data`

// queryEvents runs query, a SELECT of eventColumns, in tx and returns its
// rows as events.
func queryEvents(ctx context.Context, q querier, query string, args ...any) ([]agentd.Event, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanEvents(rows)
}

// scanEvents returns the rows of a SELECT of eventColumns as events and
// closes them.
func scanEvents(rows *sql.Rows) ([]agentd.Event, error) {
	defer rows.Close()
	var out []agentd.Event
	for rows.Next() {
		var e agentd.Event
		var data sql.NullString
		if err := rows.Scan(&e.ConversationID, &e.Seq, &e.Position, &e.Type, &data); err != nil {
			return nil, err
		}
		e.Data = decJSON(data)
		out = append(out, e)
	}
	return out, rows.Err()
}
