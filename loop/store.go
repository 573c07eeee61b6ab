package loop

import "github.com/agentd-dev/agentd"

// Store is what the engine keeps durably: conversations and their
// messages, runs and their steps, tool calls and their decisions, the
// event log it appends every committed event to, the audit log it reads
// for Engine.Audit and the remembered grants (SPEC §11.2): the store's
// roles the loop uses. It does not bind threads, deliver webhooks or
// answer readiness.
// A store backend (sqlite) implements it; cmd/agentd passes one to New.
type Store interface {
	agentd.ConversationStore
	agentd.RunStore
	agentd.ToolCallStore
	agentd.EventLog
	agentd.AuditLog
	agentd.GrantStore
}
