// Package registry is the project's one tool registry. It gathers the
// tools of every tool source (toolset.Source: the command tools, the
// request tool, each connection's OpenAPI operations, the file tools, the
// subagents' task tool, each MCP server, Go functions: tools/gofunc),
// checks at start that no name is defined twice (and again, for an MCP
// server's own tools, when they change: toolset.Changing), and gives the loop
// the tools an agent's model sees: agent.json's "tools" (each name must
// exist and be llm_callable) or every llm_callable tool. These rules are
// written here and nowhere else.
//
// It is a package of its own rather than part of the domain package
// (agentd) because a tool's description includes package confirm's view of
// it (toolset.Tool), which the domain cannot import; and it is not part of
// package tools or loop because it knows no source and the loop needs only
// its Toolset. It depends on the tool contract (package toolset) alone;
// package server wires it.
package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/agentd-dev/agentd/toolset"
)

// Registry is every tool of a project's sources, by name. It is safe for
// concurrent use; its tools change only with a toolset.Changing source's.
type Registry struct {
	sources []toolset.Source
	ids     []string // the sources' IDs, in the order given to New

	mu       sync.Mutex
	snap     *snapshot
	versions []uint64 // of the Changing sources, in order, when snap was built
}

// snapshot is the registry's tools at one time. It is immutable.
type snapshot struct {
	tools map[string]entry
	// changing are the IDs of the toolset.Changing sources.
	changing []string
}

type entry struct {
	src toolset.Source
	def toolset.Tool
}

// New returns the registry of the tools of sources (nil ones are skipped),
// listed now. Errors: a tool name defined by two sources, or twice by
// one, names the tool and where each definition is (toolset.Tool.Origin),
// e.g. `tool "lookup" is defined by tools (tools/lookup/tool.json) and
// connection "billing"`; a source's tool without a name or a Confirm, or
// whose Confirm names another tool or server_id than its source's ID, is
// an error naming the source (a bug in that source).
//
// A toolset.Changing source's tools are listed again when its Version
// moves (looked at whenever the tools are read): those that are new take
// their place unless another source defines the name, and those it no
// longer lists are gone. Only its own tools change; a new tool whose
// name another source defines, or that is described inconsistently, is
// left out.
func New(sources ...toolset.Source) (*Registry, error) {
	r := &Registry{}
	for _, src := range sources {
		if src != nil {
			r.sources = append(r.sources, src)
			r.ids = append(r.ids, src.ID())
		}
	}
	snap, err := r.build(true)
	if err != nil {
		return nil, err
	}
	if err := snap.checkComposites(); err != nil {
		return nil, err
	}
	r.snap, r.versions = snap, r.currentVersions()
	return r, nil
}

// checkComposites refuses a composite (toolset.Tool.Uses) that uses a tool
// it may not call (confirm.CompositeRefusal), naming both, or a tool no
// source defines now — unless a source whose tools change (an MCP server)
// may define it later: the context endpoint checks again at call time.
func (snap *snapshot) checkComposites() error {
	names := make([]string, 0, len(snap.tools))
	for name := range snap.tools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		parent := snap.tools[name]
		for i, child := range parent.def.Uses {
			e, ok := snap.tools[child]
			switch {
			case !ok && !snap.changingMayDefine(child):
				return fmt.Errorf("%s: field \"uses.tools[%d]\": composite %q uses %q, which no tool source defines", origin(parent), i, name, child)
			case !ok:
				continue
			}
			if why := confirm.CompositeRefusal(e.def.Confirm); why != "" {
				return fmt.Errorf("%s: field \"uses.tools[%d]\": composite %q may not use %q (%s): %s", origin(parent), i, name, child, origin(e), why)
			}
		}
	}
	return nil
}

// changingMayDefine reports whether a toolset.Changing source may define
// the name later: it is <source id>__<tool> of one.
func (snap *snapshot) changingMayDefine(name string) bool {
	id, _, ok := strings.Cut(name, "__")
	return ok && slices.Contains(snap.changing, id)
}

// build lists every source's tools, in the order given to New; strict
// makes a conflict an error. Otherwise (a Changing source's tools changed)
// the fixed sources come first, so that they keep their names, and a
// conflicting tool is left out.
func (r *Registry) build(strict bool) (*snapshot, error) {
	ordered := r.sources
	if !strict {
		ordered = slices.Clone(r.sources)
		slices.SortStableFunc(ordered, func(a, b toolset.Source) int { return changing(a) - changing(b) })
	}
	snap := &snapshot{tools: map[string]entry{}}
	for _, src := range ordered {
		if changing(src) == 1 {
			snap.changing = append(snap.changing, src.ID())
		}
		for _, def := range src.Tools() {
			if err := snap.add(src, def); err != nil && strict {
				return nil, err
			}
		}
	}
	return snap, nil
}

