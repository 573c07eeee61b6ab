package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeHook adds hooks/<name>/ to a test project: hook.json from def (the
// command is run.sh) and run.sh with the /bin/sh body script.
func writeHook(t *testing.T, dir, name string, def map[string]any, script string) {
	t.Helper()
	hd := filepath.Join(dir, "hooks", name)
	must(t, os.MkdirAll(hd, 0o755))
	must(t, os.WriteFile(filepath.Join(hd, "run.sh"), []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	def["command"] = []string{"/bin/sh", "./run.sh"}
	b, err := json.Marshal(def)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(hd, "hook.json"), b, 0o644))
}

// hookRules are the default rules plus one that calls the auto tool record.
var hookRules = `[{"when":{"user":"(?i)^record"},"reply":{"tool_calls":[{"name":"record","arguments":{}}]}},` + defaultRules[1:]

// hookServer starts a test project with the hooks that setup writes.
func hookServer(t *testing.T, setup func(dir string)) (base, execLog string) {
	t.Helper()
	dir, execLog := writeProject(t, projectOpts{})
	writeAgent(t, dir, hookRules, nil)
	setup(dir)
	base, _ = startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	return base, execLog
}

var prePay = map[string]any{"points": []string{"preToolUse"}, "matcher": "pay"}

// Acceptance 1, with real hook processes over HTTP.
func TestHooksEndToEnd(t *testing.T) {
	t.Run("deny refuses with its reason and the tool never runs", func(t *testing.T) {
		base, execLog := hookServer(t, func(dir string) {
			writeHook(t, dir, "guard", prePay, `cat >/dev/null; echo '{"decision":"deny","reason":"no payments today"}'`)
		})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "pay")
		ref := st.waitFor("tool_call_refused", nil)
		if !strings.Contains(str(ref.Data, "reason"), "no payments today") || !strings.Contains(str(ref.Data, "reason"), `"guard"`) {
			t.Fatalf("refusal: %s", ref.Raw)
		}
		st.waitFor("run_finished", nil)
		if n := execCount(t, execLog, "pay"); n != 0 {
			t.Fatalf("pay ran %d times", n)
		}
	})
	t.Run("ask parks an auto tool, escalated", func(t *testing.T) {
		base, execLog := hookServer(t, func(dir string) {
			writeHook(t, dir, "ask", map[string]any{"points": []string{"preToolUse"}, "matcher": "rec.*"},
				`cat >/dev/null; echo '{"decision":"ask","reason":"records are audited"}'`)
		})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "record it")
		cr := st.waitFor("confirmation_required", nil)
		if cr.Data["tool_name"] != "record" || cr.Data["escalated"] != true || !strings.Contains(str(cr.Data, "reason"), "records are audited") {
			t.Fatalf("card: %s", cr.Raw)
		}
		if n := execCount(t, execLog, "record"); n != 0 {
			t.Fatalf("record ran %d times before approval", n)
		}
	})
	t.Run("updated_arguments are what runs", func(t *testing.T) {
		base, _ := hookServer(t, func(dir string) {
			writeHook(t, dir, "rewrite", prePay, `cat >/dev/null; echo '{"decision":"allow","updated_arguments":{"amount":9}}'`)
		})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "pay")
		cr := st.waitFor("confirmation_required", nil)
		if p, _ := cr.Data["params"].(map[string]any); p["amount"] != float64(9) {
			t.Fatalf("card does not show the effective arguments: %s", cr.Raw)
		}
		approveCall(t, base, str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256"))
		res := st.waitFor("tool_call_result", nil)
		if !strings.Contains(res.Raw, `"input":{"amount":9}`) {
			t.Fatalf("ran with other arguments: %s", res.Raw)
		}
	})
	t.Run("a schema-breaking rewrite is refused", func(t *testing.T) {
		base, execLog := hookServer(t, func(dir string) {
			writeHook(t, dir, "breaker", prePay, `cat >/dev/null; echo '{"decision":"allow","updated_arguments":{"amount":"lots"}}'`)
		})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "pay")
		ref := st.waitFor("tool_call_refused", nil)
		if !strings.Contains(str(ref.Data, "reason"), `hook "breaker" rewrote the arguments`) {
			t.Fatalf("refusal: %s", ref.Raw)
		}
		if n := execCount(t, execLog, "pay"); n != 0 {
			t.Fatalf("pay ran %d times", n)
		}
	})
	for _, tc := range []struct {
		name, script, policy string
		refused              bool
	}{
		{"non-zero exit fails closed", `cat >/dev/null; exit 1`, "", true},
		{"a hang fails closed", `cat >/dev/null; sleep 30`, "closed", true},
		{"non-zero exit fails open when configured", `cat >/dev/null; exit 1`, "open", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := hookServer(t, func(dir string) {
				def := map[string]any{"points": []string{"preToolUse"}, "matcher": "pay", "timeout_ms": 300}
				if tc.policy != "" {
					def["fail_policy"] = tc.policy
				}
				writeHook(t, dir, "flaky", def, tc.script)
			})
			conv, st := newConversation(t, base, "")
			send(t, base, "", conv, "pay")
			if tc.refused {
				ref := st.waitFor("tool_call_refused", nil)
				if !strings.Contains(str(ref.Data, "reason"), `hook "flaky"`) || !strings.Contains(str(ref.Data, "reason"), "fail_policy is closed") {
					t.Fatalf("refusal: %s", ref.Raw)
				}
				return
			}
			if cr := st.waitFor("confirmation_required", nil); cr.Data["escalated"] != false {
				t.Fatalf("card: %s", cr.Raw)
			}
		})
	}
	t.Run("postToolUse sees the result", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "post.json")
		t.Setenv("HOOK_OUT", out)
		base, _ := hookServer(t, func(dir string) {
			writeHook(t, dir, "audit", map[string]any{"points": []string{"postToolUse"}, "env": []string{"HOOK_OUT"}}, `cat > "$HOOK_OUT"`)
		})
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, "record it")
		res := st.waitFor("tool_call_result", nil)
		st.waitFor("run_finished", nil)
		b, err := os.ReadFile(out)
		must(t, err)
		var in map[string]any
		must(t, json.Unmarshal(b, &in))
		if in["point"] != "postToolUse" || in["status"] != "completed" || in["tool_call_id"] != res.Data["tool_call_id"] ||
			in["tool_name"] != "record" || !strings.Contains(string(b), `"result":{"ok":true}`) {
			t.Fatalf("postToolUse stdin: %s", b)
		}
	})
}

