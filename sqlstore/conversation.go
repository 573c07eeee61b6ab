package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agentd-dev/agentd"
)

// ConversationStore is the store's conversations and their messages
// (agentd.ConversationStore).
type ConversationStore struct{ b Backend }

// CreateConversation inserts c. EINVALID if c.ID is empty, c.Metadata is
// not valid JSON or c.CreatedAt is out of range; ECONFLICT if a
// conversation with that id exists.
func (s *ConversationStore) CreateConversation(ctx context.Context, c *agentd.Conversation) error {
	if c == nil || c.ID == "" {
		return agentd.Errorf(agentd.EINVALID, "conversation id is required")
	}
	metadata, err := EncJSON("metadata", c.Metadata)
	if err != nil {
		return err
	}
	created, err := EncTime("created_at", c.CreatedAt)
	if err != nil {
		return err
	}
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO conversations (id, tenant_id, project_id, agent, metadata, delegated, created_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.TenantID, c.ProjectID, c.Agent, metadata, c.Delegated, c.CreatedBy, created)
		return InsertErr(s.b.Err, err, "conversation", c.ID)
	})
}

// conversationQuery reads one conversation, on every step (Store.Prepared).
const conversationQuery = `
			SELECT id, tenant_id, project_id, agent, metadata, delegated, created_by, created_at, last_seq
			FROM conversations WHERE id = ?`

// Conversation returns the conversation, with the Seq of its newest event
// as of the read, or ENOTFOUND.
func (s *ConversationStore) Conversation(ctx context.Context, id string) (*agentd.Conversation, error) {
	var c agentd.Conversation
	var metadata sql.NullString
	var created sql.NullInt64
	err := s.b.ReadOne(ctx, func(q Q) error {
		err := q.QueryRow(ctx, conversationQuery, id).
			Scan(&c.ID, &c.TenantID, &c.ProjectID, &c.Agent, &metadata, &c.Delegated, &c.CreatedBy, &created, &c.LastSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return agentd.Errorf(agentd.ENOTFOUND, "conversation %q not found", id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.Metadata = decJSON(metadata)
	c.CreatedAt = decTime(created)
	return &c, nil
}
