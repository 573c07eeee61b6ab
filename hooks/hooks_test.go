package hooks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

func TestDecodeOutput(t *testing.T) {
	for in, want := range map[string]Output{
		"":                                  {Verdict: "allow"},
		"  \n":                              {Verdict: "allow"},
		`{"decision":"deny","reason":"no"}`: {Verdict: "deny", Reason: "no"},
		`{"decision":"ask"}`:                {Verdict: "ask"},
		`{"decision":"allow","updated_arguments":{"a": 1}}`: {Verdict: "allow", UpdatedArguments: json.RawMessage(`{"a":1}`)},
	} {
		got, err := DecodeOutput([]byte(in))
		if err != nil || got.Verdict != want.Verdict || got.Reason != want.Reason || string(got.UpdatedArguments) != string(want.UpdatedArguments) {
			t.Errorf("%q: %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{`nope`, `[]`, `{}`, `{"decision":"maybe"}`, `{"decision":"allow","x":1}`,
		`{"decision":"allow","updated_arguments":[1]}`, `{"decision":"allow"} {"decision":"deny"}`, `"allow"`, `{"decision":"allow"`,
		// Ambiguous or not quite the contract's keys: which decision a
		// reader sees must not depend on the reader (a reason built from
		// the model's words by string pasting must not turn a deny into
		// an allow).
		`{"decision":"deny","reason":"","decision":"allow"}`, `{"decision":"deny","DECISION":"allow"}`, `{"Decision":"deny"}`,
		`{"decision":"deny","updated_arguments":{"a":1,"a":2}}`, `null`, "{\"decision\":\"deny\",\"reason\":\"\xff\"}"} {
		if _, err := DecodeOutput([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The decoder never panics, and whatever it accepts is a known decision
// with rewritten arguments that are one JSON object.
func FuzzDecodeOutput(f *testing.F) {
	for _, s := range []string{"", `{"decision":"deny","reason":"x"}`, `{"decision":"allow","updated_arguments":{"a":[1,{"b":null}]}}`,
		`{"decision":"ask","reason":"` + strings.Repeat("é", 600) + `"}`, `{"decision":"allow","updated_arguments":null}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := DecodeOutput(b)
		if err != nil {
			return
		}
		switch out.Verdict {
		case confirm.HookAllow, confirm.HookAsk, confirm.HookDeny:
		default:
			t.Fatalf("decision %q accepted", out.Verdict)
		}
		if len(out.Reason) > maxReason {
			t.Fatalf("reason of %d bytes", len(out.Reason))
		}
		if out.UpdatedArguments != nil {
			var m map[string]any
			if err := json.Unmarshal(out.UpdatedArguments, &m); err != nil || m == nil {
				t.Fatalf("updated_arguments %q is not an object", out.UpdatedArguments)
			}
		}
	})
}

// hook writes a hook whose command is a /bin/sh script.
func hook(t *testing.T, name, script string, mod func(*Hook)) *Hook {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &Hook{Name: name, Pre: true, Command: []string{"/bin/sh", "./run.sh"}, Dir: dir, Timeout: 5 * time.Second}
	if mod != nil {
		mod(h)
	}
	return h
}

func pre(t *testing.T, hs ...*Hook) *confirm.HookVerdict {
	t.Helper()
	return New(hs, zerolog.Nop()).PreToolUse(context.Background(), toolset.HookCall{ToolCallID: "call_1", ToolName: "pay",
		Arguments: json.RawMessage(`{"amount":5}`), Tier: "auto", Phase: toolset.PhaseClassify})
}

func TestPreToolUseChain(t *testing.T) {
	// Each hook sees the previous rewrite; the verdict has the last one.
	double := hook(t, "a", `sed 's/.*"amount":\([0-9]*\).*/{"decision":"allow","updated_arguments":{"amount":\1\1}}/'`, nil)
	plusone := hook(t, "b", `in=$(cat); case "$in" in *'"amount":55'*) echo '{"decision":"ask","reason":"big","updated_arguments":{"amount":56}}';; *) echo '{"decision":"deny","reason":"did not see the rewrite"}';; esac`, nil)
	v := pre(t, double, plusone)
	if v == nil || v.Verdict != "ask" || v.Hook != "b" || v.Reason != "big" || string(v.Arguments) != `{"amount":56}` || len(v.RewrittenBy) != 2 {
		t.Fatalf("verdict %+v", v)
	}
	// Deny wins over ask and ends the chain.
	never := hook(t, "c", `echo '{"decision":"deny","reason":"no payments today"}'`, nil)
	if v := pre(t, double, plusone, never); v.Verdict != "deny" || v.Hook != "c" || v.Reason != "no payments today" {
		t.Fatalf("deny: %+v", v)
	}
	// A hook that does not match does not run; no match is no verdict.
	other := hook(t, "d", `echo '{"decision":"deny"}'`, func(h *Hook) { h.Matcher = regexpMust(`refund_.*`) })
	if v := pre(t, other); v != nil {
		t.Fatalf("a non-matching hook decided: %+v", v)
	}
	partial := hook(t, "e", `echo '{"decision":"deny"}'`, func(h *Hook) { h.Matcher = regexpMust(`pa`) })
	if v := pre(t, partial); v != nil {
		t.Fatalf("the matcher matched part of the name: %+v", v)
	}
}

func TestFailPolicy(t *testing.T) {
	for name, script := range map[string]string{"exit": `exit 3`, "hang": `sleep 30`, "garbage": `echo 'not json'`} {
		closed := hook(t, name, script, func(h *Hook) { h.Timeout = 200 * time.Millisecond })
		if v := pre(t, closed); v.Verdict != "deny" || v.Hook != name || !strings.Contains(v.Reason, "fail_policy is closed") {
			t.Errorf("%s closed: %+v", name, v)
		}
		open := hook(t, name, script, func(h *Hook) { h.Timeout = 200 * time.Millisecond; h.FailOpen = true })
		if v := pre(t, open); v.Verdict != "allow" {
			t.Errorf("%s open: %+v", name, v)
		}
	}
}

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + s + `)$`) }

// A hook runs as command tools run: the server's environment does not
// reach it (only PATH, HOME, TMPDIR and the variables it names), and its
// stdout is bounded.
func TestHookEnvironmentAndOutputBound(t *testing.T) {
	t.Setenv("AGENTD_TEST_SERVER_SECRET", "s3cret-value")
	t.Setenv("HOOK_SETTING", "yes")
	env := hook(t, "env", `cat >/dev/null; if env | grep -q s3cret-value; then echo '{"decision":"deny","reason":"the server env leaked"}'; `+
		`elif [ "$HOOK_SETTING" = yes ]; then echo '{"decision":"ask","reason":"named variable seen"}'; fi`,
		func(h *Hook) { h.Env = []string{"HOOK_SETTING"} })
	if v := pre(t, env); v.Verdict != "ask" || v.Reason != "named variable seen" {
		t.Fatalf("environment: %+v", v)
	}
	// 2 MB of white space and then a valid allow: over the bound, so the
	// hook failed, whatever it printed last.
	huge := hook(t, "huge", `cat >/dev/null; head -c 2000000 /dev/zero | tr '\0' ' '; echo '{"decision":"allow"}'`, nil)
	if v := pre(t, huge); v.Verdict != "deny" || v.Hook != "huge" || !strings.Contains(v.Reason, "too large") {
		t.Fatalf("huge output: %+v", v)
	}
	for name, out := range map[string]string{"array": `[{"decision":"allow"}]`, "string": `"allow"`, "extra": `{"decision":"allow","continue":true}`} {
		h := hook(t, name, `cat >/dev/null; echo '`+out+`'`, nil)
		if v := pre(t, h); v.Verdict != "deny" || v.Hook != name || !strings.Contains(v.Reason, "fail_policy is closed") {
			t.Errorf("%s: %+v", name, v)
		}
	}
}

// A fail-open hook that prints garbage allows for itself only: a later
// hook's deny still wins, and an earlier ask stands.
func TestFailOpenGarbageWithOtherHooks(t *testing.T) {
	garbage := hook(t, "a-garbage", `cat >/dev/null; echo 'garbage {'`, func(h *Hook) { h.FailOpen = true })
	ask := hook(t, "b-ask", `cat >/dev/null; echo '{"decision":"ask","reason":"check"}'`, nil)
	deny := hook(t, "c-deny", `cat >/dev/null; echo '{"decision":"deny","reason":"no"}'`, nil)
	if v := pre(t, garbage, ask); v.Verdict != "ask" || v.Hook != "b-ask" {
		t.Fatalf("garbage then ask: %+v", v)
	}
	if v := pre(t, garbage, ask, deny); v.Verdict != "deny" || v.Hook != "c-deny" {
		t.Fatalf("garbage, ask, deny: %+v", v)
	}
	if v := pre(t, garbage); v == nil || v.Verdict != "allow" {
		t.Fatalf("garbage alone, open: %+v", v)
	}
}

// A hook's stdin is JSON without HTML escaping: "&" in the arguments
// arrives as "&", not "\u0026", so a hook matching text sees what the
// model wrote.
func TestHookStdinNotHTMLEscaped(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "stdin.json")
	h := hook(t, "dump", `cat > '`+dump+`'`, nil)
	v := New([]*Hook{h}, zerolog.Nop()).PreToolUse(context.Background(), toolset.HookCall{ToolCallID: "call_1", ToolName: "pay",
		Arguments: json.RawMessage(`{"memo": "R&D <ops>"}`), Tier: "auto", Phase: toolset.PhaseClassify})
	if v == nil || v.Verdict != "allow" {
		t.Fatalf("verdict %+v", v)
	}
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"arguments":{"memo":"R&D <ops>"}`) || strings.Contains(string(got), `\u0026`) {
		t.Fatalf("stdin %s", got)
	}
}
