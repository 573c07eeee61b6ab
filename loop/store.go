package loop

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// Store is what the engine keeps durably: conversations and their
// messages, runs and their steps, tool calls and their decisions, the
// event log it appends every committed event to, the audit log it reads
// for Engine.Audit and the remembered grants (SPEC §11.2). It is the sum
// of the roles below, one per part of the engine, each naming only the
// store methods that part calls (methods of the root's ConversationStore,
// RunStore, ToolCallStore, EventLog, AuditLog and GrantStore). It does not
// bind threads, deliver webhooks or answer readiness.
// A store backend (sqlite, postgres) implements it; package server passes one
// to New.
type Store interface {
	serviceStore
	runnerStore
	timerStore
	leaseStore
	decisionStore
	inputStore
}

// inputStore is what the answerer uses: input requests (SPEC §12).
type inputStore interface {
	coreStore
	Input(ctx context.Context, id string) (*agentd.Input, error)
	Inputs(ctx context.Context, f agentd.InputFilter) ([]agentd.Input, error)
	ResolveInput(ctx context.Context, r agentd.InputResolution, events []agentd.EventDraft) (*agentd.Input, []agentd.Event, error)
	DueInputs(ctx context.Context, now time.Time, limit int) ([]agentd.Input, error)
	NextInputDeadline(ctx context.Context) (time.Time, error)
}

// coreStore is what every part reads and how events are committed (core).
type coreStore interface {
	Conversation(ctx context.Context, id string) (*agentd.Conversation, error)
	Run(ctx context.Context, id string) (*agentd.Run, error)
	ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error)
	AppendEvents(ctx context.Context, events []agentd.EventDraft) ([]agentd.Event, error)
}

// callUpdater moves one call, with its events, in one conditional update.
type callUpdater interface {
	UpdateToolCall(ctx context.Context, u agentd.CallUpdate, events []agentd.EventDraft) (*agentd.ToolCall, []agentd.Event, error)
}

// serviceStore is what the Engine's own methods use: conversations, runs
// started and cancelled, the pending list and the audit log.
type serviceStore interface {
	coreStore
	CreateConversation(ctx context.Context, c *agentd.Conversation) error
	Messages(ctx context.Context, conversationID string) ([]agentd.Message, error)
	ToolCalls(ctx context.Context, conversationID string) ([]agentd.ToolCall, error)
	StartRun(ctx context.Context, run *agentd.Run, msg *agentd.Message, events []agentd.EventDraft) ([]agentd.Event, error)
	CancelRun(ctx context.Context, runID, reason string, by agentd.Actor, now time.Time,
		plan func(run *agentd.Run, cancelled []agentd.ToolCall) []agentd.EventDraft) (*agentd.Run, []agentd.Event, error)
	PendingToolCalls(ctx context.Context, f agentd.PendingFilter) ([]agentd.ToolCall, error)
	Audit(ctx context.Context, f agentd.AuditFilter) ([]agentd.AuditEntry, error)
}

// historyStore is what a driver's history reads: what came after the
// messages it holds (historyCache.refresh).
type historyStore interface {
	MessagesAfter(ctx context.Context, conversationID, afterID string) ([]agentd.Message, error)
	ToolCallsAfter(ctx context.Context, conversationID, afterMessageID string) ([]agentd.ToolCall, error)
	MessageToolCalls(ctx context.Context, conversationID string, messageIDs []string) ([]agentd.ToolCall, error)
}

// runnerStore is what the runner uses: a run's steps and calls.
type runnerStore interface {
	coreStore
	callUpdater
	historyStore
	RunToolCalls(ctx context.Context, runID string) ([]agentd.ToolCall, error)
	RecordStep(ctx context.Context, r agentd.StepRecord, events []agentd.EventDraft) ([]agentd.Event, error)
	Inputs(ctx context.Context, f agentd.InputFilter) ([]agentd.Input, error)
	UpdateRun(ctx context.Context, u agentd.RunUpdate, events []agentd.EventDraft) (*agentd.Run, []agentd.Event, error)
}

// timerStore is what the timers use: the deadline index of parked calls.
type timerStore interface {
	coreStore
	callUpdater
	DueToolCalls(ctx context.Context, now time.Time, limit int) ([]agentd.ToolCall, error)
	ToolCallsDueBetween(ctx context.Context, after, until time.Time) ([]agentd.ToolCall, error)
	NextDeadline(ctx context.Context, after time.Time) (time.Time, error)
}

// leaseStore is what the leases use: run leases and the work a restart or
// a takeover finds.
type leaseStore interface {
	coreStore
	callUpdater
	LeaseRun(ctx context.Context, runID, owner string, now, until time.Time) (bool, error)
	ReleaseRun(ctx context.Context, runID, owner string) error
	RunsToDrive(ctx context.Context) ([]agentd.Run, error)
	ToolCallsByStatus(ctx context.Context, statuses ...agentd.CallStatus) ([]agentd.ToolCall, error)
}

// decisionStore is what the decider uses: parked calls decided one by
// one or together, and the remembered grants.
type decisionStore interface {
	coreStore
	callUpdater
	UpdateToolCalls(ctx context.Context, us []agentd.CallUpdate, events []agentd.EventDraft) ([]agentd.ToolCall, []agentd.Event, error)
	PendingToolCalls(ctx context.Context, f agentd.PendingFilter) ([]agentd.ToolCall, error)
	agentd.GrantStore
}
