-- 0011: the event log stored in feed order.
--
-- 0005 kept the log keyed by (conversation_id, seq) and added three indexes
-- (position; tenant, position; tenant, project, position): every commit that
-- announces something then wrote four b-trees, which measured about a third
-- more per commit than before (docs/performance.md, "The event log's
-- layout"). Keyed by position, the log is appended at the right edge of its
-- own b-tree, the newest position is its last row (no index to search), and
-- the feed reads rows in the order they are stored. What remains is one index
-- for a conversation's events by sequence (the stream's replay) and one for a
-- tenant's events by position (a tenant's feed); a project's feed walks its
-- tenant's index and skips the other projects' rows.
--
-- The position is the row id (INTEGER PRIMARY KEY): an insert that names none
-- gets the newest plus one, under the single writer's lock, so position order
-- is still commit order. Events are never deleted, so no id is ever reused.

DROP TRIGGER events_no_update;

CREATE TABLE events_by_position (
	position        INTEGER PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	seq             INTEGER NOT NULL,
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	type            TEXT NOT NULL,
	data            TEXT
) STRICT;

INSERT INTO events_by_position (position, conversation_id, seq, tenant_id, project_id, type, data)
	SELECT position, conversation_id, seq, tenant_id, project_id, type, data FROM events ORDER BY position;

DROP TABLE events;
ALTER TABLE events_by_position RENAME TO events;

CREATE UNIQUE INDEX events_conversation_seq ON events (conversation_id, seq);
-- Its entries are (tenant_id, position): the position is the row id.
CREATE INDEX events_tenant ON events (tenant_id);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
	SELECT RAISE(ABORT, 'events are append-only');
END;
