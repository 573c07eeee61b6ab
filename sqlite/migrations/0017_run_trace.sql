-- 0017: a run's trace context (issue 23): the W3C traceparent of its span
-- and the span ID of the caller it continues, so that the spans of a run
-- (an approval wait that spans a restart among them) join one trace.
-- Empty when traces are off.

ALTER TABLE runs ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN trace_caller TEXT NOT NULL DEFAULT '';