// Acceptance 2: a hook that changes the arguments at execution makes the
// approved call ask again; nothing runs on the old approval; the second
// approval runs the rewritten call once.
func TestHookRewriteAtExecutionAsksAgain(t *testing.T) {
	base, execLog := hookServer(t, func(dir string) {
		writeHook(t, dir, "late", prePay,
			`in=$(cat); case "$in" in *'"amount":5'*'"phase":"execute"'*) echo '{"decision":"allow","updated_arguments":{"amount":6}}';; esac`)
	})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay")
	cr := st.waitFor("confirmation_required", nil)
	if p, _ := cr.Data["params"].(map[string]any); p["amount"] != float64(5) || cr.Data["escalated"] != false {
		t.Fatalf("first card: %s", cr.Raw)
	}
	callID := str(cr.Data, "tool_call_id")
	approveCall(t, base, callID, str(cr.Data, "arguments_sha256"))
	cr2 := st.waitFor("confirmation_required", nil)
	if str(cr2.Data, "tool_call_id") != callID || cr2.Data["escalated"] != true ||
		!strings.Contains(str(cr2.Data, "reason"), "arguments changed after approval") || cr2.Data["arguments_sha256"] == cr.Data["arguments_sha256"] {
		t.Fatalf("second card: %s", cr2.Raw)
	}
	if p, _ := cr2.Data["params"].(map[string]any); p["amount"] != float64(6) {
		t.Fatalf("second card arguments: %s", cr2.Raw)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times on the old approval", n)
	}
	// The old approval cannot be replayed onto the new card.
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "",
		`{"decision":"approve","arguments_sha256":"`+str(cr.Data, "arguments_sha256")+`"}`)
	if status != http.StatusConflict || errCode(m) != "stale" {
		t.Fatalf("approval with the old digest: %d %v", status, m)
	}
	approveCall(t, base, callID, str(cr2.Data, "arguments_sha256"))
	res := st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" || !strings.Contains(res.Raw, `"input":{"amount":6}`) {
		t.Fatalf("result: %s", res.Raw)
	}
	st.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
	_, got := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	if decs, _ := got["decisions"].([]any); len(decs) != 2 {
		t.Fatalf("history: %v", got["decisions"])
	}
}
