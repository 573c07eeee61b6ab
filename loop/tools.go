package loop

import (
	"context"
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// ToolDef is one tool as a ToolSource offers it: what the model sees, what
// package confirm classifies a call with, and what the registry and crash
// recovery need to know. A ToolDef is immutable once listed.
type ToolDef struct {
	// Spec is the tool as the model sees it: name, description and the
	// JSON Schema of its arguments.
	Spec agentd.ToolSpec
	// Decision is what package confirm classifies a call of the tool with:
	// its server_id (the ID of its source), its base tier (a custom tool's
	// exposure, a connection's policy) and what the confirmation card shows
	// (connection, method, path template). Decision.Name is Spec.Name.
	Decision *confirm.Tool
	// LLMCallable false keeps the tool out of every model's tool list
	// (tool.json llm_callable); only the registry reads it.
	LLMCallable bool
	// Idempotent reports whether a call interrupted by a crash may run
	// again (SPEC §8); false reports it failed, outcome unknown.
	Idempotent bool
	// Origin says where the tool is defined, for load errors: for example
	// `tools (tools/lookup/tool.json)` or `connection "billing"`. Empty
	// means the source's ID.
	Origin string
}

// Toolset offers tools and runs their calls. Every ToolSource is one; so is
// the registry's view of the tools one agent's model sees
// (tools/registry), which is what cmd/agentd hands the loop.
type Toolset interface {
	// Tools lists the tools, in a stable order; the same list on every
	// call.
	Tools() []ToolDef
	// Execute runs a call of one of the tools that was cleared to run
	// (auto, or approved by a person) with the effective arguments and,
	// for a connection call, the HTTP request recorded on call when it was
	// classified. An error is the call's failure, its text read by the
	// model; a call of a tool the set does not have is such an error.
	Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error)
}

// ToolSource is one origin of tools: the project's command tools
// (tools.Source), the request tool and each connection's OpenAPI
// operations (package connections); MCP servers, the file tools, the
// subagents' task tool and Go-registered functions are meant to be sources
// too. Tools lists every tool of the source, llm_callable or not; the
// registry (tools/registry) checks names across sources once, at start.
type ToolSource interface {
	Toolset
	// ID is the source's server_id: every Decision.ServerID of its tools.
	ID() string
}
