// Package callcontext is the per-call context endpoint of command tools
// (SPEC §4.1): while a command tool's call runs, its process has
// AGENTD_CONTEXT_URL and AGENTD_CONTEXT_TOKEN in its environment, and with
// that token it may make requests on the project's connections
// (POST …/request, gated by the tool's confirm) and call the tools its
// tool.json lists in uses.tools (POST …/tools/{name}, a composite's
// children). The token is valid only while that call runs and only for its
// tenant, project and conversation; afterwards it is refused (401).
//
// The package holds the tokens and the rules; package api serves the two
// routes on the main HTTP server and package tools hands the environment
// to the command. It imports the tool contract (toolset), confirm and the
// domain, never the loop: a composite's children are run by the registry
// (tools/registry) and its requests by package connections, both handed
// in by package server. docs/runtime.md is the user's view.
package callcontext

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// The environment variables a command tool gets.
const (
	EnvURL   = "AGENTD_CONTEXT_URL"
	EnvToken = "AGENTD_CONTEXT_TOKEN"
)

// tokenPrefix marks a context token (it is not an API key).
const tokenPrefix = "agentd_ctx_"

// Tools is the registry as the endpoint uses it: a tool by name (llm_callable
// or not) and running a cleared call of it. *registry.Registry is one.
type Tools interface {
	Tool(name string) (toolset.Tool, bool)
	Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error)
}

// Requests performs one request of a command tool on a connection:
// connections.Durable.Inline, whose errors (agentd.Error codes) the
// endpoint returns as they are. It returns the answer and whether it is a
// preview (nothing was sent).
type Requests interface {
	Inline(ctx context.Context, args json.RawMessage, caller agentd.Principal, o RequestOptions) (out any, preview bool, err error)
}

// RequestOptions are what the calling tool allows a request.
type RequestOptions struct {
	// Writes is the tool's confirm (true or "review").
	Writes bool
	// Durable is the tool's execution "durable": a confirm-tier write that
	// does not declare intent confirmed_write answers a preview.
	Durable bool
	// Delegated is the calling tool call's agentd.ToolCall.Delegated:
	// the request is classified as a delegated call's
	// (delegations.escalateConfirm applies).
	Delegated bool
	// IdempotencyKey is the caller's key of a durable tool's request:
	// sent downstream on a write, namespaced by tenant and project, as the
	// durable path sends one. Empty: a fresh key.
	IdempotencyKey string
}

// ChildResult is the answer of POST …/tools/{name}: the child call's
// outcome, completed with its result or failed with its error.
type ChildResult struct {
	Status agentd.CallStatus `json:"status"`
	Result json.RawMessage   `json:"result,omitempty"`
	Error  string            `json:"error,omitempty"`
}

// Endpoint holds the open calls' tokens and answers their requests. It is
// safe for concurrent use. Its URL and its Tools and Requests are set by
// package server before the engine starts (SetURL, Wire).
type Endpoint struct {
	url atomic.Pointer[string]
	log zerolog.Logger

	mu       sync.Mutex
	open     map[[sha256.Size]byte]*grant // by the token's SHA-256
	tools    Tools
	requests Requests
	journal  agentd.ChildJournal // nil: durable tools' children are not journaled
}

// grant is one running call's right to the endpoint.
type grant struct {
	digest   [sha256.Size]byte
	call     agentd.ToolCall
	writes   bool
	uses     []string
	children atomic.Int64 // child calls made, for their ids
	durable  bool
	ordinal  atomic.Int64 // a durable call's child requests made, both routes
}

// New returns an endpoint with no open call, logging on log.
func New(log zerolog.Logger) *Endpoint {
	return &Endpoint{log: log, open: map[[sha256.Size]byte]*grant{}}
}

// SetURL sets AGENTD_CONTEXT_URL: the base URL of the two routes on the
// server, e.g. http://127.0.0.1:8080/v1/context. Until it is set, calls
// get no context variables.
func (e *Endpoint) SetURL(u string) { e.url.Store(&u) }

// Wire hands the endpoint the registry that runs a composite's children
// and the connections' request path; nil ones refuse what they would do.
func (e *Endpoint) Wire(tools Tools, requests Requests) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tools, e.requests = tools, requests
}

