package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agentd-dev/agentd"
)

// The message statements of every step (Store.Prepared).
const (
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
func (s *ConversationStore) AddMessage(ctx context.Context, m *agentd.Message, events []agentd.EventDraft) ([]agentd.Event, error) {
	if m == nil || m.ID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "message id is required")
	} else if m.ConversationID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "message conversation id is required")
	}
	created, err := EncTime("message created_at", m.CreatedAt)
	if err != nil {
		return nil, err
	}
	if err := checkEvents(events); err != nil {
		return nil, err
	}
	return writeEvents(ctx, s.b, events, func(ctx context.Context, tx Tx) error {
		if _, err := tx.Exec(ctx, insertMessageQuery, m.ID, m.ConversationID, nullString(m.RunID), m.Role, m.Content, created); err != nil {
			return InsertErr(s.b.Err, err, "message", m.ID)
		}
		return nil
	})
}

// Messages returns a conversation's messages in insertion order; an unknown
// conversation has none.
func (s *ConversationStore) Messages(ctx context.Context, conversationID string) ([]agentd.Message, error) {
	return s.messages(ctx, messagesQuery, conversationID)
}

// MessagesAfter implements agentd.ConversationStore.MessagesAfter.
// The cursor's row is found by its id and the rest read from
// messages_conversation after its rid (sqlite's TestQueryPlans); only an empty
// answer looks the cursor up again, to tell "none after it" from an
// unknown cursor.
func (s *ConversationStore) MessagesAfter(ctx context.Context, conversationID, afterID string) ([]agentd.Message, error) {
	if afterID == "" {
		return s.Messages(ctx, conversationID)
	}
	msgs, err := s.messages(ctx, messagesAfterQuery, conversationID, afterID, conversationID)
	if err != nil || len(msgs) > 0 {
		return msgs, err
	}
	return nil, s.messageExists(ctx, conversationID, afterID)
}

// messageExists returns nil if id is a message of the conversation, else
// ENOTFOUND (or the read's error).
func (s *ConversationStore) messageExists(ctx context.Context, conversationID, id string) error {
	var one int
	err := s.b.ReadOne(ctx, func(tx Q) error {
		return tx.QueryRow(ctx, messageExistsQuery, id, conversationID).Scan(&one)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return agentd.Errorf(agentd.ENOTFOUND, "message %q not found in conversation %q", id, conversationID)
	}
	return err
}

// messages runs query, a SELECT of a conversation's messages, with args.
func (s *ConversationStore) messages(ctx context.Context, query string, args ...any) ([]agentd.Message, error) {
	var msgs []agentd.Message
	err := s.b.ReadOne(ctx, func(tx Q) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m agentd.Message
			var created sql.NullInt64
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
