package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cliKey = "cli-client-key"

func cliEnv(base, key string, extra ...string) func(string) string {
	return func(k string) string {
		switch k {
		case "AGENTD_URL":
			return base
		case "AGENTD_API_KEY":
			return key
		}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i] == k {
				return extra[i+1]
			}
		}
		return ""
	}
}

// runChat runs `agentd chat` with stdin and returns what it printed.
func runChat(t *testing.T, env func(string) string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	var out, errOut strings.Builder
	err := runIO(ctx, append([]string{"chat"}, args...), env, strings.NewReader(stdin), &out, &errOut)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("agentd chat: %v (%v)\nstdout:\n%s\nstderr:\n%s", err, ctx.Err(), out.String(), errOut.String())
	}
	return out.String()
}

func mustContain(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// Acceptance 5: `agentd chat` completes an approval round trip from piped
// input: it streams the answer, shows the card with the arguments and the
// deadline, and approves (y) or denies with a reason (n), each once.
func TestChatCommandApprovalRoundTrip(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{cliKey: {"t1", "client"}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	env := cliEnv(base, cliKey)

	out := runChat(t, env, "pay 5\nmaybe\ny\npay again\nn\nnot today\n")
	t.Logf("agentd chat printed:\n%s", out)
	mustContain(t, out,
		"you: pay 5\n", "agent: Paying now.\n",
		"== confirmation required: tool pay\n", `   reason:    Tool "pay" requires user confirmation`, `"amount": 5`, "   deadline:  ", "(in 15m0s)",
		"approve? [y/n] approve? [y/n] ", // "maybe" is asked again
		"· pay approved by key0\n", "· pay running {\"amount\":5}\n", `agent: paid: {"paid":true`,
		"you: pay again\n", "reason (optional): ", "· pay denied by key0: not today\n", "agent: not paid, reason: not today\n")
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1 (approved once, denied once)", n)
	}
	conv := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "conversation ")

	// Continuing the conversation replays it; its decided cards are not asked again.
	again := runChat(t, env, "", "--conversation", conv)
	if strings.Contains(again, "approve?") {
		t.Errorf("a replayed, decided card was asked about:\n%s", again)
	}

	// A bad key is a clear error, not a hang.
	var errOut strings.Builder
	err := runIO(t.Context(), []string{"chat"}, cliEnv(base, "wrong"), strings.NewReader("hi\n"), io.Discard, &errOut)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("chat with a wrong key: %v", err)
	}
}

// "e" opens the arguments in $EDITOR; an edit the server refuses is shown
// and asked again, an accepted one runs with the edited arguments.
func TestChatCommandEdit(t *testing.T) {
	f := newConnFixture(t, connRules)
	editor := filepath.Join(t.TempDir(), "fake-editor")
	// The first edit is invalid (amount is not a number), the second is good.
	must(t, os.WriteFile(editor, []byte(`#!/bin/sh
grep -q '"memo": "Paid by bank transfer"' "$1" || { echo "editor got $(cat "$1")" >&2; exit 1; }
if [ -f "`+editor+`.done" ]; then
  printf '{"path":{"id":"INV-2002"},"body":{"memo":"Edited in a terminal","amount":90}}' > "$1"
else
  touch "`+editor+`.done"
  printf '{"path":{"id":"INV-2002"},"body":{"amount":"lots"}}' > "$1"
fi
`), 0o755))
	env := cliEnv(f.base, operatorKey, "EDITOR", editor)
	out := runChat(t, env, "memo\ne\ne\n")
	mustContain(t, out, "== confirmation required: PATCH /invoices/{id} on billing (tool billing__updateInvoice)\n",
		"approve? [y/n/e] ", "· refused: edited arguments: ", "· billing__updateInvoice approved by key")
	reqs := f.api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("downstream requests %+v, want one PATCH", reqs)
	}
	jsonEqual(t, "edited body", reqs[0].Body, `{"memo":"Edited in a terminal","amount":90}`)
}

