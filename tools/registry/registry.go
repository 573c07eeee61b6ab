// Package registry is the project's one tool registry. It gathers the
// tools of every tool source (toolset.Source: the command tools, the
// request tool, each connection's OpenAPI operations, the file tools, the
// subagents' task tool; later MCP servers and Go-registered functions),
// checks once, at start, that no name is defined twice, and gives the loop
// the tools an agent's model sees: agent.json's "tools" (each name must
// exist and be llm_callable) or every llm_callable tool. These rules are
// written here and nowhere else.
//
// It is a package of its own rather than part of the domain package
// (agentd) because a tool's description includes package confirm's view of
// it (toolset.Tool), which the domain cannot import; and it is not part of
// package tools or loop because it knows no source and the loop needs only
// its Toolset. It depends on the tool contract (package toolset) alone;
// cmd/agentd wires it.
package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/jsonconf"
	"github.com/agentd-dev/agentd/toolset"
)

// Registry is every tool of a project's sources, by name. It is immutable
// and safe for concurrent use.
type Registry struct {
	tools   map[string]entry
	sources []string // IDs, in the order given to New
}

type entry struct {
	src toolset.Source
	def toolset.Tool
}

// New returns the registry of the tools of sources (nil ones are skipped),
// listed once, now. Errors: a tool name defined by two sources, or twice by
// one, names the tool and where each definition is (toolset.Tool.Origin),
// e.g. `tool "lookup" is defined by tools (tools/lookup/tool.json) and
// connection "billing"`; a source's tool without a name or a Confirm, or
// whose Confirm names another tool or server_id than its source's ID, is
// an error naming the source (a bug in that source).
func New(sources ...toolset.Source) (*Registry, error) {
	r := &Registry{tools: map[string]entry{}}
	for _, src := range sources {
		if src == nil {
			continue
		}
		r.sources = append(r.sources, src.ID())
		for _, def := range src.Tools() {
			if err := checkDef(src, def); err != nil {
				return nil, err
			}
			name := def.Spec.Name
			if prev, dup := r.tools[name]; dup {
				a, b := origin(prev), origin(entry{src, def})
				if a == b {
					return nil, fmt.Errorf("tool %q is defined twice by %s", name, a)
				}
				return nil, fmt.Errorf("tool %q is defined by %s and %s", name, a, b)
			}
			r.tools[name] = entry{src, def}
		}
	}
	return r, nil
}

// checkDef checks that a source describes its tool consistently.
func checkDef(src toolset.Source, def toolset.Tool) error {
	switch d := def.Confirm; {
	case def.Spec.Name == "":
		return fmt.Errorf("tool source %q lists a tool without a name", src.ID())
	case d == nil:
		return fmt.Errorf("tool source %q: tool %q has no decision", src.ID(), def.Spec.Name)
	case d.Name != def.Spec.Name:
		return fmt.Errorf("tool source %q: tool %q decides as %q", src.ID(), def.Spec.Name, d.Name)
	case d.ServerID != src.ID():
		return fmt.Errorf("tool source %q: tool %q has server_id %q", src.ID(), def.Spec.Name, d.ServerID)
	}
	return nil
}

// origin is where a tool is defined, for errors.
func origin(e entry) string {
	if e.def.Origin != "" {
		return e.def.Origin
	}
	return e.src.ID()
}

// Toolset returns the tools an agent's model sees: those names lists
// (agent.json "tools"; [] is none) or, for nil names, every llm_callable
// tool. Errors name the entry as field "tools[i]" (the caller names the
// file): a name no source defines, a tool with llm_callable false, a name
// listed twice.
func (r *Registry) Toolset(names []string) (*Toolset, error) {
	s := &Toolset{reg: r}
	if names == nil {
		for _, e := range r.tools {
			if e.def.LLMCallable {
				s.defs = append(s.defs, e.def)
			}
		}
	}
	seen := map[string]bool{}
	for i, name := range names {
		field := fmt.Sprintf("tools[%d]", i)
		e, ok := r.tools[name]
		switch {
		case !ok:
			return nil, jsonconf.FieldErr(field, "unknown tool %q: no tool source defines it (sources: %s)", name, r.sourceList())
		case !e.def.LLMCallable:
			return nil, jsonconf.FieldErr(field, "tool %q has llm_callable false, so the model cannot see it", name)
		case seen[name]:
			return nil, jsonconf.FieldErr(field, "tool %q is listed twice", name)
		}
		seen[name] = true
		s.defs = append(s.defs, e.def)
	}
	sort.Slice(s.defs, func(i, j int) bool { return s.defs[i].Spec.Name < s.defs[j].Spec.Name })
	return s, nil
}

// sourceList names the sources, for errors.
func (r *Registry) sourceList() string {
	if len(r.sources) == 0 {
		return "none"
	}
	return strings.Join(r.sources, ", ")
}

// Toolset is the tools one agent's model sees (toolset.Set), over a
// registry. It is immutable and safe for concurrent use.
type Toolset struct {
	reg  *Registry
	defs []toolset.Tool // sorted by name
}

// Tools lists the tools the model sees, sorted by name.
func (s *Toolset) Tools() []toolset.Tool { return s.defs }

// Execute hands the call to the source of the tool call.Name names, which
// runs it (its errors are the call's failure). It runs any tool of the
// registry, listed for the model or not: a call approved while its tool was
// listed still runs after agent.json changed. Errors, with nothing run: a
// name no source defines ("tool "x" is not registered"); a call classified
// for another source (its ServerID) than the one that defines the name now.
func (s *Toolset) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	e, ok := s.reg.tools[call.Name]
	if !ok {
		return nil, fmt.Errorf("tool %q is not registered", call.Name)
	}
	if call.ServerID != "" && call.ServerID != e.src.ID() {
		return nil, fmt.Errorf("tool %q was classified as a tool of %q and is now one of %q, so it was not run", call.Name, call.ServerID, e.src.ID())
	}
	return e.src.Execute(ctx, call)
}
