package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/agentd-dev/agentd"
)

// EventLog is the conversations' durable event logs and the one feed of
// them all (agentd.EventLog, agentd.FeedStore's reads).
type EventLog struct {
	b Backend
	d *Dialect
}

// The event statements of every step and every feed read (Store.Prepared).
const (
	// eventColumns are the columns scanEvents scans, in its order.
	eventColumns = `conversation_id, seq, position, type, data`
	// eventsQuery is a page of a conversation's log (Events).
	eventsQuery = `SELECT ` + eventColumns + ` FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`
	// lastSeqQuery is a conversation's newest sequence number (LastSeq).
	lastSeqQuery = `SELECT last_seq FROM conversations WHERE id = ?`
	// AppendEventsIn's statements: the conversation's next sequence
	// numbers (its counter advanced by the number of its events that
	// follow one another), the insert (which takes the next position).
	nextSeqQuery     = `UPDATE conversations SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq, tenant_id, project_id`
	insertEventQuery = `INSERT INTO events (conversation_id, seq, tenant_id, project_id, type, data) VALUES (?, ?, ?, ?, ?, ?) RETURNING position`
)

// feedQueries are EventsAfter's statements: of every event (the log itself,
// stored in position order), of a tenant's (its index), of a tenant's
// project's (the tenant's index, skipping its other projects). Their
// parameters are the position, then the tenant and project ids the query
// names, then the limit.
var feedQueries = [...]string{
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? ORDER BY position LIMIT ?`,
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? AND tenant_id = ? ORDER BY position LIMIT ?`,
	`SELECT ` + eventColumns + ` FROM events WHERE position > ? AND tenant_id = ? AND project_id = ? ORDER BY position LIMIT ?`,
}

// AppendEvents appends events to their conversations' logs in one
// transaction and returns them with their sequence numbers. ENOTFOUND if a
// conversation does not exist, EINVALID if an event has no conversation or
// type or its data is not valid JSON; on any error nothing is appended.
func (s *EventLog) AppendEvents(ctx context.Context, events []agentd.EventDraft) ([]agentd.Event, error) {
	if err := checkEvents(events); err != nil {
		return nil, err
	}
	return writeEvents(ctx, s.b, events, func(context.Context, Tx) error { return nil })
}

// Events returns up to limit events of a conversation with Seq > afterSeq,
// in sequence order; limit <= 0 means no limit. An unknown conversation has
// no events.
func (s *EventLog) Events(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]agentd.Event, error) {
	var lim any = limit
	if limit <= 0 {
		lim = s.d.noLimit
	}
	var out []agentd.Event
	err := s.b.ReadOne(ctx, func(q Q) (err error) {
		out, err = queryEvents(ctx, q, eventsQuery, conversationID, afterSeq, lim)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LastSeq returns the Seq of the conversation's newest committed event: 0
// when it has none or does not exist.
func (s *EventLog) LastSeq(ctx context.Context, conversationID string) (int64, error) {
	var seq int64
	err := s.b.ReadOne(ctx, func(q Q) error {
		err := q.QueryRow(ctx, lastSeqQuery, conversationID).Scan(&seq)
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

// EventsAfter returns up to f.PageLimit() events with Position > f.After,
// of every conversation or only of f's tenant (and project), in position
// order. EINVALID when f is invalid (agentd.FeedFilter.Check).
func (s *EventLog) EventsAfter(ctx context.Context, f agentd.FeedFilter) ([]agentd.Event, error) {
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
	var out []agentd.Event
	err := s.b.Poll(ctx, func(q Q) (err error) {
		out, err = queryEvents(ctx, q, feedQueries[len(args)-1], append(args, f.PageLimit())...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// writeEvents runs fn and then appends events, in one write transaction
// of b, and returns the appended events: the shape of every write that
// announces itself. A transaction the backend runs again (PostgreSQL's
// retry of a lost connection) runs fn again from the start.
func writeEvents(ctx context.Context, b Backend, events []agentd.EventDraft, fn func(ctx context.Context, tx Tx) error) ([]agentd.Event, error) {
	var out []agentd.Event
	err := b.Write(ctx, func(ctx context.Context, tx Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		var err error
		out, err = AppendEventsIn(ctx, tx, events)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendEventsIn appends drafts, validated by checkEvents, inside tx. Each
// event takes the next value of its conversation's last_seq counter, which the same transaction
// advances, so sequence numbers are gapless: a rollback undoes both. Events
// of one conversation that follow one another among drafts (a step's
// message and run_finished) advance the counter with one statement. Its
// feed position is taken in commit order, as the backend orders its
// writers (Tx.BeforeEvents): SQLite's one writer holds the write lock from
// the transaction's first statement, PostgreSQL's transaction takes the
// feed lock here. Each event row also records its conversation's tenant
// and project, for EventsAfter's filters.
func AppendEventsIn(ctx context.Context, tx Tx, drafts []agentd.EventDraft) ([]agentd.Event, error) {
	if err := tx.BeforeEvents(ctx, len(drafts)); err != nil || len(drafts) == 0 {
		return nil, err
	}
	out := make([]agentd.Event, 0, len(drafts))
	for len(drafts) > 0 {
		n := 1
		for n < len(drafts) && drafts[n].ConversationID == drafts[0].ConversationID {
			n++
		}
		var err error
		if out, err = appendConversation(ctx, tx, drafts[:n], out); err != nil {
			return nil, err
		}
		drafts = drafts[n:]
	}
	return out, tx.AfterEvents(ctx)
}

// appendConversation appends drafts, events of one conversation, to out:
// one statement takes their sequence numbers, then each is inserted.
func appendConversation(ctx context.Context, tx Tx, drafts []agentd.EventDraft, out []agentd.Event) ([]agentd.Event, error) {
	conv := drafts[0].ConversationID
	var last int64
	var tenant, project string
	err := tx.QueryRow(ctx, nextSeqQuery, len(drafts), conv).Scan(&last, &tenant, &project)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "conversation %q not found", conv)
	} else if err != nil {
		return nil, err
	}
	for i, d := range drafts {
		data, err := EncJSON("event data", d.Data)
		if err != nil {
			return nil, err
		}
		e := agentd.Event{ConversationID: conv, Seq: last - int64(len(drafts)-1-i), Type: d.Type, Data: d.Data}
		if err := tx.QueryRow(ctx, insertEventQuery,
			e.ConversationID, e.Seq, tenant, project, e.Type, data).Scan(&e.Position); err != nil {
			return nil, err
		}
		if err := auditDraft(ctx, tx, d, tenant, project); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// auditDraft records the entry an appended event draft carries (a
// subagent's refusal), in the event's conversation, tenant and project.
func auditDraft(ctx context.Context, tx Tx, d agentd.EventDraft, tenant, project string) error {
	if d.Audit == nil {
		return nil
	}
	e := *d.Audit
	e.TenantID, e.ProjectID, e.ConversationID = tenant, project, d.ConversationID
	if !slices.Contains(agentd.AuditKinds, e.Kind) {
		return agentd.Errorf(agentd.EINVALID, "unknown audit kind %q", e.Kind)
	}
	return tx.Audit(ctx, &e)
}

// queryEvents runs query, a SELECT of eventColumns, and returns its rows
// as events.
func queryEvents(ctx context.Context, q Q, query string, args ...any) ([]agentd.Event, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
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
