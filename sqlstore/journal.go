package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentd-dev/agentd"
)

// JournalStore is the store's journal of durable tools' child calls
// (agentd.ChildJournal).
type JournalStore struct{ b Backend }

// JournaledChild returns one journaled child call of a durable tool's call
// (agentd.ChildJournal), or ENOTFOUND.
func (s *JournalStore) JournaledChild(ctx context.Context, tenantID, callID string, ordinal int) (*agentd.JournalEntry, error) {
	e := agentd.JournalEntry{TenantID: tenantID, ToolCallID: callID, Ordinal: ordinal}
	var result string
	var created int64
	err := s.b.Read(ctx, func(tx Q) error {
		err := tx.QueryRow(ctx, `SELECT digest, result, created_at FROM tool_call_children
			WHERE tenant_id = ? AND tool_call_id = ? AND ordinal = ?`, tenantID, callID, ordinal).Scan(&e.Digest, &result, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return agentd.Errorf(agentd.ENOTFOUND, "no journaled child %d of tool call %q", ordinal, callID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	e.Result, e.CreatedAt = []byte(result), time.Unix(0, created).UTC()
	return &e, nil
}

// JournalChild records one child call of a durable tool's call
// (agentd.ChildJournal).
func (s *JournalStore) JournalChild(ctx context.Context, e agentd.JournalEntry) error {
	if err := agentd.CheckJournalEntry(e); err != nil {
		return err
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	created, err := EncTime("created_at", e.CreatedAt)
	if err != nil {
		return err
	}
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		res, err := tx.Exec(ctx, `INSERT INTO tool_call_children (tenant_id, tool_call_id, ordinal, digest, result, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, e.TenantID, e.ToolCallID, e.Ordinal, e.Digest, string(e.Result), created)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return agentd.Errorf(agentd.ECONFLICT, "child %d of tool call %q is journaled already", e.Ordinal, e.ToolCallID)
		}
		return nil
	})
}
