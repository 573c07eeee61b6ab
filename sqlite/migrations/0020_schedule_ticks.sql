-- 0020: the claims of scheduled tools' ticks (package schedule,
-- docs/runtime.md). A replica runs a tick only after inserting its row: the
-- primary key lets exactly one claim of (tool, tick) in. tick and
-- claimed_at are unix nanoseconds in UTC.
CREATE TABLE schedule_ticks (
	tool       TEXT NOT NULL,
	tick       INTEGER NOT NULL,
	claimed_at INTEGER NOT NULL,
	PRIMARY KEY (tool, tick)
) STRICT, WITHOUT ROWID;
