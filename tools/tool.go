// Package tools loads and runs custom command tools: a folder
// tools/<name>/ with a tool.json that describes the tool to the model and
// names a command to run. A call runs the command as a subprocess in the
// tool's folder with a minimal environment, with the whole JSON request as
// its stdin (a regular file, complete before the command starts), and
// reads the JSON result from its stdout (docs/tools.md).
//
// The package decides no tier and no approval: a tool's exposure is one of
// package confirm's kinds, handed to confirm as written (confirm says what
// tier it gives), Confirm (what the handler may do) is carried as written,
// and Run executes whatever it is asked to. Source offers the tools to the
// tool registry (tools/registry) as one toolset.Source.
package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/schema"
	"github.com/agentd-dev/agentd/schedule"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Exposure kinds of a tool (SPEC §2.1): the names are confirm's, which also
// says which tier each gives (confirm.ExposureTier).
const (
	ExposureOpen                 = confirm.ExposureOpen
	ExposureRequiresConfirmation = confirm.ExposureRequiresConfirmation
	ExposureOperatorGated        = confirm.ExposureOperatorGated
)

// Execution modes of a tool (tool.json "execution", SPEC §2.3).
const (
	ExecutionInline  = "inline"
	ExecutionDurable = "durable"
)

// Limits and defaults of a tool (docs/tools.md).
const (
	defaultTimeout = 30 * time.Second
	maxTimeout     = 10 * time.Minute
	// maxValidationMessage bounds the text of an argument validation error.
	maxValidationMessage = schema.MaxMessage
)

// defaultParameters is the schema of a tool that declares none.
var defaultParameters = json.RawMessage(`{"type":"object"}`)

// Exposure says how a tool is exposed to the model.
type Exposure struct {
	Kind   string // ExposureOpen, ExposureRequiresConfirmation or ExposureOperatorGated
	Prompt string // the confirmation card's reason, if set
}

// Tool is one loaded custom command tool. A Tool is immutable after LoadDir
// and safe for concurrent use.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (compacted).
	Parameters json.RawMessage
	Exposure   Exposure
	// Approval is tool.json "approval" (SPEC §11.1); nil: the agent's.
	Approval    *agentd.ApprovalRule
	LLMCallable bool
	// Confirm is what the tool's handler may do: "" (read only), "true" or
	// "review" (write-intent requests allowed). Tools with "never" are not
	// loaded at all.
	Confirm string
	// Command is the argv as written in tool.json.
	Command []string
	// Env names the server environment variables passed to the command.
	Env     []string
	Timeout time.Duration
	// Idempotent tools may be re-run by crash recovery.
	Idempotent bool
	// Durable is tool.json "execution": "durable": the call's child
	// requests through its context endpoint are journaled, and crash
	// recovery runs the call again (docs/runtime.md#durable-tools).
	Durable bool
	// Dir is the tool's folder; the command runs there.
	Dir string
	// Uses are the tools the command may call through its context
	// endpoint (tool.json uses.tools): the tool is a composite. Nil: none.
	Uses []string
	// Triggers are what may start the tool outside the agent loop
	// (tool.json triggers).
	Triggers Triggers

	schema *jsonschema.Schema // compiled Parameters; nil means compile on use
}

// Triggers are a tool's tool.json "triggers" (docs/runtime.md).
type Triggers struct {
	// Invoke allows POST /v1/tools/{name}/run.
	Invoke bool
	// Schedule, when set, runs the tool at each of its ticks, acting for
	// TenantID and ProjectID.
	Schedule            *schedule.Schedule
	TenantID, ProjectID string
}

// Spec returns the tool as the model sees it.
func (t *Tool) Spec() agentd.ToolSpec {
	params := t.Parameters
	if len(params) == 0 {
		params = defaultParameters
	}
	return agentd.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params}
}

// ValidateArguments checks args against the tool's parameter schema and
// returns the effective arguments: the compacted JSON object, with the
// top-level "default" values of absent properties filled in. Empty args
// count as {}. The error's text is meant for the model: it says what is
// wrong, in bounded length.
func (t *Tool) ValidateArguments(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		trimmed = []byte("{}")
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("invalid arguments for tool %q: not valid JSON", t.Name)
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("invalid arguments for tool %q: must be a JSON object", t.Name)
	}
	sch := t.schema
	if sch == nil {
		var err error
		if sch, err = compileSchema(t.Name, t.Spec().Parameters); err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: not valid JSON", t.Name)
	}
	effective, err := applyDefaults(buf.Bytes(), t.Spec().Parameters)
	if err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: %v", t.Name, err)
	}
	if err := schema.Validate(sch, effective); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: %v", t.Name, err)
	}
	return json.RawMessage(effective), nil
}

// applyDefaults appends, in schema order, the "default" of every top-level
// property that obj (a compacted JSON object) lacks.
func applyDefaults(obj []byte, schema json.RawMessage) ([]byte, error) {
	var s struct {
		Properties orderedProperties `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return obj, nil
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(obj, &present); err != nil {
		return nil, errors.New("must be a JSON object")
	}
	out := obj
	for _, p := range s.Properties {
		if _, ok := present[p.name]; ok || p.def == nil {
			continue
		}
		key, _ := json.Marshal(p.name)
		rest := out[:len(out)-1] // without the closing brace
		next := make([]byte, 0, len(out)+len(key)+len(p.def)+2)
		next = append(next, rest...)
		if len(rest) > 1 {
			next = append(next, ',')
		}
		next = append(next, key...)
		next = append(next, ':')
		next = append(next, p.def...)
		next = append(next, '}')
		out = next
	}
	return out, nil
}

type property struct {
	name string
	def  json.RawMessage // compacted default, nil if none
}

// orderedProperties decodes a schema's "properties" keeping their order.
type orderedProperties []property

func (o *orderedProperties) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("properties: not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var sub struct {
			Default json.RawMessage `json:"default"`
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		p := property{name: name}
		if json.Unmarshal(raw, &sub) == nil && len(sub.Default) > 0 {
			var buf bytes.Buffer
			if json.Compact(&buf, sub.Default) == nil {
				p.def = buf.Bytes()
			}
		}
		*o = append(*o, p)
	}
	return nil
}

// compileSchema compiles a tool's parameter schema. References to other
// documents are not loaded.
func compileSchema(name string, params json.RawMessage) (*jsonschema.Schema, error) {
	return schema.Compile(name, params)
}
