-- 0027: input requests (SPEC §12, docs/inputs.md). An input is inserted
-- with its call's park (RecordStep) and answered once, by a conditional
-- update of its status. Times are unix nanoseconds in UTC; schema and
-- content are the JSON as written, answerers a JSON list. inputs_by_tenant
-- serves GET /v1/inputs (a tenant's and project's inputs in id order),
-- inputs_pending its status=pending filter, inputs_call a call's inputs
-- (a cancelled run's), inputs_due the deadline timer's earliest pending
-- input and its page of due ones. A run waiting on an input counts it among its
-- parked calls (runs.parked), as a parked call: nothing needs recounting,
-- no call is requires_input before this migration.
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
	expires_at      INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	action          TEXT NOT NULL DEFAULT '',
	content         TEXT,
	answered_by     TEXT NOT NULL DEFAULT '',
	answered_at     INTEGER,
	via             TEXT NOT NULL DEFAULT '',
	reason          TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX inputs_by_tenant ON inputs (tenant_id, project_id, id);
CREATE INDEX inputs_pending ON inputs (tenant_id, project_id, id) WHERE status = 'pending';
CREATE INDEX inputs_call ON inputs (tool_call_id);
CREATE INDEX inputs_due ON inputs (expires_at) WHERE status = 'pending';
