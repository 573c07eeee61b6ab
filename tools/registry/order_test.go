package registry

import (
	"context"
	"slices"
	"testing"

	"github.com/agentd-dev/agentd"
)

// A fixed source keeps its tool's name against a changing source listed
// before it in New: after the change, the changing source's tool of the
// same name is the one left out.
func TestFixedSourceWinsWhateverTheOrder(t *testing.T) {
	fixed := src("tools", tool("tools", "notes__clash", "", false))
	mcp := &changingSource{source: src("notes", tool("notes", "notes__search", "", false))}
	reg, err := New(mcp, fixed)
	if err != nil {
		t.Fatal(err)
	}
	all, err := reg.Toolset(nil)
	if err != nil {
		t.Fatal(err)
	}
	mcp.set(tool("notes", "notes__clash", "", false))
	if got := toolNames(all.Tools()); !slices.Equal(got, []string{"notes__clash"}) {
		t.Fatalf("after the change: %v", got)
	}
	if _, err := all.Execute(context.Background(), agentd.ToolCall{Name: "notes__clash", ServerID: "tools"}); err != nil {
		t.Fatal(err)
	}
	if runs, other := fixed.runs(), mcp.runs(); !slices.Equal(runs, []string{"notes__clash"}) || len(other) != 0 {
		t.Errorf("runs: fixed %v, changing %v; want the fixed source's tool", runs, other)
	}
}
