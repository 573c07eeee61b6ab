package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/mcp/internal/testserver"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server's tools whose agentd name (<id>__<tool>) is not 1 to 64 of
// [A-Za-z0-9_-] are left out: not offered, not callable, listed in Status
// escaped and bounded; the server's other tools are offered as before.
func TestOddToolNamesLeftOut(t *testing.T) {
	s, _ := stdioServer(t, `{"servers": [{"id": "notes", "command": ["SERVER", "-odd-names"], "env": ["NOTES_FILE"]}]}`)
	want := []string{"notes__big", "notes__grow", "notes__lookup", "notes__note", "notes__wait"}
	if got := names(s.Tools()); !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	st := s.Status()
	if !slices.Equal(st.Tools, want) || st.State != StateReady {
		t.Errorf("status = %+v", st)
	}
	var left []string
	for _, l := range st.LeftOut {
		if l.Reason != badName {
			t.Errorf("left out %q for %q", l.Tool, l.Reason)
		}
		if len(l.Tool) > 100+20 || strings.ContainsAny(l.Tool, "\n\x1b\u202e") {
			t.Errorf("left out tool shown raw or unbounded: %q", l.Tool)
		}
		left = append(left, l.Tool)
	}
	slices.Sort(left)
	wantLeft := []string{"notes__" + strings.Repeat("a", 93), "notes__bad name", "notes__" + strings.Repeat("b", 60),
		"notes__dotted.name", `notes__esc\x1b[31m`, `notes__evil\u202etxt.exe`, `notes__line\nbreak`}
	if !slices.Equal(left, wantLeft) {
		t.Errorf("left out = %q, want %q", left, wantLeft)
	}
	for _, odd := range testserver.OddNames {
		if _, err := call(s, context.Background(), "notes__"+odd, `{}`); err == nil || !strings.Contains(err.Error(), "no longer offers") {
			t.Errorf("calling %q: %v", odd, err)
		}
	}
}

// The name rule: 1 to 64 of [A-Za-z0-9_-], counted with the server prefix.
func TestNamed(t *testing.T) {
	s := &Server{cfg: ServerConfig{ID: "notes"}}
	for _, tc := range []struct {
		tool string
		ok   bool
	}{
		{"x", true},
		{"A-z_9", true},
		{strings.Repeat("b", 64-len("notes__")), true},
		{strings.Repeat("b", 64-len("notes__")+1), false},
		{"", false}, // "notes__" is a valid name, but of no tool
		{"a b", false},
		{"a.b", false},
		{"é", false},
		{"a\u202eb", false},
		{"a\tb", false},
	} {
		offered, left := s.named([]*sdk.Tool{{Name: tc.tool}})
		if got := len(offered) == 1; got != tc.ok || len(left) == len(offered) {
			t.Errorf("tool %q: offered %v, left out %v; want offered %v", tc.tool, offered, left, tc.ok)
		}
	}
}
