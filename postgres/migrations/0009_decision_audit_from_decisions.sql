-- 0009: a decision's audit entry is read from its decisions row, not
-- written a second time into audit (docs/performance.md §23, docs/audit.md
-- "Where entries live"), as SQLite's 0024.
--
-- A decision recorded from now on takes its audit_id from the audit
-- table's own identity sequence, under the feed lock, as the audit rows do
-- (postgres/audit.go, flushAudit): ids of both tables together increase in
-- commit order. The call's tier and escalated flag at the time of the
-- decision (a re-park can change them later) are kept with it, and the
-- call's tenant and project for the index of a tenant's entries.
--
-- Decisions recorded before this migration have their entry in audit and
-- no audit_id: they are not read as entries.
ALTER TABLE decisions ADD COLUMN audit_id BIGINT;
ALTER TABLE decisions ADD COLUMN tier TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN escalated BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE decisions ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN project_id TEXT NOT NULL DEFAULT '';

-- GET /v1/audit: a tenant and project's decision entries in id order, so
-- that a page does not walk other tenants' decisions; a call's are read
-- from decisions_tool_call.
CREATE INDEX decisions_tenant ON decisions (tenant_id, project_id, audit_id) WHERE audit_id IS NOT NULL;
