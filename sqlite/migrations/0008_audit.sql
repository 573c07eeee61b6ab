-- 0008: the audit log, bulk decisions and the filters of the pending list.
--
-- Decisions record the role of the API key that made them and the door they
-- came through (single, bulk, protocol; deadline and cancel for expiries and
-- cancellations).
--
-- The audit table is written in the transaction of the fact each entry
-- records (docs/audit.md). Entries are immutable (no row is ever deleted,
-- so a rowid is never reused); ids increase in commit order (the single
-- writer), so they are the cursor of GET /v1/audit.

ALTER TABLE decisions ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN via TEXT NOT NULL DEFAULT '';

CREATE TABLE audit (
	id                      INTEGER PRIMARY KEY,
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
	escalated               INTEGER NOT NULL,
	arguments_sha256        TEXT NOT NULL,
	edited_arguments_sha256 TEXT NOT NULL,
	connection              TEXT NOT NULL,
	method                  TEXT NOT NULL,
	endpoint                TEXT NOT NULL,
	outcome                 TEXT NOT NULL,
	created_at              INTEGER
) STRICT;

-- GET /v1/audit: a tenant and project's entries, paged by id; by call and
-- by conversation.
CREATE INDEX audit_tenant ON audit (tenant_id, project_id, id);
CREATE INDEX audit_tool_call ON audit (tenant_id, project_id, tool_call_id, id);
CREATE INDEX audit_conversation ON audit (tenant_id, project_id, conversation_id, id);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit entries are immutable');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit entries are immutable');
END;

-- GET /v1/approvals filters. Every index that holds parked calls only is
-- changed by every decision (the call leaves it), so there are two: one for
-- server_id, in id order, that also holds the tool name (the engine names a
-- tool's server with its name, so tool_name reads the server's range and
-- checks the name in the index) and one for expires_before, which
-- lists by deadline, so a first page is one range however few or many calls
-- match. conversation_id is served by tool_calls_conversation (a
-- conversation has few calls).
CREATE INDEX tool_calls_parked_tool ON tool_calls (tenant_id, project_id, server_id, id, name) WHERE status = 'requires_confirmation';
CREATE INDEX tool_calls_parked_deadline ON tool_calls (tenant_id, project_id, requires_approval_at, id) WHERE status = 'requires_confirmation';
