-- 0015: a subagent's refusals in the audit log (issue 17). A subagent's
-- calls are not stored calls (0010): its refusal is recorded with the
-- subagent_event that announces it, marked with the subagent's name and
-- the parent's task call that ran it.

ALTER TABLE audit ADD COLUMN subagent TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN task_tool_call_id TEXT NOT NULL DEFAULT '';
