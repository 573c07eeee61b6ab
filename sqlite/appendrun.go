package sqlite

import (
	"context"
	"database/sql"
	"math/bits"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// Appends written together (docs/storage.md, "Group commit"). Most writes
// under load are AppendEvents of one conversation's events — a streamed
// reply is one text_delta per model delta, each its own call — and each of
// them through the generic path costs four statements on the committer's
// goroutine: the member's savepoint, the conversation's counter, the insert
// and the release. The committer instead runs every run of consecutive
// appends in its group as one batch: one statement advances the counters of
// all their conversations, and multi-row inserts write their events with
// positions taken from the log's newest one. A batch runs at the place of its
// first member in queue order, after every body queued before it and
// before every body queued after it, so each body still sees the writes of
// those queued before it; reordering appends among themselves is
// unobservable, since none of their callers has returned yet.
//
// A batch is all or nothing per member: a member whose conversation does
// not exist fails alone (ENOTFOUND) and writes nothing, and a statement that
// fails — which no valid append should make happen — rolls the whole batch
// back to its savepoint and fails its members, not the rest of the group.

// appendReq is one caller's AppendEvents of events of one conversation,
// without audit entries, validated and encoded before it is queued.
type appendReq struct {
	conv   string
	drafts []agentd.EventDraft
	data   []any // each draft's data, encoded (encJSON)
	out    []agentd.Event
}

// batchable returns events as an appendReq when the batch path can write
// them: every event of one conversation and none with an audit entry.
// Their data must have been validated.
func batchable(events []agentd.EventDraft, data []any) *appendReq {
	if len(events) == 0 {
		return nil
	}
	conv := events[0].ConversationID
	for _, e := range events {
		if e.ConversationID != conv || e.Audit != nil {
			return nil
		}
	}
	return &appendReq{conv: conv, drafts: events, data: data}
}

// insertRows bounds the rows of one multi-row insert: seven parameters
// each, well below SQLite's limit of 32,766.
const insertRows = 256

// lastPositionQuery is the log's newest position: its last row.
var lastPositionQuery = prepared(`SELECT COALESCE(MAX(position), 0) FROM events`)

// runAppends runs the appends of run, consecutive members of a group, as
// one batch inside a savepoint when the group has other members (savepoint
// true). It sets each member's error; the error returned is the
// savepoint's own, which loses the group's transaction.
func (db *DB) runAppends(tx *sql.Tx, run []*txReq, savepoint bool) error {
	q, ctx := db.sp(tx), context.Background()
	if savepoint {
		if _, err := q.ExecContext(ctx, savepointQuery); err != nil {
			return err
		}
	}
	if err := db.appendBatch(ctx, tx, run); err != nil {
		for _, r := range run {
			r.err, r.app.out = storeErr(err), nil
		}
		if savepoint {
			if _, err := q.ExecContext(ctx, rollbackToQuery); err != nil {
				return err
			}
		}
	}
	if savepoint {
		_, err := q.ExecContext(ctx, releaseQuery)
		return err
	}
	return nil
}

// convCounter is a conversation's part of a batch: how many events it
// takes, then the next sequence number to give and its tenant and project.
type convCounter struct {
	n, next         int64
	tenant, project string
	found           bool
}

// appendBatch writes the events of run's members. A member whose
// conversation does not exist gets ENOTFOUND and writes nothing; any other
// error is the batch's, and leaves writes behind for the caller to undo.
func (db *DB) appendBatch(ctx context.Context, tx *sql.Tx, run []*txReq) error {
	if len(run) == 1 && len(run[0].app.drafts) == 1 {
		return db.appendOne(ctx, tx, run[0])
	}
	convs := make(map[string]*convCounter, len(run))
	order := make([]string, 0, len(run))
	events := 0
	for _, r := range run {
		c := convs[r.app.conv]
		if c == nil {
			c = &convCounter{}
			convs[r.app.conv] = c
			order = append(order, r.app.conv)
		}
		c.n += int64(len(r.app.drafts))
		events += len(r.app.drafts)
	}
	if err := advanceCounters(ctx, db.w(tx), convs, order); err != nil {
		return err
	}
	var pos int64
	if err := db.w(tx).QueryRowContext(ctx, lastPositionQuery).Scan(&pos); err != nil {
		return err
	}
	rows := make([]any, 0, 7*min(events, insertRows)) // 28 KB at most, not for every batch
	for _, r := range run {
		c := convs[r.app.conv]
		if !c.found {
			r.err = agentd.Errorf(agentd.ENOTFOUND, "conversation %q not found", r.app.conv)
			continue
		}
		r.app.out = make([]agentd.Event, len(r.app.drafts))
		for i, d := range r.app.drafts {
			pos++
			r.app.out[i] = agentd.Event{ConversationID: r.app.conv, Seq: c.next, Position: pos, Type: d.Type, Data: d.Data}
			rows = append(rows, pos, r.app.conv, c.next, c.tenant, c.project, d.Type, r.app.data[i])
			c.next++
			if len(rows) == 7*insertRows {
				if err := insertEvents(ctx, db.w(tx), rows); err != nil {
					return err
				}
				rows = rows[:0]
			}
		}
	}
	if len(rows) > 0 {
		return insertEvents(ctx, db.w(tx), rows)
	}
	return nil
}

// appendOne writes r, a batch of one event (a lone stream's text_delta),
// as sqlstore.AppendEventsIn writes any event: the conversation's counter,
// then the insert, which takes the next position itself. A batch of more
// numbers its rows from the log's newest position, a statement this one
// does without.
func (db *DB) appendOne(ctx context.Context, tx *sql.Tx, r *txReq) error {
	out, err := sqlstore.AppendEventsIn(ctx, &wtx{db.w(tx), db}, r.app.drafts)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		r.err = err // its conversation does not exist: it wrote nothing
		return nil
	}
	r.app.out = out
	return err
}

