-- 0005: the event feed.
--
-- Every event gets a position, unique over all events of all conversations
-- and assigned in the appending transaction (MAX(position) + 1 under the
-- single writer's lock), so position order is commit order. Events carry
-- their conversation's tenant and project (immutable), so that "events after
-- P of tenant T" is one index range instead of a join that scans every other
-- tenant's events after P. Named consumers of the feed record how far they got.
--
-- Existing events were appended before anyone recorded an order across
-- conversations; they are numbered conversation by conversation (creation
-- time, then id), each in Seq order, so that within a conversation position
-- order is Seq order, as it is for every event appended from now on.

ALTER TABLE events ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN project_id TEXT NOT NULL DEFAULT '';

-- The log is append-only; the trigger steps aside for the backfill only.
DROP TRIGGER events_no_update;

UPDATE events SET position = numbered.position, tenant_id = numbered.tenant_id, project_id = numbered.project_id
FROM (
	SELECT e.conversation_id, e.seq, c.tenant_id, c.project_id,
		ROW_NUMBER() OVER (ORDER BY c.created_at, c.id, e.seq) AS position
	FROM events e JOIN conversations c ON c.id = e.conversation_id
) AS numbered
WHERE events.conversation_id = numbered.conversation_id AND events.seq = numbered.seq;

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
	SELECT RAISE(ABORT, 'events are append-only');
END;

-- EventsAfter over all events, and the next position (MAX).
CREATE UNIQUE INDEX events_position ON events (position);
-- EventsAfter of one tenant, and of one tenant and project: each a range of
-- its own index, so a consumer of a quiet tenant does not scan the others.
CREATE INDEX events_tenant_position ON events (tenant_id, position);
CREATE INDEX events_project_position ON events (tenant_id, project_id, position);

CREATE TABLE feed_consumers (
	name       TEXT PRIMARY KEY,
	position   INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
