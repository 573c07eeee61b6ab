-- 0006: start-up work proportional to what must run now (docs/loop.md
-- "Recovery"). RunsToDrive walks the active runs only and asks, for each
-- waiting one, whether a call of its current step is still parked; both
-- are answered from these partial indexes, so neither finished runs nor the
-- rows of calls are read. (NextDeadline, the deadline timer's query, is
-- served by tool_calls_status from 0001.)

CREATE INDEX runs_active ON runs (status, id, step) WHERE status IN ('running', 'waiting');

CREATE INDEX tool_calls_parked ON tool_calls (run_id, step) WHERE status = 'requires_confirmation';
