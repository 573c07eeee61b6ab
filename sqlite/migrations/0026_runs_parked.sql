-- 0026: a run's count of parked calls at its current step (runs.parked),
-- kept by the store in the transaction that parks or decides a call, moves
-- the run to another step or cancels it. RunsToDrive then reads the runs
-- that must move on from one partial index (running runs, and waiting runs
-- with nothing parked) instead of probing tool_calls_parked once per
-- waiting run: its cost follows what must happen now, not the number of
-- parked calls (issue 29). The expression of runs_to_drive is the query's
-- own condition, word for word, so that the planner can use the index.
ALTER TABLE runs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET parked = (SELECT COUNT(*) FROM tool_calls c
	WHERE c.run_id = runs.id AND c.step = runs.step AND c.status = 'requires_confirmation')
	WHERE status IN ('running', 'waiting');
CREATE INDEX runs_to_drive ON runs (created_at) WHERE status = 'running' OR (status = 'waiting' AND parked = 0);
