// Package gofunc is a tool source of Go functions: a program that embeds
// agentd (package server, docs/embed.md) registers functions of the form
// func(ctx, Args) (Result, error) as tools, and they are classified,
// parked, carded, approved and audited like any other tool.
//
// A tool's JSON Schema is derived from its Args type with
// github.com/google/jsonschema-go (the schema library of the MCP SDK
// agentd already uses): exported fields by their json names, required
// unless omitempty/omitzero, no other properties, a field's `jsonschema`
// tag its description. WithSchema gives one explicitly instead. The
// arguments are checked against the schema (package internal/schema, as
// every tool's) before a card exists, then decoded into Args.
//
// A function's result is marshalled to JSON, at most
// agentd.MaxToolResultBytes. Its error, or its panic, is the call's
// failure, whose text the model reads; it never stops the server. The
// package imports the contract (toolset), confirm and the domain, never
// the loop.
package gofunc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/schema"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/google/jsonschema-go/jsonschema"
)

// ServerID is the server_id of the Go tools (their source's ID).
const ServerID = "go"

// The exposure words of a Go tool: tool.json's (SPEC §2.1), whose tiers
// package confirm decides (confirm.ExposureTier).
const (
	Open                 = confirm.ExposureOpen
	RequiresConfirmation = confirm.ExposureRequiresConfirmation
	OperatorGated        = confirm.ExposureOperatorGated
)

// Tool is one Go function as a tool, made by New. It is immutable.
type Tool struct {
	def toolset.Tool
	run func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.def.Spec.Name }

// Option configures a tool made by New.
type Option func(*settings)

type settings struct {
	exposure   string
	prompt     string
	idempotent bool
	hidden     bool
	schema     json.RawMessage
}

// WithExposure sets the tool's exposure: Open (its calls run at once, tier
// auto), RequiresConfirmation (each call parks with a card until a person
// decides, tier confirm) or OperatorGated (a label; tier auto). Without
// it a Go tool requires confirmation: a function may do anything, and
// agentd cannot read what it does.
func WithExposure(kind string) Option { return func(s *settings) { s.exposure = kind } }

// WithPrompt sets the reason a requires-confirmation tool's card shows.
func WithPrompt(text string) Option { return func(s *settings) { s.prompt = text } }

// Idempotent marks the tool safe to run again: a call a crash interrupted
// runs again at restart instead of failing as "outcome unknown" (SPEC §8).
func Idempotent() Option { return func(s *settings) { s.idempotent = true } }

// Hidden keeps the tool out of every model's tool list (tool.json
// llm_callable false): only direct eval reaches it.
func Hidden() Option { return func(s *settings) { s.hidden = true } }

// WithSchema gives the arguments' JSON Schema (a JSON object, draft
// 2020-12) instead of the one derived from the Args type. The arguments
// must still decode into Args.
func WithSchema(raw json.RawMessage) Option {
	return func(s *settings) { s.schema = slices.Clone(raw) }
}

// New makes the Go function f the tool name. Its errors say what is wrong
// with the definition: a name not of 1–64 letters, digits, '_' or '-', no
// description, an unknown exposure, an Args type with no JSON Schema (a
// channel, a function, a map not keyed by strings) or a schema that does
// not compile.
func New[A, R any](name, description string, f func(context.Context, A) (R, error), opts ...Option) (*Tool, error) {
	if !agentd.ValidToolName(name) {
		return nil, fmt.Errorf("go tool %q: the name must be 1-64 letters, digits, '_' or '-'", name)
	}
	if strings.TrimSpace(description) == "" {
		return nil, fmt.Errorf("go tool %q: a description is required (the model reads it)", name)
	}
	if f == nil {
		return nil, fmt.Errorf("go tool %q: no function", name)
	}
	s := settings{exposure: RequiresConfirmation}
	for _, o := range opts {
		o(&s)
	}
	switch s.exposure {
	case Open, RequiresConfirmation, OperatorGated:
	default:
		return nil, fmt.Errorf("go tool %q: exposure %q: must be one of %s, %s, %s", name, s.exposure, Open, RequiresConfirmation, OperatorGated)
	}
	params := s.schema
	if params == nil {
		derived, err := jsonschema.For[A](nil)
		if err != nil {
			return nil, fmt.Errorf("go tool %q: arguments: %w", name, err)
		}
		if params, err = json.Marshal(derived); err != nil {
			return nil, fmt.Errorf("go tool %q: arguments: %w", name, err)
		}
	}
	validate, err := schema.ObjectValidator(name, params)
	if err != nil {
		return nil, fmt.Errorf("go tool %q: arguments' schema: %w", name, err)
	}
	t := &Tool{def: toolset.Tool{
		Spec: agentd.ToolSpec{Name: name, Description: description, Parameters: params},
		Confirm: &confirm.Tool{Name: name, ServerID: ServerID, Exposure: s.exposure, Prompt: s.prompt,
			Validate: validate},
		LLMCallable: !s.hidden,
		Idempotent:  s.idempotent,
		Origin:      fmt.Sprintf("go tool %q", name),
	}}
	t.run = func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
		var args A
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil {
			return nil, fmt.Errorf("invalid arguments for tool %q: %v", name, err)
		}
		res, err := f(ctx, args)
		if err != nil {
			return nil, err
		}
		out, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("tool %q: its result is not JSON: %v", name, err)
		}
		if len(out) > agentd.MaxToolResultBytes {
			return nil, fmt.Errorf("tool %q: result too large (%d bytes, over %d)", name, len(out), agentd.MaxToolResultBytes)
		}
		return out, nil
	}
	return t, nil
}

// MustNew is New that panics on a definition error, for tools defined at
// a program's start.
func MustNew[A, R any](name, description string, f func(context.Context, A) (R, error), opts ...Option) *Tool {
	t, err := New(name, description, f, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Source is Go tools as one tool source (toolset.Source, ID ServerID),
// for the tool registry: hand it to server.Options.Sources. It is
// immutable and safe for concurrent use.
type Source struct {
	defs  []toolset.Tool // sorted by name
	tools map[string]*Tool
}

var _ toolset.Source = (*Source)(nil)

// NewSource returns the source of tools. A name given twice, or a nil
// tool, is an error.
func NewSource(tools ...*Tool) (*Source, error) {
	s := &Source{tools: make(map[string]*Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("go tools: tools[%d] is nil", i)
		}
		if _, dup := s.tools[t.Name()]; dup {
			return nil, fmt.Errorf("go tools: %q is defined twice", t.Name())
		}
		s.tools[t.Name()] = t
		s.defs = append(s.defs, t.def)
	}
	slices.SortFunc(s.defs, func(a, b toolset.Tool) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	return s, nil
}

// ID is ServerID.
func (s *Source) ID() string { return ServerID }

// Tools lists every tool, sorted by name; the same slice on every call.
func (s *Source) Tools() []toolset.Tool { return s.defs }

// Execute runs the function of the tool call.Name names with the
// effective arguments decoded into its Args. The function's error is the
// call's failure; so is its panic ("tool %q panicked: …"), which does not
// reach the caller's goroutine. A name the source does not have is an
// error, and nothing runs.
func (s *Source) Execute(ctx context.Context, call agentd.ToolCall) (out json.RawMessage, err error) {
	t, ok := s.tools[call.Name]
	if !ok {
		return nil, fmt.Errorf("tool %q is not one of the Go tools", call.Name)
	}
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, fmt.Errorf("tool %q panicked: %v", call.Name, v)
		}
	}()
	args := call.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	return t.run(ctx, args)
}