// advanceCounters advances each conversation's last_seq by its count and
// notes, for those that exist, the first sequence number the batch gives
// and the conversation's tenant and project: one prepared statement per
// bit of their number, as insertEvents does.
func advanceCounters(ctx context.Context, q querier, convs map[string]*convCounter, order []string) error {
	args := make([]any, 0, 2*min(len(order), insertRows))
	for len(order) > 0 {
		n := min(1<<(bits.Len(uint(len(order)))-1), insertRows)
		args = args[:0]
		for _, id := range order[:n] {
			args = append(args, id, convs[id].n)
		}
		if err := advanceChunk(ctx, q, advanceQueries[n], convs, args); err != nil {
			return err
		}
		order = order[n:]
	}
	return nil
}

func advanceChunk(ctx context.Context, q querier, query string, convs map[string]*convCounter, args []any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, tenant, project string
		var last int64
		if err := rows.Scan(&id, &last, &tenant, &project); err != nil {
			return err
		}
		c := convs[id]
		c.next, c.tenant, c.project, c.found = last-c.n+1, tenant, project, true
	}
	return rows.Err()
}

// advanceQueries advance the counters of 1, 2, 4, … insertRows
// conversations, prepared once (at a model's pace a batch holds about one
// event of each of its conversations, and parsing this statement cost as
// much as the inserts).
var advanceQueries = advanceShapes()

func advanceShapes() map[int]string {
	m := map[int]string{}
	for n := 1; n <= insertRows; n *= 2 {
		var sb strings.Builder
		sb.WriteString(`UPDATE conversations SET last_seq = last_seq + c.column2 FROM (VALUES `)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?)")
		}
		sb.WriteString(`) AS c WHERE conversations.id = c.column1 RETURNING conversations.id, conversations.last_seq, tenant_id, project_id`)
		m[n] = prepared(sb.String())
	}
	return m
}

// insertQueries are the multi-row inserts of 1, 2, 4, … insertRows rows,
// prepared once (parsing an insert of 86 rows cost about a third of
// running it).
var insertQueries = insertShapes()

func insertShapes() map[int]string {
	m := map[int]string{}
	for n := 1; n <= insertRows; n *= 2 {
		m[n] = prepared(insertQuery(n))
	}
	return m
}

// insertQuery is the insert of n events' rows, seven values each in the
// order of its columns.
func insertQuery(n int) string {
	var sb strings.Builder
	sb.Grow(100 + 16*n)
	sb.WriteString(`INSERT INTO events (position, conversation_id, seq, tenant_id, project_id, type, data) VALUES `)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("(?,?,?,?,?,?,?)")
	}
	return sb.String()
}

// insertEvents inserts rows, seven values per event (at most insertRows
// events), with the fewest prepared inserts: one per bit of their number.
func insertEvents(ctx context.Context, q querier, rows []any) error {
	for len(rows) > 0 {
		n := 1 << (bits.Len(uint(len(rows)/7)) - 1)
		if _, err := q.ExecContext(ctx, insertQueries[n], rows[:7*n]...); err != nil {
			return err
		}
		rows = rows[7*n:]
	}
	return nil
}
