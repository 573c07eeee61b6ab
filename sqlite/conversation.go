package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/agentd-dev/agentd"
)

// CreateConversation inserts c. EINVALID if c.ID is empty, c.Metadata is
// not valid JSON or c.CreatedAt is out of range; ECONFLICT if a
// conversation with that id exists.
func (db *DB) CreateConversation(ctx context.Context, c *agentd.Conversation) error {
	if c == nil || c.ID == "" {
		return agentd.Errorf(agentd.EINVALID, "conversation id is required")
	}
	metadata, err := encJSON("metadata", c.Metadata)
	if err != nil {
		return err
	}
	created, err := encTime("created_at", c.CreatedAt)
	if err != nil {
		return err
	}
	return db.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO conversations (id, tenant_id, project_id, agent, metadata, delegated, created_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.TenantID, c.ProjectID, c.Agent, metadata, c.Delegated, c.CreatedBy, created)
		return insertErr(err, "conversation", c.ID)
	})
}

// conversationQuery reads one conversation, on every step (stmt.go).
var conversationQuery = prepared(`
			SELECT id, tenant_id, project_id, agent, metadata, delegated, created_by, created_at, last_seq
			FROM conversations WHERE id = ?`)

// Conversation returns the conversation, with the Seq of its newest event
// as of the read, or ENOTFOUND.
func (db *DB) Conversation(ctx context.Context, id string) (*agentd.Conversation, error) {
	var c agentd.Conversation
	var metadata sql.NullString
	var created sql.NullInt64
	err := db.readOne(func(q querier) error {
		err := q.QueryRowContext(ctx, conversationQuery, id).
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

// insertErr gives the constraint violations of inserting the object kind
// with id their agentd codes and a message naming the object.
func insertErr(err error, kind, id string) error {
	err = storeErr(err)
	switch agentd.ErrorCode(err) {
	case agentd.ECONFLICT:
		return &agentd.Error{Code: agentd.ECONFLICT, Message: kind + " " + strconv.Quote(id) + " already exists", Detail: err}
	case agentd.ENOTFOUND:
		return &agentd.Error{Code: agentd.ENOTFOUND, Message: kind + " " + strconv.Quote(id) + ": the conversation or run it belongs to was not found", Detail: err}
	}
	return err
}
