-- 0001: the schema of the PostgreSQL store: the SQLite store's schema as of
-- its migration 0015 (sqlite/migrations), in PostgreSQL's terms.
--
-- Times are BIGINT unix nanoseconds in UTC (NULL for the zero time), as in
-- SQLite: the contract round-trips times to the nanosecond, and timestamptz
-- holds microseconds. JSON columns are TEXT holding the caller's bytes
-- unchanged (jsonb would reorder keys and drop whitespace). Optional
-- references are NULL when empty. rid columns are insertion order.

CREATE TABLE conversations (
	id         TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL,
	project_id TEXT NOT NULL,
	agent      TEXT NOT NULL,
	metadata   TEXT,
	delegated  BOOLEAN NOT NULL,
	created_by TEXT NOT NULL DEFAULT '',
	created_at BIGINT,
	-- The Seq of the conversation's newest event, incremented in the
	-- transaction that appends, so sequence numbers are gapless.
	last_seq   BIGINT NOT NULL DEFAULT 0
);

-- GET /v1/approvals for a client key: its conversations' parked calls.
CREATE INDEX conversations_created_by ON conversations (tenant_id, project_id, created_by);

CREATE TABLE runs (
	rid             BIGINT GENERATED ALWAYS AS IDENTITY,
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	correlation_id  TEXT NOT NULL,
	status          TEXT NOT NULL,
	step            INTEGER NOT NULL,
	reason          TEXT NOT NULL,
	input_tokens    BIGINT NOT NULL,
	output_tokens   BIGINT NOT NULL,
	stop_reason     TEXT NOT NULL DEFAULT '',
	created_at      BIGINT,
	updated_at      BIGINT
);

CREATE INDEX runs_conversation_status ON runs (conversation_id, status);
-- At most one active run per conversation, enforced by the database too
-- (a violation of it is ERUNACTIVE, postgres.go storeErr).
CREATE UNIQUE INDEX runs_one_active ON runs (conversation_id) WHERE status IN ('running', 'waiting');
-- RunsToDrive walks the active runs only.
CREATE INDEX runs_active ON runs (status) WHERE status IN ('running', 'waiting');

CREATE TABLE messages (
	rid             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id              TEXT NOT NULL UNIQUE,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	run_id          TEXT REFERENCES runs (id),
	role            TEXT NOT NULL,
	content         TEXT NOT NULL,
	created_at      BIGINT
);

CREATE INDEX messages_conversation ON messages (conversation_id, rid);

CREATE TABLE tool_calls (
	rid                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
	escalated            BOOLEAN NOT NULL,
	status               TEXT NOT NULL,
	method               TEXT NOT NULL,
	endpoint             TEXT NOT NULL,
	requires_approval_at BIGINT,
	allowed_decisions    TEXT,
	result               TEXT,
	error                TEXT NOT NULL,
	created_at           BIGINT,
	updated_at           BIGINT,
	connection_name      TEXT NOT NULL DEFAULT '',
	path_template        TEXT NOT NULL DEFAULT '',
	params               TEXT,
	diff                 TEXT NOT NULL DEFAULT '',
	state_sha256         TEXT NOT NULL DEFAULT ''
);

CREATE INDEX tool_calls_conversation ON tool_calls (conversation_id, created_at, step, idx);
CREATE INDEX tool_calls_run ON tool_calls (run_id, step, idx);
-- ToolCallsByStatus, DueToolCalls, NextDeadline, ParkedCount.
CREATE INDEX tool_calls_status ON tool_calls (status, requires_approval_at);
-- RunsToDrive's probe of a waiting run's parked calls.
CREATE INDEX tool_calls_parked ON tool_calls (run_id, step) WHERE status = 'requires_confirmation';
-- GET /v1/approvals: a tenant's parked calls by id, by server, by deadline.
CREATE INDEX tool_calls_tenant_status ON tool_calls (tenant_id, project_id, status, id);
CREATE INDEX tool_calls_parked_tool ON tool_calls (tenant_id, project_id, server_id, id, name) WHERE status = 'requires_confirmation';
CREATE INDEX tool_calls_parked_deadline ON tool_calls (tenant_id, project_id, requires_approval_at, id) WHERE status = 'requires_confirmation';

CREATE TABLE decisions (
	rid                     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id                      TEXT NOT NULL UNIQUE,
	tool_call_id            TEXT NOT NULL REFERENCES tool_calls (id),
	decision                TEXT NOT NULL,
	reason                  TEXT NOT NULL,
	decided_by              TEXT NOT NULL,
	arguments_sha256        TEXT NOT NULL,
	created_at              BIGINT,
	edited_arguments        TEXT,
	edited_arguments_sha256 TEXT NOT NULL DEFAULT '',
	role                    TEXT NOT NULL DEFAULT '',
	via                     TEXT NOT NULL DEFAULT ''
);

