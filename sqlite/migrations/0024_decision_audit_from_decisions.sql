-- 0024: a decision's audit entry is read from its decisions row, not
-- written a second time into audit (docs/performance.md §23, docs/audit.md
-- "Where entries live").
--
-- The entries of decisions, expiries and cancellations carry the decision's
-- who, role, via, reason and digests (already in decisions) and the call's
-- tenant, project, conversation, run and name (in tool_calls, never changed)
-- and its tier and escalated flag at the time of the decision (which a
-- re-park can change later): those two are kept with the decision, and the
-- tenant and project too, for the index of a tenant's entries.
--
-- From now on audit.id and decisions.rid are taken from one counter: every
-- insert into either table sets its id to one more than the greater of the
-- two tables' largest (sqlite/audit.go, nextAuditID), so a decision's rid is
-- its entry's id and ids across both tables increase in commit order (the
-- single writer; no row of either is ever deleted).
--
-- Decisions recorded before this migration already have their entry in
-- audit: audit_decisions_from holds the last such rid, and only decisions
-- after it are read as entries.
ALTER TABLE decisions ADD COLUMN tier TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN escalated INTEGER NOT NULL DEFAULT 0;

-- GET /v1/audit: a tenant and project's decision entries in id order (rid
-- ends the index key), so that a page does not walk other tenants'
-- decisions. Decisions from before have '' for both: their entries are in
-- audit.
ALTER TABLE decisions ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN project_id TEXT NOT NULL DEFAULT '';
CREATE INDEX decisions_tenant ON decisions (tenant_id, project_id);

CREATE TABLE audit_decisions_from (
	rid INTEGER NOT NULL
) STRICT;
INSERT INTO audit_decisions_from (rid) SELECT COALESCE(MAX(rid), 0) FROM decisions;
