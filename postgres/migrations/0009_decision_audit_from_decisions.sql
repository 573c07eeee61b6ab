-- 0009: a decision's audit entry is read from its decisions row, not
-- written a second time into audit (docs/performance.md §23, docs/audit.md
-- "Where entries live"), as SQLite's 0024.
--
-- A decision recorded from now on takes its audit_id from the audit
-- table's own identity sequence, under the feed lock, as the audit rows do
-- (postgres/audit.go, flushAudit): ids of both tables together increase in
-- commit order. The call's tier and escalated flag at the time of the
-- decision (a re-park can change them later) are kept with it.
--
-- Decisions recorded before this migration have their entry in audit and
-- no audit_id: they are not read as entries.
ALTER TABLE decisions ADD COLUMN audit_id BIGINT;
ALTER TABLE decisions ADD COLUMN tier TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN escalated BOOLEAN NOT NULL DEFAULT false;

-- GET /v1/audit: the decisions' entries in id order (each joined to its
-- call for the tenant and project); a call's are read from
-- decisions_tool_call.
CREATE UNIQUE INDEX decisions_audit ON decisions (audit_id) WHERE audit_id IS NOT NULL;
