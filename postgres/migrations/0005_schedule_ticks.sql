-- 0005: the claims of scheduled tools' ticks, as SQLite's 0020 (package
-- schedule, docs/runtime.md). A replica runs a tick only after inserting
-- its row: the primary key lets exactly one claim of (tool, tick) in.
-- tick and claimed_at are unix nanoseconds in UTC.
CREATE TABLE schedule_ticks (
	tool       TEXT NOT NULL,
	tick       BIGINT NOT NULL,
	claimed_at BIGINT NOT NULL,
	PRIMARY KEY (tool, tick)
);
