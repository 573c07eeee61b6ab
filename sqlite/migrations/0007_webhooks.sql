-- 0007: the webhook outbox (docs/webhooks.md).
--
-- The event log is the outbox's source: events commit in the loop's own
-- transactions, nothing is added to them. The webhook dispatcher follows the
-- feed from its consumer cursor (feed_consumers 'webhooks') and, for each
-- event an endpoint wants, inserts a delivery row here in the same
-- transaction that advances the cursor. A delivery's id (the webhook-id) is
-- derived from (event, endpoint), so a crash between the two re-creates the
-- same rows with the same ids (INSERT OR IGNORE).
CREATE TABLE webhook_deliveries (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT, -- the list order and cursor
	id              TEXT NOT NULL UNIQUE,
	endpoint_id     TEXT NOT NULL,
	event_id        TEXT NOT NULL,
	event_name      TEXT NOT NULL,
	position        INTEGER NOT NULL,
	tenant_id       TEXT NOT NULL,
	project_id      TEXT NOT NULL,
	body            TEXT NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
	next_attempt_at INTEGER,          -- unix ns; NULL unless pending
	lease_owner     TEXT,
	lease_until     INTEGER,          -- unix ns; a claim lapses after it
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL
) STRICT;

-- Claims and the next-due timer: the due pending deliveries of one endpoint.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
-- The delivery log of a tenant's project, newest first.
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (tenant_id, project_id, seq);

CREATE TABLE webhook_attempts (
	delivery_seq INTEGER NOT NULL REFERENCES webhook_deliveries (seq),
	n            INTEGER NOT NULL,
	at           INTEGER NOT NULL,
	status_code  INTEGER NOT NULL,
	error        TEXT NOT NULL,
	duration_ns  INTEGER NOT NULL,
	PRIMARY KEY (delivery_seq, n)
) STRICT, WITHOUT ROWID;

-- An endpoint disabled by a 410 answer stays disabled, across restarts,
-- until an operator enables it.
CREATE TABLE webhook_endpoints (
	id              TEXT PRIMARY KEY,
	disabled_at     INTEGER,
	disabled_reason TEXT NOT NULL,
	updated_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
