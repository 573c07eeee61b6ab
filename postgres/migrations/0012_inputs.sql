-- 0012: input requests, as SQLite's 0027 (SPEC §12, docs/inputs.md).
-- Times are unix nanoseconds in UTC; schema and content are the JSON as
-- written, answerers a JSON list.
CREATE TABLE inputs (
	id              TEXT PRIMARY KEY,
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	conversation_id TEXT NOT NULL REFERENCES conversations (id),
	run_id          TEXT NOT NULL,
	tool_call_id    TEXT NOT NULL REFERENCES tool_calls (id),
	tool_name       TEXT NOT NULL,
	server_id       TEXT NOT NULL,
	status          TEXT NOT NULL,
	source          TEXT NOT NULL,
	key             TEXT NOT NULL,
	round           INTEGER NOT NULL,
	mode            TEXT NOT NULL,
	message         TEXT NOT NULL,
	schema          TEXT,
	answerers       TEXT NOT NULL,
	expires_at      BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	action          TEXT NOT NULL DEFAULT '',
	content         TEXT,
	answered_by     TEXT NOT NULL DEFAULT '',
	answered_at     BIGINT,
	via             TEXT NOT NULL DEFAULT '',
	reason          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX inputs_by_tenant ON inputs (tenant_id, project_id, id);
CREATE INDEX inputs_pending ON inputs (tenant_id, project_id, id) WHERE status = 'pending';
CREATE INDEX inputs_call ON inputs (tool_call_id);
CREATE INDEX inputs_due ON inputs (expires_at) WHERE status = 'pending';
