-- 0021: remembered grants (SPEC §11.2, docs/governance.md). A grant is
-- inserted in the transaction of the approval that made it. Times are unix
-- nanoseconds in UTC; match is the JSON as written; creator_groups a JSON
-- list. The index serves a classification's lookup: the live project
-- grants of a tool in one tenant and project, and its conversation grants
-- of one conversation (two ranges, however many other conversations have
-- grants).
CREATE TABLE grants (
	id               TEXT PRIMARY KEY,
	tenant_id        TEXT NOT NULL,
	project_id       TEXT NOT NULL,
	scope            TEXT NOT NULL,
	conversation_id  TEXT NOT NULL,
	tool_call_id     TEXT NOT NULL,
	tool_name        TEXT NOT NULL,
	server_id        TEXT NOT NULL,
	connection       TEXT NOT NULL,
	method           TEXT NOT NULL,
	endpoint         TEXT NOT NULL,
	match            TEXT NOT NULL,
	arguments_sha256 TEXT NOT NULL,
	created_by       TEXT NOT NULL,
	creator_role     TEXT NOT NULL,
	creator_groups   TEXT NOT NULL,
	created_at       INTEGER NOT NULL,
	expires_at       INTEGER NOT NULL,
	revoked_at       INTEGER,
	revoked_by       TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX grants_live ON grants (tenant_id, project_id, tool_name, scope, conversation_id, expires_at) WHERE revoked_at IS NULL;
CREATE INDEX grants_by_tenant ON grants (tenant_id, project_id, id);
