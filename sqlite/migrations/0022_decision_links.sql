-- 0022: decision links (SPEC §11.4, package links, docs/governance.md).
-- link_secret holds the one signing secret generated when
-- AGENTD_LINK_SECRET is not set (id is always 1); spent_links the links
-- already used: the primary key lets one use of each link in. spent_at is
-- unix nanoseconds in UTC.
CREATE TABLE link_secret (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	secret     BLOB NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE spent_links (
	id           TEXT PRIMARY KEY,
	tool_call_id TEXT NOT NULL,
	spent_at     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