CREATE INDEX decisions_tool_call ON decisions (tool_call_id, rid);

-- Decisions, events and audit entries are records: never changed, never
-- removed.
CREATE FUNCTION agentd_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME;
END;
$$;

CREATE TRIGGER decisions_immutable BEFORE UPDATE OR DELETE ON decisions
	FOR EACH ROW EXECUTE FUNCTION agentd_immutable();

-- The event log, keyed by feed position. A position is taken from the
-- sequence while the appending transaction holds the feed lock (a
-- transaction-level advisory lock, postgres.go lockFeed) until it commits, so
-- position order is commit order. A rolled-back append leaves a gap.
CREATE TABLE events (
	position        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	seq             BIGINT NOT NULL,
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	type            TEXT NOT NULL,
	data            TEXT
);

CREATE UNIQUE INDEX events_conversation_seq ON events (conversation_id, seq);
-- A tenant's feed, and a tenant's project's (which skips the other projects).
CREATE INDEX events_tenant ON events (tenant_id, position);

CREATE TRIGGER events_immutable BEFORE UPDATE OR DELETE ON events
	FOR EACH ROW EXECUTE FUNCTION agentd_immutable();

CREATE TABLE feed_consumers (
	name       TEXT PRIMARY KEY,
	position   BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);

-- The webhook outbox (docs/webhooks.md).
CREATE TABLE webhook_deliveries (
	seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- the list order and cursor
	id              TEXT NOT NULL UNIQUE,
	endpoint_id     TEXT NOT NULL,
	event_id        TEXT NOT NULL,
	event_name      TEXT NOT NULL,
	position        BIGINT NOT NULL,
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	body            TEXT NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
	next_attempt_at BIGINT,          -- NULL unless pending
	lease_owner     TEXT,
	lease_until     BIGINT,          -- a claim lapses after it
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (tenant_id, project_id, seq);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (tenant_id, project_id, endpoint_id) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
	delivery_seq BIGINT NOT NULL REFERENCES webhook_deliveries (seq),
	n            INTEGER NOT NULL,
	at           BIGINT NOT NULL,
	status_code  INTEGER NOT NULL,
	error        TEXT NOT NULL,
	duration_ns  BIGINT NOT NULL,
	PRIMARY KEY (delivery_seq, n)
);

CREATE TABLE webhook_endpoints (
	id              TEXT PRIMARY KEY,
	disabled_at     BIGINT,
	disabled_reason TEXT NOT NULL,
	updated_at      BIGINT NOT NULL
);

-- The audit log (docs/audit.md), written in the transaction of the fact each
-- entry records. Its ids are taken under the feed lock, as positions are, so
-- they increase in commit order: they are the cursor of GET /v1/audit.
CREATE TABLE audit (
	id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind                    TEXT NOT NULL,
	tenant_id               TEXT NOT NULL,
	project_id              TEXT NOT NULL,
	conversation_id         TEXT NOT NULL,
	run_id                  TEXT NOT NULL,
	tool_call_id            TEXT NOT NULL,
	tool_name               TEXT NOT NULL,
	key_id                  TEXT NOT NULL,
	role                    TEXT NOT NULL,
	via                     TEXT NOT NULL,
	decision                TEXT NOT NULL,
	reason                  TEXT NOT NULL,
	tier                    TEXT NOT NULL,
	escalated               BOOLEAN NOT NULL,
	arguments_sha256        TEXT NOT NULL,
	edited_arguments_sha256 TEXT NOT NULL,
	connection              TEXT NOT NULL,
	method                  TEXT NOT NULL,
	endpoint                TEXT NOT NULL,
	outcome                 TEXT NOT NULL,
	subagent                TEXT NOT NULL DEFAULT '',
	task_tool_call_id       TEXT NOT NULL DEFAULT '',
	created_at              BIGINT
);

CREATE INDEX audit_tenant ON audit (tenant_id, project_id, id);
CREATE INDEX audit_conversation ON audit (tenant_id, project_id, conversation_id, id);

CREATE TRIGGER audit_immutable BEFORE UPDATE OR DELETE ON audit
	FOR EACH ROW EXECUTE FUNCTION agentd_immutable();

-- Chat protocols' thread names, the API key's own (ThreadStore).
CREATE TABLE protocol_threads (
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	key_id          TEXT NOT NULL,
	protocol        TEXT NOT NULL,
	thread_id       TEXT NOT NULL,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, project_id, key_id, protocol, thread_id)
);