// agentd approvals lists the key's pending approvals and approves or
// denies one; agentd tail follows a conversation for a person.
func TestApprovalsAndTailCommands(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{cliKey: {"t1", "client"}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	env := cliEnv(base, cliKey)
	conv, st := newConversation(t, base, cliKey)
	send(t, base, cliKey, conv, "pay 5")
	id := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")

	var out strings.Builder
	must(t, run(t.Context(), []string{"approvals"}, env, &out, io.Discard))
	mustContain(t, out.String(), "CALL", id, `pay {"amount":5}`, conv)
	out.Reset()
	must(t, run(t.Context(), []string{"approvals", "deny", id, "--reason", "no"}, env, &out, io.Discard))
	var dec map[string]any
	if err := json.Unmarshal([]byte(out.String()), &dec); err != nil || dec["decision"] != "denied" || dec["reason"] != "no" {
		t.Fatalf("approvals deny printed %q (%v)", out.String(), err)
	}
	st.waitFor("run_finished", nil)
	out.Reset()
	must(t, run(t.Context(), []string{"approvals", "list"}, env, &out, io.Discard))
	mustContain(t, out.String(), "nothing is waiting for approval")
	if err := run(t.Context(), []string{"approvals", "approve"}, env, io.Discard, io.Discard); err != errUsage {
		t.Errorf("approvals approve without an id: %v", err)
	}

	// tail: follow until the run's end is printed, then stop it.
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"tail", "--conversation", conv}, env, pw, io.Discard)
		pw.Close()
	}()
	var got []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		got = append(got, sc.Text())
		if strings.HasPrefix(sc.Text(), "agent: not paid") {
			cancel()
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := <-done; err != nil {
		t.Fatalf("tail: %v", err)
	}
	mustContain(t, strings.Join(got, "\n"), "agent: Paying now.", "== confirmation required: tool pay", "· pay denied by key0: no", "agent: not paid, reason: no")
}

// `agentd chat` shows what the model, a tool or a person wrote without
// letting it drive the terminal: every control character but newline and
// tab (ESC, CR, the C1 CSI) is printed as a visible escape, so erase-line
// and cursor-up sequences in model text, a tool's error or a deny reason
// cannot hide or rewrite the lines before them.
func TestChatCommandNeutralisesTerminalEscapes(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{cliKey: {"t1", "client"}}})
	td := filepath.Join(dir, "tools", "esc")
	must(t, os.MkdirAll(td, 0o755))
	must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null; printf 'disk\\033[2K\\033[1Aok' >&2; exit 3\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"esc","description":"test","command":["/bin/sh","./run.sh"]}`), 0o644))
	agent, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	must(t, err)
	rules := `[{"when":{"user":"(?i)^escape"},"reply":{"text":"hidden\u001b[2K\u001b[1A\rshown\u009b31m\u0007\ttab","tool_calls":[{"name":"esc","arguments":{}}]}},` +
		`{"when":{"tool_result":"esc"},"reply":{"text":"esc {{status}}: {{reason}}"}},`
	agent = []byte(strings.Replace(string(agent), `"rules":[`, `"rules":`+rules, 1))
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), agent, 0o644))
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})

	out := runChat(t, cliEnv(base, cliKey), "escape\npay\nn\nno\x1b[2K\x1b[1A thanks\n")
	t.Logf("agentd chat printed:\n%s", out)
	for _, c := range []string{"\x1b", "\r", "\u009b", "\a"} {
		if strings.Contains(out, c) {
			t.Errorf("the output holds the control character %q:\n%q", c, out)
		}
	}
	mustContain(t, out, `agent: hidden\x1b[2K\x1b[1A\rshown\u009b31m\x07`+"\ttab", `· esc failed: `, `disk\x1b[2K\x1b[1Aok`,
		`· pay denied by key0: no\x1b[2K\x1b[1A thanks`)
}
