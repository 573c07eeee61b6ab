-- 0008: the journal of durable tools' child calls, as SQLite's 0023
-- (package tools/callcontext, docs/runtime.md): each child request a
-- durable tool's call made through its context endpoint and that
-- succeeded, keyed by the tenant, the parent call and the child's ordinal
-- in the call, with the digest of the request and the result the tool got.
-- created_at is unix nanoseconds in UTC.
CREATE TABLE tool_call_children (
	tenant_id    TEXT NOT NULL,
	tool_call_id TEXT NOT NULL,
	ordinal      INTEGER NOT NULL,
	digest       TEXT NOT NULL,
	result       TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, tool_call_id, ordinal)
);
