package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agentd-dev/agentd"
)

// BindThread binds a protocol thread to a conversation unless it is bound
// already, and returns the conversation it is bound to (agentd.Store).
func (db *DB) BindThread(ctx context.Context, b agentd.ThreadBinding) (string, error) {
	if !fullThreadKey(b.ThreadKey) || b.ConversationID == "" {
		return "", agentd.Errorf(agentd.EINVALID, "thread binding needs tenant, project, key, protocol, thread and conversation")
	}
	created, err := encTime("created_at", b.CreatedAt)
	if err != nil {
		return "", err
	}
	var bound string
	err = db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO protocol_threads (tenant_id, project_id, key_id, protocol, thread_id, conversation_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			b.TenantID, b.ProjectID, b.KeyID, b.Protocol, b.ThreadID, b.ConversationID, created)
		if err != nil {
			return insertErr(err, "thread", b.ThreadID)
		}
		return tx.QueryRowContext(ctx, threadQuery, b.TenantID, b.ProjectID, b.KeyID, b.Protocol, b.ThreadID).Scan(&bound)
	})
	return bound, err
}

// ThreadConversation returns the conversation a protocol thread is bound
// to, or ENOTFOUND (agentd.Store).
func (db *DB) ThreadConversation(ctx context.Context, k agentd.ThreadKey) (string, error) {
	if !fullThreadKey(k) {
		return "", agentd.Errorf(agentd.ENOTFOUND, "thread not found")
	}
	var conv string
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, threadQuery, k.TenantID, k.ProjectID, k.KeyID, k.Protocol, k.ThreadID).Scan(&conv)
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
