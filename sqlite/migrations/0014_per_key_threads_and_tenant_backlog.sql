-- 0014: a protocol thread's name is the API key's own (issue 17), and the
-- pending deliveries of a tenant's project are counted from an index of their
-- own.
--
-- A thread id is a name a client chose ("my-chat"): scoped by tenant, project
-- and protocol only, the first client key to use a name held it, and every
-- other key of the tenant was refused it for good. The key becomes part of
-- the thread's name. A binding made before this migration belongs to the key
-- that created its conversation (the only key a binding was ever made for).
CREATE TABLE protocol_threads_by_key (
  tenant_id       TEXT NOT NULL,
  project_id      TEXT NOT NULL,
  key_id          TEXT NOT NULL,
  protocol        TEXT NOT NULL,
  thread_id       TEXT NOT NULL,
  conversation_id TEXT NOT NULL REFERENCES conversations (id),
  created_at      INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, project_id, key_id, protocol, thread_id)
) WITHOUT ROWID;

INSERT INTO protocol_threads_by_key (tenant_id, project_id, key_id, protocol, thread_id, conversation_id, created_at)
SELECT t.tenant_id, t.project_id, c.created_by, t.protocol, t.thread_id, t.conversation_id, t.created_at
FROM protocol_threads t JOIN conversations c ON c.id = t.conversation_id;

DROP TABLE protocol_threads;
ALTER TABLE protocol_threads_by_key RENAME TO protocol_threads;

-- GET /v1/webhooks/endpoints: the backlog an operator sees is that of its
-- tenant and project (an endpoint without a tenant filter carries every
-- tenant's deliveries), counted from entries of pending deliveries only.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (tenant_id, project_id, endpoint_id) WHERE status = 'pending';
