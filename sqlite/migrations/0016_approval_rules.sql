-- 0016: approval rules (SPEC §11.1, issue 22). A parked call keeps the
-- approval rule it was parked with and the approvals recorded on its
-- current card while its quorum is not reached, as one JSON object
-- {"approvers", "requester_may_approve", "quorum", "approvals"} (NULL: the
-- default rule, no approvals). A run records the key that started it.

ALTER TABLE tool_calls ADD COLUMN approval TEXT;
ALTER TABLE runs ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';
