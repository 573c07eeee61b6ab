package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agentd-dev/agentd"
)

// ThreadStore is the store's bindings of protocol threads to
// conversations (agentd.ThreadStore).
type ThreadStore struct{ b Backend }

// BindThread binds a protocol thread to a conversation unless it is bound
// already, and returns the conversation it is bound to (agentd.ThreadStore).
func (s *ThreadStore) BindThread(ctx context.Context, b agentd.ThreadBinding) (string, error) {
	if !fullThreadKey(b.ThreadKey) || b.ConversationID == "" {
		return "", agentd.Errorf(agentd.EINVALID, "thread binding needs tenant, project, key, protocol, thread and conversation")
	}
	created, err := EncTime("created_at", b.CreatedAt)
	if err != nil {
		return "", err
	}
	var bound string
	err = s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO protocol_threads (tenant_id, project_id, key_id, protocol, thread_id, conversation_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			b.TenantID, b.ProjectID, b.KeyID, b.Protocol, b.ThreadID, b.ConversationID, created)
		if err != nil {
			return InsertErr(s.b.Err, err, "thread", b.ThreadID)
		}
		return tx.QueryRow(ctx, threadQuery, b.TenantID, b.ProjectID, b.KeyID, b.Protocol, b.ThreadID).Scan(&bound)
	})
	return bound, err
}

// ThreadConversation returns the conversation a protocol thread is bound
// to, or ENOTFOUND (agentd.ThreadStore).
func (s *ThreadStore) ThreadConversation(ctx context.Context, k agentd.ThreadKey) (string, error) {
	if !fullThreadKey(k) {
		return "", agentd.Errorf(agentd.ENOTFOUND, "thread not found")
	}
	var conv string
	err := s.b.Read(ctx, func(tx Q) error {
		err := tx.QueryRow(ctx, threadQuery, k.TenantID, k.ProjectID, k.KeyID, k.Protocol, k.ThreadID).Scan(&conv)
		if errors.Is(err, sql.ErrNoRows) {
			return agentd.Errorf(agentd.ENOTFOUND, "thread not found")
		}
		return err
	})
	return conv, err
}

// threadQuery reads one binding by its whole primary key.
const threadQuery = `SELECT conversation_id FROM protocol_threads
	WHERE tenant_id = ? AND project_id = ? AND key_id = ? AND protocol = ? AND thread_id = ?`

func fullThreadKey(k agentd.ThreadKey) bool {
	return k.TenantID != "" && k.ProjectID != "" && k.KeyID != "" && k.Protocol != "" && k.ThreadID != ""
}
