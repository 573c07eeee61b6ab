package postgres

import (
	"context"
	"errors"

	"github.com/agentd-dev/agentd"
	"github.com/jackc/pgx/v5"
)

// The message statements.
var (
	insertMessageQuery = `INSERT INTO messages (id, conversation_id, run_id, role, content, created_at) VALUES (?, ?, ?, ?, ?, ?)`
	messagesQuery      = `
			SELECT id, conversation_id, COALESCE(run_id, ''), role, content, created_at
			FROM messages WHERE conversation_id = ? ORDER BY rid`
	messagesAfterQuery = `
			SELECT id, conversation_id, COALESCE(run_id, ''), role, content, created_at
			FROM messages WHERE conversation_id = ?
				AND rid > (SELECT rid FROM messages WHERE id = ? AND conversation_id = ?) ORDER BY rid`
	messageExistsQuery = `SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?`
)

// AddMessage inserts a message and appends events, in one transaction.
// EINVALID if the id or conversation id is missing; ENOTFOUND if the
// conversation (or the run, when RunID is set) does not exist; ECONFLICT if
// the id exists. On any error nothing is written.
func (db *DB) AddMessage(ctx context.Context, m *agentd.Message, events []agentd.EventDraft) ([]agentd.Event, error) {
	if m == nil || m.ID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "message id is required")
	} else if m.ConversationID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "message conversation id is required")
	}
	created, err := encTime("message created_at", m.CreatedAt)
	if err != nil {
		return nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, err
	}
	var out []agentd.Event
	err = db.writeTx(ctx, func(tx *txn) error {
		if _, err := tx.Exec(ctx, insertMessageQuery, m.ID, m.ConversationID, nullString(m.RunID), m.Role, m.Content, created); err != nil {
			return insertErr(err, "message", m.ID)
		}
		var err error
		out, err = db.appendEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Messages returns a conversation's messages in insertion order; an unknown
// conversation has none.
func (db *DB) Messages(ctx context.Context, conversationID string) ([]agentd.Message, error) {
	return db.messages(ctx, messagesQuery, conversationID)
}

// MessagesAfter implements agentd.ConversationStore.MessagesAfter.
// The cursor's row is found by its id and the rest read from
// messages_conversation after its rid; only an empty answer looks the
// cursor up again, to tell "none after it" from an unknown cursor.
func (db *DB) MessagesAfter(ctx context.Context, conversationID, afterID string) ([]agentd.Message, error) {
	if afterID == "" {
		return db.Messages(ctx, conversationID)
	}
	msgs, err := db.messages(ctx, messagesAfterQuery, conversationID, afterID, conversationID)
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	return nil, db.messageExists(ctx, conversationID, afterID)
}

// messageExists returns nil if id is a message of the conversation, else
// ENOTFOUND (or the read's error).
func (db *DB) messageExists(ctx context.Context, conversationID, id string) error {
	var one int
	err := db.readTx(ctx, func(tx *txn) error {
		return tx.QueryRow(ctx, messageExistsQuery, id, conversationID).Scan(&one)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return agentd.Errorf(agentd.ENOTFOUND, "message %q not found in conversation %q", id, conversationID)
	}
	return err
}

// messages runs query, a SELECT of a conversation's messages, with args.
func (db *DB) messages(ctx context.Context, query string, args ...any) ([]agentd.Message, error) {
	var msgs []agentd.Message
	err := db.readTx(ctx, func(tx *txn) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m agentd.Message
			var created *int64
			if err := rows.Scan(&m.ID, &m.ConversationID, &m.RunID, &m.Role, &m.Content, &created); err != nil {
				return err
			}
			m.CreatedAt = decTime(created)
			msgs = append(msgs, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return msgs, nil
}
