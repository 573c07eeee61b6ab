-- 0010: what a call depends on besides its arguments (issue 13).
--
-- A file tool's call records the unified diff its card shows and the
-- digest of the file content it was classified against: an approval
-- applies only while that content still holds, else the call is parked
-- again with a fresh diff (docs/files.md). Subagents need no table: their
-- events are subagent_event rows of the parent conversation's log, and
-- their calls run inside the parent's task call (docs/subagents.md).

ALTER TABLE tool_calls ADD COLUMN diff TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN state_sha256 TEXT NOT NULL DEFAULT '';
