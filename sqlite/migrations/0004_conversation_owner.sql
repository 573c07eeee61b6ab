-- 0004: the API key that created a conversation.
--
-- Client and delegate keys reach only the conversations they created (SPEC §5
-- "Roles within a tenant and project"); conversations from before this
-- migration have no creator and are reached by operator and admin keys only.

ALTER TABLE conversations ADD COLUMN created_by TEXT NOT NULL DEFAULT '';

-- GET /v1/approvals for a client key: its conversations' parked calls.
CREATE INDEX conversations_created_by ON conversations (tenant_id, project_id, created_by);