// WireJournal hands the endpoint the store's journal of durable tools'
// child calls (docs/runtime.md#durable-tools); without one a durable
// tool's children run as an inline tool's.
func (e *Endpoint) WireJournal(j agentd.ChildJournal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.journal = j
}

// Open opens the context of a running call of a command tool: it returns
// the variables for the command's environment ("NAME=value") and a
// function that closes the context when the call ends, after which the
// token is refused. writes is the tool's confirm (true or "review"), uses
// its uses.tools, durable its execution "durable" (journal.go).
func (e *Endpoint) Open(call agentd.ToolCall, writes bool, uses []string, durable bool) (env []string, closeFn func()) {
	u := e.url.Load()
	if u == nil || *u == "" {
		return nil, func() {}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(fmt.Sprintf("callcontext: random token: %v", err)) // crypto/rand does not fail on Linux
	}
	token := tokenPrefix + hex.EncodeToString(raw[:])
	g := &grant{digest: sha256.Sum256([]byte(token)), call: call, writes: writes, uses: slices.Clone(uses), durable: durable}
	e.mu.Lock()
	e.open[g.digest] = g
	e.mu.Unlock()
	return []string{EnvURL + "=" + *u, EnvToken + "=" + token}, func() {
		e.mu.Lock()
		delete(e.open, g.digest)
		e.mu.Unlock()
	}
}

// OpenCalls reports how many calls have an open context (for tests and
// metrics).
func (e *Endpoint) OpenCalls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.open)
}

// lookup returns the open call the token was issued for. The token is
// looked up by its SHA-256 (the map's key: how long a lookup takes says
// nothing of a token's bytes); it is never logged.
func (e *Endpoint) lookup(token string) (*grant, Tools, Requests, error) {
	digest := sha256.Sum256([]byte(token))
	e.mu.Lock()
	g := e.open[digest]
	tools, requests := e.tools, e.requests
	e.mu.Unlock()
	if token == "" || g == nil {
		return nil, nil, nil, agentd.Errorf(agentd.EUNAUTHORIZED,
			"the context token is not valid: it is valid only while the call it was given to runs")
	}
	return g, tools, requests, nil
}

// Check returns nil when token is the token of a call that runs now, and
// EUNAUTHORIZED otherwise (the error of Request and CallTool for it).
func (e *Endpoint) Check(token string) error {
	_, _, _, err := e.lookup(token)
	return err
}

// journalOf is the journal a durable grant's children use; nil for an
// inline one.
func (e *Endpoint) journalOf(g *grant) agentd.ChildJournal {
	if !g.durable {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.journal
}

// Request performs one request on a connection for the call the token
// belongs to (POST …/request): args are the request tool's arguments, and
// the call's tenant and project are the caller's. A tool whose confirm is
// false may only read (EWRITENOTALLOWED); an endpoint at review or never
// is refused (EFORBIDDEN) whatever the tool's confirm; nothing parks. In
// a durable tool's call a confirm-tier write without intent
// confirmed_write answers a preview, and the request is journaled
// (journal.go): a request the call made before a restart is not sent
// again, its journaled answer is returned.
func (e *Endpoint) Request(ctx context.Context, token string, args json.RawMessage) (any, error) {
	g, _, requests, err := e.lookup(token)
	if err != nil {
		return nil, err
	}
	if requests == nil {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "the project has no connections")
	}
	o := RequestOptions{Writes: g.writes, Durable: g.durable, Delegated: g.call.Delegated}
	var child journaled
	if g.durable {
		if child, err = e.childOf(g, "request", "", args); err != nil {
			e.logRequest(g, child, err, "")
			return nil, err
		}
		if out, done, err := child.replay(ctx); done {
			e.logRequest(g, child, err, "journaled")
			return out, err
		}
		o.IdempotencyKey = child.key()
	}
	caller := agentd.Principal{TenantID: g.call.TenantID, ProjectID: g.call.ProjectID, KeyID: "tool call " + g.call.ID}
	out, preview, err := requests.Inline(ctx, args, caller, o)
	outcome := "performed"
	if preview {
		outcome = "preview"
	} else if err == nil {
		child.record(ctx, e.log, out)
	}
	e.logRequest(g, child, err, outcome)
	return out, err
}

