-- 0001: the initial schema.
--
-- Times are INTEGER unix nanoseconds in UTC (NULL for the zero time), so
-- deadlines compare as numbers. JSON columns are TEXT holding the caller's
-- bytes unchanged. Optional references are NULL when empty.

CREATE TABLE conversations (
	id         TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL,
	project_id TEXT NOT NULL,
	agent      TEXT NOT NULL,
	metadata   TEXT,
	delegated  INTEGER NOT NULL,
	created_at INTEGER,
	-- last_seq is the sequence number of the conversation's newest event;
	-- it is incremented in the transaction that appends, so sequence
	-- numbers are gapless.
	last_seq   INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE runs (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	correlation_id  TEXT NOT NULL,
	status          TEXT NOT NULL,
	step            INTEGER NOT NULL,
	reason          TEXT NOT NULL,
	input_tokens    INTEGER NOT NULL,
	output_tokens   INTEGER NOT NULL,
	created_at      INTEGER,
	updated_at      INTEGER
) STRICT;

CREATE INDEX runs_conversation_status ON runs (conversation_id, status);

-- At most one active run per conversation, enforced by the database too.
CREATE UNIQUE INDEX runs_one_active ON runs (conversation_id)
	WHERE status IN ('running', 'waiting');

CREATE TABLE messages (
	rid             INTEGER PRIMARY KEY, -- insertion order
	id              TEXT NOT NULL UNIQUE,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	run_id          TEXT REFERENCES runs (id),
	role            TEXT NOT NULL,
	content         TEXT NOT NULL,
	created_at      INTEGER
) STRICT;

CREATE INDEX messages_conversation ON messages (conversation_id, rid);

CREATE TABLE tool_calls (
	rid                  INTEGER PRIMARY KEY, -- insertion order
	id                   TEXT NOT NULL UNIQUE,
	tenant_id            TEXT NOT NULL,
	project_id           TEXT NOT NULL,
	conversation_id      TEXT REFERENCES conversations (id),
	run_id               TEXT REFERENCES runs (id),
	correlation_id       TEXT NOT NULL,
	message_id           TEXT NOT NULL,
	step                 INTEGER NOT NULL,
	idx                  INTEGER NOT NULL,
	name                 TEXT NOT NULL,
	server_id            TEXT NOT NULL,
	arguments            TEXT,
	arguments_sha256     TEXT NOT NULL,
	tier                 TEXT NOT NULL,
	reason               TEXT NOT NULL,
	escalated            INTEGER NOT NULL,
	status               TEXT NOT NULL,
	method               TEXT NOT NULL,
	endpoint             TEXT NOT NULL,
	requires_approval_at INTEGER,
	allowed_decisions    TEXT,
	result               TEXT,
	error                TEXT NOT NULL,
	created_at           INTEGER,
	updated_at           INTEGER
) STRICT;

CREATE INDEX tool_calls_conversation ON tool_calls (conversation_id, created_at, step, idx);
CREATE INDEX tool_calls_run ON tool_calls (run_id, step, idx);
-- Serves ToolCallsByStatus and DueToolCalls (status, then deadline).
CREATE INDEX tool_calls_status ON tool_calls (status, requires_approval_at);

CREATE TABLE decisions (
	rid              INTEGER PRIMARY KEY, -- insertion order
	id               TEXT NOT NULL UNIQUE,
	tool_call_id     TEXT NOT NULL REFERENCES tool_calls (id),
	decision         TEXT NOT NULL,
	reason           TEXT NOT NULL,
	decided_by       TEXT NOT NULL,
	arguments_sha256 TEXT NOT NULL,
	created_at       INTEGER
) STRICT;

CREATE INDEX decisions_tool_call ON decisions (tool_call_id, rid);

-- Decisions are an audit record: never changed, never removed.
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
BEGIN
	SELECT RAISE(ABORT, 'decisions are immutable');
END;

CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
BEGIN
	SELECT RAISE(ABORT, 'decisions are immutable');
END;

CREATE TABLE events (
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	seq             INTEGER NOT NULL,
	type            TEXT NOT NULL,
	data            TEXT,
	PRIMARY KEY (conversation_id, seq)
) STRICT, WITHOUT ROWID;

-- The event log is append-only.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
	SELECT RAISE(ABORT, 'events are append-only');
END;
