package postgres

import (
	"context"
	"errors"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
	"github.com/jackc/pgx/v5"
)

// AppendEvents appends events to their conversations' logs in one
// transaction and returns them with their sequence numbers. ENOTFOUND if a
// conversation does not exist, EINVALID if an event has no conversation or
// type or its data is not valid JSON; on any error nothing is appended.
func (db *DB) AppendEvents(ctx context.Context, events []agentd.EventDraft) ([]agentd.Event, error) {
	if err := sqlstore.CheckEvents(events); err != nil {
		return nil, err
	}
	var out []agentd.Event
	err := db.writeTx(ctx, func(tx *txn) (err error) {
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
	var lim any = limit
	if limit <= 0 {
		lim = nil // LIMIT NULL: no limit
	}
	var out []agentd.Event
	err := db.readTx(ctx, func(tx *txn) (err error) {
		out, err = queryEvents(ctx, tx, `
			SELECT `+eventColumns+` FROM events
			WHERE conversation_id = ? AND seq > ?
			ORDER BY seq LIMIT ?`, conversationID, afterSeq, lim)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LastSeq returns the Seq of the conversation's newest committed event: 0
// when it has none or does not exist.
func (db *DB) LastSeq(ctx context.Context, conversationID string) (int64, error) {
	var seq int64
	err := db.readTx(ctx, func(tx *txn) error {
		err := tx.QueryRow(ctx, `SELECT last_seq FROM conversations WHERE id = ?`, conversationID).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// appendEvents' statements: the conversation's next sequence number, the
// insert (which takes the next position).
var (
	nextSeqQuery     = `UPDATE conversations SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq, tenant_id, project_id`
	insertEventQuery = `INSERT INTO events (conversation_id, seq, tenant_id, project_id, type, data) VALUES (?, ?, ?, ?, ?, ?) RETURNING position`
)

// appendEvents appends drafts inside tx, after the audit entries tx has
// queued. Each event takes the next value of its conversation's last_seq
// counter, which the same transaction increments (the row lock on the
// counter orders a conversation's appenders), so sequence numbers are
// gapless: a rollback undoes both. Its feed position is the next value of
// the events' identity sequence, taken under the feed lock, which tx holds
// from here to its commit (txn.lockFeed), so position order is commit
// order. Each event row also records its conversation's tenant and
// project, for EventsAfter's filters.
func (db *DB) appendEvents(ctx context.Context, tx *txn, drafts []agentd.EventDraft) ([]agentd.Event, error) {
	if err := tx.flushAudit(ctx); err != nil || len(drafts) == 0 {
		return nil, err
	}
	if err := tx.lockFeed(ctx); err != nil {
		return nil, err
	}
	q := tx
	out := make([]agentd.Event, 0, len(drafts))
	for _, d := range drafts {
		data, err := encJSON("event data", d.Data)
		if err != nil {
			return nil, err
		}
		e := agentd.Event{ConversationID: d.ConversationID, Type: d.Type, Data: d.Data}
		var tenant, project string
		err = q.QueryRow(ctx, nextSeqQuery, d.ConversationID).Scan(&e.Seq, &tenant, &project)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, agentd.Errorf(agentd.ENOTFOUND, "conversation %q not found", d.ConversationID)
		} else if err != nil {
			return nil, err
		}
		if err := q.QueryRow(ctx, insertEventQuery,
			e.ConversationID, e.Seq, tenant, project, e.Type, data).Scan(&e.Position); err != nil {
			return nil, err
		}
		if err := db.auditDraft(ctx, tx, d, tenant, project); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := tx.notify(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// eventColumns are the columns scanEvents scans, in its order.
const eventColumns = `conversation_id, seq, position, type, data`

// queryEvents runs query, a SELECT of eventColumns, in tx and returns its
// rows as events.
func queryEvents(ctx context.Context, tx *txn, query string, args ...any) ([]agentd.Event, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanEvents(rows)
}

// scanEvents returns the rows of a SELECT of eventColumns as events and
// closes them.
func scanEvents(rows pgx.Rows) ([]agentd.Event, error) {
	defer rows.Close()
	var out []agentd.Event
	for rows.Next() {
		var e agentd.Event
		var data *string
		if err := rows.Scan(&e.ConversationID, &e.Seq, &e.Position, &e.Type, &data); err != nil {
			return nil, err
		}
		e.Data = decJSON(data)
		out = append(out, e)
	}
	return out, rows.Err()
}
