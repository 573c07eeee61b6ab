package demo

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/hooks"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// The demo hook block-channel decides on the parsed endpoint, not on the
// text of its stdin: every spelling of the announcements channel that the
// request tool would send there is denied (case, percent-encoding, JSON
// escapes, no leading slash, a sub-path), and other endpoints — also one
// whose data mentions the channel — are allowed.
func TestDemoHookBlockChannel(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTo(dir); err != nil {
		t.Fatal(err)
	}
	hs, err := hooks.LoadDir(filepath.Join(dir, "hooks"))
	if err != nil {
		t.Fatal(err)
	}
	set := hooks.New(hs, zerolog.Nop())
	verdict := func(args string) string {
		v := set.PreToolUse(context.Background(), toolset.HookCall{ToolCallID: "call_1", ToolName: "request", ServerID: "connections",
			Arguments: json.RawMessage(args), Tier: "confirm", Phase: toolset.PhaseClassify})
		if v == nil {
			t.Fatalf("%s: no hook matched", args)
		}
		if v.Verdict == "deny" && !strings.Contains(v.Reason, "the announcements channel is closed") {
			t.Fatalf("%s: denied for another reason: %+v", args, v)
		}
		return v.Verdict
	}
	req := func(endpoint string) string {
		return `{"connection":"billing","method":"POST","endpoint":` + endpoint + `,"data":{"text":"hi"},"intent":"write"}`
	}
	for _, ep := range []string{`"/announcements"`, `"/Announcements"`, `"/ANNOUNCEMENTS"`, `"announcements"`,
		`"/announcements/"`, `"/announcements/pinned"`, `"/%61nnouncements"`, `"/ANNOUNCEMENT%53"`, `"\/announcements"`,
		`"/\u0061nnouncements"`} {
		if got := verdict(req(ep)); got != "deny" {
			t.Errorf("endpoint %s: %s, want deny", ep, got)
		}
	}
	for _, args := range []string{req(`"/refunds"`), req(`"/announcements-archive"`), req(`"/orders/announcements"`),
		`{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"endpoint":"/announcements"},"intent":"write"}`} {
		if got := verdict(args); got != "allow" {
			t.Errorf("%s: %s, want allow", args, got)
		}
	}
}
