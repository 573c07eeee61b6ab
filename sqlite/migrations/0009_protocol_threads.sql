-- 0009: the thread ids of the chat protocols (AG-UI threadId, the AI SDK's
-- chat id), chosen by clients, bound to conversations. Scoped by tenant,
-- project and protocol: two tenants using the same thread id never meet.

CREATE TABLE protocol_threads (
  tenant_id       TEXT NOT NULL,
  project_id      TEXT NOT NULL,
  protocol        TEXT NOT NULL,
  thread_id       TEXT NOT NULL,
  conversation_id TEXT NOT NULL REFERENCES conversations (id),
  created_at      INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, project_id, protocol, thread_id)
) WITHOUT ROWID;
