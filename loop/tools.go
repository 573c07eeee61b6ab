package loop

import (
	"sync"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// toolView is the engine's view of the tools the model sees: the agent's
// toolset.Set's list, with its specs and an index by name. The set lists
// the same slice until its tools change (an MCP server's
// notifications/tools/list_changed, through the registry); the view is
// rebuilt when the set hands out another slice, so each model step, each
// classification and each decision reads the tools as they are now.
type toolView struct {
	set toolset.Set // nil: no tools

	mu   sync.Mutex
	last *toolIndex
}

// toolIndex is one list of the set, indexed.
type toolIndex struct {
	list  []toolset.Tool
	specs []agentd.ToolSpec
	defs  map[string]toolset.Tool
	// scoped reports whether some tool is seen by some tenants only
	// (toolset.Tool.TenantIDs).
	scoped bool

	mu      sync.Mutex
	tenants map[string][]agentd.ToolSpec // specs by tenant, when scoped
}

// now returns the index of the set's current list.
func (v *toolView) now() *toolIndex {
	var list []toolset.Tool
	if v.set != nil {
		list = v.set.Tools()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.last != nil && sameSlice(v.last.list, list) {
		return v.last
	}
	ix := &toolIndex{list: list, defs: make(map[string]toolset.Tool, len(list))}
	for _, d := range list {
		ix.specs = append(ix.specs, d.Spec)
		ix.defs[d.Spec.Name] = d
		ix.scoped = ix.scoped || d.TenantIDs != nil
	}
	v.last = ix
	return ix
}

// specsFor is the specs of the tools the tenant sees: all of them unless
// some tool lists its tenants.
func (ix *toolIndex) specsFor(tenantID string) []agentd.ToolSpec {
	if !ix.scoped {
		return ix.specs
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if specs, ok := ix.tenants[tenantID]; ok {
		return specs
	}
	specs := []agentd.ToolSpec{}
	for _, d := range ix.list {
		if d.ForTenant(tenantID) {
			specs = append(specs, d.Spec)
		}
	}
	if ix.tenants == nil {
		ix.tenants = map[string][]agentd.ToolSpec{}
	}
	ix.tenants[tenantID] = specs
	return specs
}

// visible is package confirm's view of the named tool, or nil when the
// model does not see it.
func (ix *toolIndex) visible(name string) *confirm.Tool {
	if d, ok := ix.defs[name]; ok {
		return d.Confirm
	}
	return nil
}

// sameSlice reports whether a and b are the same list (not merely equal).
func sameSlice(a, b []toolset.Tool) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
