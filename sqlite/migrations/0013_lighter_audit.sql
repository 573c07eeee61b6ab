-- 0013: a lighter decision commit (docs/performance.md, "The audit log's
-- indexes, lighter"). Every index of the audit table gets an entry in the
-- transaction of every decision, refusal and escalation, so the table keeps
-- two:
--
--   - audit_tenant and audit_conversation lose their trailing id: id is the
--     rowid, which SQLite appends to every index key anyway, so
--     (tenant_id, project_id) still serves
--     tenant_id = ? AND project_id = ? AND id > ? ORDER BY id in id order,
--     with smaller entries;
--   - audit_tool_call goes: a call's entries are read from its
--     conversation's (a conversation has few), the conversation taken from
--     the call's row (sqlite/audit.go, auditWhere).
DROP INDEX audit_tenant;
CREATE INDEX audit_tenant ON audit (tenant_id, project_id);
DROP INDEX audit_tool_call;
DROP INDEX audit_conversation;
CREATE INDEX audit_conversation ON audit (tenant_id, project_id, conversation_id);
