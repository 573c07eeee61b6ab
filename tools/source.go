package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// ServerID is the server_id of the project's custom command tools.
const ServerID = "tools"

// Source is the project's custom command tools as one tool source
// (toolset.Source, ID ServerID), for the tool registry. It hands each
// tool's exposure to package confirm as it is written and classifies nothing
// itself. A Source is immutable and safe for concurrent use.
type Source struct {
	tools map[string]*Tool
	defs  []toolset.Tool // sorted by name
	ctx   Context        // nil: calls get no context endpoint
}

// Context opens a running call's per-call context endpoint (SPEC §4.1;
// callcontext.Endpoint is one): the variables of the command's
// environment, AGENTD_CONTEXT_URL and AGENTD_CONTEXT_TOKEN, and a function
// that closes it when the call ends. writes is the tool's confirm (true or
// "review"), uses its uses.tools, durable its execution "durable" (the
// call's child requests are journaled).
type Context interface {
	Open(call agentd.ToolCall, writes bool, uses []string, durable bool) (env []string, closeFn func())
}

// SourceOption configures NewSource.
type SourceOption func(*Source)

// WithContext gives every call of the source's tools a context endpoint
// opened by c for as long as the call runs.
func WithContext(c Context) SourceOption { return func(s *Source) { s.ctx = c } }

// NewSource returns the source of the tools ts (as LoadDir returns them,
// by name), llm_callable or not.
func NewSource(ts map[string]*Tool, opts ...SourceOption) *Source {
	s := &Source{tools: make(map[string]*Tool, len(ts))}
	for _, o := range opts {
		o(s)
	}
	names := make([]string, 0, len(ts))
	for name, t := range ts {
		s.tools[name] = t
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := ts[name]
		s.defs = append(s.defs, toolset.Tool{
			Spec: t.Spec(),
			Confirm: &confirm.Tool{Name: t.Name, ServerID: ServerID, Exposure: t.Exposure.Kind,
				Prompt: t.Exposure.Prompt, Validate: t.ValidateArguments, Approval: t.Approval},
			LLMCallable: t.LLMCallable,
			Idempotent:  t.Idempotent || t.Durable, // a durable call resumes from its journal
			Origin:      fmt.Sprintf("%s (tools/%s/tool.json)", ServerID, t.Name),
			Uses:        t.Uses,
			Invoke:      t.Triggers.Invoke,
		})
	}
	return s
}

// ID is ServerID.
func (s *Source) ID() string { return ServerID }

// Tools lists every tool, sorted by name; the same values on every call.
func (s *Source) Tools() []toolset.Tool { return s.defs }

// Execute runs the command of the tool call.Name names with call.ID and
// the effective arguments (see Tool.Run, whose errors it returns), with
// its context endpoint open while it runs (WithContext). A name the
// source does not have is an error, and nothing runs.
func (s *Source) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	t, ok := s.tools[call.Name]
	if !ok {
		return nil, fmt.Errorf("tool %q is not one of the project's command tools", call.Name)
	}
	if s.ctx == nil {
		return t.Run(ctx, call.ID, call.Arguments)
	}
	env, closeCtx := s.ctx.Open(call, t.Confirm != "", t.Uses, t.Durable)
	defer closeCtx()
	return t.run(ctx, call.ID, call.Arguments, env)
}
