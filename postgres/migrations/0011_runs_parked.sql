-- 0011: a run's count of parked calls at its current step (runs.parked),
-- so that RunsToDrive reads one partial index instead of probing the
-- parked calls once per waiting run, as SQLite's 0026.
ALTER TABLE runs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET parked = (SELECT COUNT(*) FROM tool_calls c
	WHERE c.run_id = runs.id AND c.step = runs.step AND c.status = 'requires_confirmation')
	WHERE status IN ('running', 'waiting');
CREATE INDEX runs_to_drive ON runs (created_at, rid) WHERE status = 'running' OR (status = 'waiting' AND parked = 0);
