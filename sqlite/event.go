package sqlite

import (
	"context"
	"strconv"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// AppendEvents appends events to their conversations' logs in one
// transaction and returns them with their sequence numbers: the events of
// one conversation without audit entries in the group commit's batch of
// appends (appendrun.go), any others as sqlstore.EventLog appends them. ENOTFOUND if a
// conversation does not exist, EINVALID if an event has no conversation or
// type or its data is not valid JSON; on any error nothing is appended.
func (db *DB) AppendEvents(ctx context.Context, events []agentd.EventDraft) ([]agentd.Event, error) {
	data, err := encodeEvents(events)
	if err != nil {
		return nil, err
	}
	if app := batchable(events, data); app != nil {
		if err := db.writeApp(ctx, app); err != nil {
			return nil, err
		}
		return app.out, nil
	}
	return db.EventLog.AppendEvents(ctx, events)
}

// encodeEvents validates drafts and returns each one's data encoded for
// its row.
func encodeEvents(events []agentd.EventDraft) ([]any, error) {
	data := make([]any, len(events))
	for i, e := range events {
		if e.ConversationID == "" {
			return nil, agentd.Errorf(agentd.EINVALID, "event %d: conversation id is required", i)
		} else if e.Type == "" {
			return nil, agentd.Errorf(agentd.EINVALID, "event %d: type is required", i)
		}
		v, err := sqlstore.EncJSON("event "+strconv.Itoa(i)+" data", e.Data)
		if err != nil {
			return nil, err
		}
		data[i] = v
	}
	return data, nil
}