// changing is 1 for a toolset.Changing source, else 0.
func changing(src toolset.Source) int {
	if _, ok := src.(toolset.Changing); ok {
		return 1
	}
	return 0
}

// add adds one tool of src, checked.
func (snap *snapshot) add(src toolset.Source, def toolset.Tool) error {
	if err := checkDef(src, def); err != nil {
		return err
	}
	name := def.Spec.Name
	if prev, dup := snap.tools[name]; dup {
		a, b := origin(prev), origin(entry{src, def})
		if a == b {
			return fmt.Errorf("tool %q is defined twice by %s", name, a)
		}
		return fmt.Errorf("tool %q is defined by %s and %s", name, a, b)
	}
	snap.tools[name] = entry{src, def}
	return nil
}

// currentVersions are the Changing sources' versions now.
func (r *Registry) currentVersions() []uint64 {
	var vs []uint64
	for _, src := range r.sources {
		if c, ok := src.(toolset.Changing); ok {
			vs = append(vs, c.Version())
		}
	}
	return vs
}

// now is the registry's tools now, listed again if a Changing source's
// version moved.
func (r *Registry) now() *snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if vs := r.currentVersions(); !slices.Equal(vs, r.versions) {
		r.snap, _ = r.build(false) // lenient: never fails
		r.versions = vs
	}
	return r.snap
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
// listed twice. When a Changing source's tools change later, a listed
// name it no longer defines is left out until it does again, and with nil
// names its new llm_callable tools are in.
func (r *Registry) Toolset(names []string) (*Toolset, error) {
	snap := r.now()
	seen := map[string]bool{}
	for i, name := range names {
		field := fmt.Sprintf("tools[%d]", i)
		e, ok := snap.tools[name]
		switch {
		case !ok:
			return nil, strictjson.FieldErr(field, "unknown tool %q: no tool source defines it (sources: %s)", name, r.sourceList())
		case !e.def.LLMCallable:
			return nil, strictjson.FieldErr(field, "tool %q has llm_callable false, so the model cannot see it", name)
		case seen[name]:
			return nil, strictjson.FieldErr(field, "tool %q is listed twice", name)
		}
		seen[name] = true
	}
	s := &Toolset{reg: r, names: names}
	s.snap, s.defs = snap, s.pick(snap)
	return s, nil
}

// sourceList names the sources, for errors.
func (r *Registry) sourceList() string {
	if len(r.ids) == 0 {
		return "none"
	}
	return strings.Join(r.ids, ", ")
}

// Toolset is the tools one agent's model sees (toolset.Set), over a
// registry. It is safe for concurrent use.
type Toolset struct {
	reg   *Registry
	names []string // agent.json "tools"; nil: every llm_callable tool

	mu   sync.Mutex
	snap *snapshot
	defs []toolset.Tool // of snap, sorted by name
}

// pick is the tools of snap the model sees, sorted by name.
func (s *Toolset) pick(snap *snapshot) []toolset.Tool {
	var defs []toolset.Tool
	if s.names == nil {
		for _, e := range snap.tools {
			if e.def.LLMCallable {
				defs = append(defs, e.def)
			}
		}
	}
	for _, name := range s.names {
		if e, ok := snap.tools[name]; ok && e.def.LLMCallable {
			defs = append(defs, e.def)
		}
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Spec.Name < defs[j].Spec.Name })
	return defs
}

// Registry is the registry the toolset is a view of.
func (s *Toolset) Registry() *Registry { return s.reg }

// Tools lists the tools the model sees, sorted by name: the same slice
// until a Changing source's tools change.
func (s *Toolset) Tools() []toolset.Tool {
	snap := s.reg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if snap != s.snap {
		s.snap, s.defs = snap, s.pick(snap)
	}
	return s.defs
}

// Execute hands the call to the source of the tool call.Name names, which
// runs it (its errors are the call's failure). It runs any tool of the
// registry, listed for the model or not: a call approved while its tool was
// listed still runs after agent.json changed. Errors, with nothing run: a
// name no source defines now ("tool "x" is not registered"); a call
// classified for another source (its ServerID) than the one that defines
// the name now.
func (s *Toolset) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	return s.reg.Execute(ctx, call)
}

// Tool returns the registry's tool of that name now, llm_callable or not.
func (r *Registry) Tool(name string) (toolset.Tool, bool) {
	e, ok := r.now().tools[name]
	return e.def, ok
}

// Execute runs a call of any tool of the registry, as Toolset.Execute does.
func (r *Registry) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	e, ok := r.now().tools[call.Name]
	if !ok {
		return nil, fmt.Errorf("tool %q is not registered", call.Name)
	}
	if call.ServerID != "" && call.ServerID != e.src.ID() {
		return nil, fmt.Errorf("tool %q was classified as a tool of %q and is now one of %q, so it was not run", call.Name, call.ServerID, e.src.ID())
	}
	return e.src.Execute(ctx, call)
}