// logRequest logs one answered request of the context endpoint.
func (e *Endpoint) logRequest(g *grant, child journaled, err error, outcome string) {
	ev := e.log.Info().Str("tool", g.call.Name).Str("tool_call_id", g.call.ID).Str("tenant_id", g.call.TenantID)
	if child.ordinal > 0 {
		ev = ev.Int("ordinal", child.ordinal)
	}
	if err != nil {
		ev = ev.Str("outcome", agentd.ErrorCode(err)).Str("reason", agentd.ErrorMessage(err))
	} else {
		ev = ev.Str("outcome", outcome)
	}
	ev.Msg("context endpoint request")
}

// CallTool runs one child call of the composite the token belongs to
// (POST …/tools/{name}) with args (the child's arguments; empty is {}).
// Errors, with nothing run: EFORBIDDEN for a tool not in the composite's
// uses.tools, for one a composite may not call (confirm.CompositeRefusal:
// checked again now, whatever the load said) and for a call its
// classification does not let run without a person (a tier other than
// auto); ENOTFOUND for a tool that does not exist or that the call's
// tenant does not see; EINVALID for arguments its schema refuses. A child
// that ran answers a ChildResult, completed or failed.
func (e *Endpoint) CallTool(ctx context.Context, token, name string, args json.RawMessage) (any, error) {
	g, tools, _, err := e.lookup(token)
	if err != nil {
		return nil, err
	}
	var child journaled
	if g.durable {
		if child, err = e.childOf(g, "tool", name, args); err != nil {
			return nil, err
		}
		if out, done, err := child.replay(ctx); done {
			return out, err
		}
	}
	out, err := e.callTool(ctx, g, tools, name, args, child.ordinal)
	if res, ok := out.(*ChildResult); ok && res.Status == agentd.StatusCompleted {
		child.record(ctx, e.log, res)
	}
	return out, err
}

// callTool is CallTool once the token is known and no journaled answer
// applies; ordinal, when above 0, is the child's in a durable call (its
// id's suffix, so a re-run's child has the same id).
func (e *Endpoint) callTool(ctx context.Context, g *grant, tools Tools, name string, args json.RawMessage, ordinal int) (any, error) {
	if !slices.Contains(g.uses, name) {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "tool %q may not call %q: it is not in its uses.tools", g.call.Name, name)
	}
	var def toolset.Tool
	ok := false
	if tools != nil {
		def, ok = tools.Tool(name)
	}
	if !ok || !def.ForTenant(g.call.TenantID) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool %q not found", name)
	}
	if why := confirm.CompositeRefusal(def.Confirm); why != "" {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "composite %q may not call %q: %s", g.call.Name, name, why)
	}
	d := confirm.Classify(confirm.Call{Name: name, Arguments: args, Tool: def.Confirm, TenantID: g.call.TenantID, Delegated: g.call.Delegated})
	switch {
	case d.Invalid:
		return nil, agentd.Errorf(agentd.EINVALID, "%s", d.Why)
	case d.Refused || d.Tier != agentd.TierAuto:
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "composite %q may not call %q: its tier is %s, and a composite's children run without a prompt", g.call.Name, name, d.Tier)
	}
	if def.Prepare != nil {
		if _, err := def.Prepare(ctx, d.Arguments); err != nil {
			return nil, agentd.Errorf(agentd.EINVALID, "%v", err)
		}
	}
	parent := g.call
	n := int64(ordinal)
	if n <= 0 {
		n = g.children.Add(1)
	}
	child := agentd.ToolCall{ID: fmt.Sprintf("%s.%d", parent.ID, n), TenantID: parent.TenantID,
		ProjectID: parent.ProjectID, ConversationID: parent.ConversationID, RunID: parent.RunID,
		CorrelationID: parent.CorrelationID, Name: name, ServerID: def.Confirm.ServerID, Arguments: d.Arguments,
		ArgumentsSHA256: d.Digest, Tier: d.Tier, Status: agentd.StatusExecuting, Delegated: parent.Delegated}
	out, err := tools.Execute(ctx, child)
	ev := e.log.Info().Str("tool", parent.Name).Str("tool_call_id", parent.ID).Str("child", name).Str("child_call_id", child.ID)
	if err != nil {
		ev.Str("outcome", "failed").Msg("context endpoint child call")
		return &ChildResult{Status: agentd.StatusFailed, Error: err.Error()}, nil
	}
	ev.Str("outcome", "completed").Msg("context endpoint child call")
	return &ChildResult{Status: agentd.StatusCompleted, Result: out}, nil
}
