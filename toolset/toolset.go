// Package toolset is the contract between the agent loop and the sources
// of its tools: a Source offers Tools and runs their calls, a Set is what
// the loop runs calls through, and Hooks are the project's preToolUse and
// postToolUse hooks. Every tool source (command tools, connections, the
// file tools, the subagents' task tool, MCP servers, Go functions)
// imports this package, agentd's domain types and package confirm, and
// never the loop: package server hands the sources to the registry
// (tools/registry) and the registry's Set to the loop.
//
// The package holds types only; it imports the domain package and confirm
// and nothing else of agentd's.
package toolset

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// Tool is one tool as a Source offers it: what the model sees, what
// package confirm classifies a call with, and what the registry and crash
// recovery need to know. A Tool is immutable once listed.
type Tool struct {
	// Spec is the tool as the model sees it: name, description and the
	// JSON Schema of its arguments.
	Spec agentd.ToolSpec
	// Confirm is the tool as package confirm sees it when it classifies a
	// call: its server_id (the ID of its source), its base tier (a custom
	// tool's exposure, a connection's policy) and what the confirmation
	// card shows (connection, method, path template). Confirm.Name is
	// Spec.Name.
	Confirm *confirm.Tool
	// LLMCallable false keeps the tool out of every model's tool list
	// (tool.json llm_callable); only the registry reads it.
	LLMCallable bool
	// Idempotent reports whether a call interrupted by a crash may run
	// again (SPEC §8): an idempotent tool, or a durable one (its child
	// requests are journaled, so a re-run sends none twice); false
	// reports it failed, outcome unknown.
	Idempotent bool
	// Origin says where the tool is defined, for load errors: for example
	// `tools (tools/lookup/tool.json)` or `connection "billing"`. Empty
	// means the source's ID.
	Origin string
	// Prepare, when set, looks at the state a call of the tool depends on
	// besides its arguments (a file tool's file) when the call is
	// classified and again right before it runs, given the effective
	// arguments. An error refuses the call (tier never) with the error's
	// text as the reason: a path that leads outside the workspace, an edit
	// that cannot apply. Nil for tools whose calls depend on their
	// arguments alone.
	Prepare func(ctx context.Context, args json.RawMessage) (Preparation, error)
	// TenantIDs are the tenants that see the tool (its connection's or
	// MCP server's tenant_ids); nil: every tenant. A tenant not listed
	// does not find the tool in its model's tool list or in GET /v1/tools,
	// and a call of it from that tenant is a call of an unknown tool.
	TenantIDs []string
	// Uses are the tools a composite's handler may call through its
	// per-call context endpoint (tool.json uses.tools); nil for a tool
	// that is not a composite. The registry refuses at load a composite
	// that uses a requires-confirmation or connection tool.
	Uses []string
	// Invoke reports the tool's invoke trigger (tool.json triggers.invoke):
	// POST /v1/tools/{name}/run may run it, in the durable execution
	// context. False for every tool of a source without triggers.
	Invoke bool
}

// ForTenant reports whether the tenant sees the tool (TenantIDs).
func (t Tool) ForTenant(tenantID string) bool {
	return t.TenantIDs == nil || slices.Contains(t.TenantIDs, tenantID)
}

// Preparation is what a tool source's Prepare contributes to a call's
// classification.
type Preparation struct {
	// Diff is the card's diff: a unified diff of exactly what the call
	// would change ("" when none applies).
	Diff string
	// State is a digest of the state the call would change (a file's
	// content). An approval applies only while it still holds: when it
	// differs right before the call runs, the call is parked again with a
	// fresh card instead of running.
	State string
}

// Hook phases of a preToolUse hook (SPEC §4.3).
const (
	PhaseClassify = "classify"
	PhaseExecute  = "execute"
)

// HookCall is what a hook is told of a call: SPEC §4.3's stdin object,
// without the point (the method says it).
type HookCall struct {
	ToolCallID     string
	ToolName       string
	ServerID       string
	Arguments      json.RawMessage
	ConversationID string
	RunID          string
	Tier           agentd.Tier
	// Phase is PhaseClassify or PhaseExecute.
	Phase string
}

// Hooks are the project's preToolUse and postToolUse hooks (package hooks
// runs them; package server wires them). The loop calls them for
// model-selected calls only: the agent's and its subagents'.
type Hooks interface {
	// PreToolUse runs the hooks that match the call's tool name, in name
	// order, each seeing the arguments as the previous one rewrote them,
	// and returns their combined verdict for package confirm to apply
	// (nil: no hook matched). A hook's failure is already part of the
	// verdict (its fail_policy).
	PreToolUse(ctx context.Context, call HookCall) *confirm.HookVerdict
	// PostToolUse runs the matching postToolUse hooks with the call's
	// outcome (status completed or failed, result or error); their output
	// is ignored. The error reports hooks that failed, for the log.
	PostToolUse(ctx context.Context, call HookCall, status agentd.CallStatus, result json.RawMessage, errText string) error
}

// Set offers tools and runs their calls. Every Source is one; so is the
// registry's view of the tools one agent's model sees (tools/registry),
// which is what package server hands the loop.
type Set interface {
	// Tools lists the tools, in a stable order: the same slice on every
	// call until the tools change (only a Changing source's do, and a set
	// over one), then another slice. The loop reads it for each model
	// step, so a change reaches the model at its next step.
	Tools() []Tool
	// Execute runs a call of one of the tools that was cleared to run
	// (auto, or approved by a person) with the effective arguments and,
	// for a connection call, the HTTP request recorded on call when it was
	// classified. An error is the call's failure, its text read by the
	// model; a call of a tool the set does not have is such an error.
	Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error)
}

// Source is one origin of tools: the project's command tools
// (tools.Source), the request tool and each connection's OpenAPI
// operations (package connections), the file tools (package files), the
// subagents' task tool (loop.TaskSource) and each MCP server (package
// mcp) and the Go functions of a program that embeds agentd (package
// tools/gofunc, or any Source in server.Options). Tools lists every
// tool of the source, llm_callable or not; the registry (tools/registry)
// checks names across sources at start, and again for a Changing source
// when its tools change.
type Source interface {
	Set
	// ID is the source's server_id: every Confirm.ServerID of its tools.
	ID() string
}

// Changing is a Source whose tools change while agentd runs: an MCP
// server that announces notifications/tools/list_changed, or that failed
// to start and came up later. Its Tools changes only with Version.
type Changing interface {
	Source
	// Version increases whenever Tools lists other tools.
	Version() uint64
}
