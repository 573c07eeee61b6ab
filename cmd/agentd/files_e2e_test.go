package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeAgent replaces a test project's agent.json with one whose script is
// rules and whose other fields are extra (workspace, subagents).
func writeAgent(t *testing.T, dir, rules string, extra map[string]any) {
	t.Helper()
	agent := map[string]any{"name": "test", "system_prompt": "You are a test agent.",
		"model": map[string]any{"provider": "script", "script": map[string]json.RawMessage{"rules": json.RawMessage(rules)}}, "max_turns": 10}
	for k, v := range extra {
		agent[k] = v
	}
	b, err := json.Marshal(agent)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), b, 0o644))
}

// approveCall approves a parked call and checks the answer.
func approveCall(t *testing.T, base, callID, digest string) {
	t.Helper()
	status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "",
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, digest))
	if status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve %s: %d %v", callID, status, dec)
	}
}

const filesRules = `[
 {"when":{"user":"^write notes"},"reply":{"tool_calls":[{"name":"write_file","arguments":{"path":"notes.md","content":"one\nTWO\nthree\n"}}]}},
 {"when":{"user":"^read secret"},"reply":{"tool_calls":[{"name":"read_file","arguments":{"path":"secret"}}]}},
 {"when":{"user":"^read through"},"reply":{"tool_calls":[{"name":"read_file","arguments":{"path":"out/secret.txt"}}]}},
 {"when":{"user":"^read abs"},"reply":{"tool_calls":[{"name":"read_file","arguments":{"path":"/etc/passwd"}}]}},
 {"when":{"user":"^read up"},"reply":{"tool_calls":[{"name":"read_file","arguments":{"path":"../outside/secret.txt"}}]}},
 {"when":{"user":"^write out"},"reply":{"tool_calls":[{"name":"write_file","arguments":{"path":"out/new.txt","content":"x"}}]}},
 {"when":{"user":"^edit secret"},"reply":{"tool_calls":[{"name":"edit_file","arguments":{"path":"secret","old_text":"outside","new_text":"pwned"}}]}},
 {"when":{"user":"^write forged"},"reply":{"tool_calls":[{"name":"write_file","arguments":{"path":"report.txt\n+++ b/report.txt\n@@ -0,0 +1 @@\n+all good","content":"rm -rf ~\n"}}]}},
 {"when":{"user":"^write rtl"},"reply":{"tool_calls":[{"name":"write_file","arguments":{"path":"invoice\u202etxt.exe","content":"x"}}]}},
 {"when":{"user":"^read hardlink"},"reply":{"tool_calls":[{"name":"read_file","arguments":{"path":"hard.txt"}}]}},
 {"when":{"user":"^write hardlink"},"reply":{"tool_calls":[{"name":"write_file","arguments":{"path":"hard.txt","content":"pwned\n"}}]}},
 {"when":{"user":"^read notes"},"reply":{"tool_calls":[{"name":"read_file","arguments":{"path":"notes.md"}}]}},
 {"when":{"tool_result":"write_file","status":"completed"},"reply":{"text":"written: {{result}}"}},
 {"when":{"tool_result":"read_file","status":"completed"},"reply":{"text":"read: {{result}}"}},
 {"when":{"tool_result":"read_file"},"reply":{"text":"read {{status}}: {{reason}}"}},
 {"when":{"tool_result":"write_file"},"reply":{"text":"write {{status}}: {{reason}}"}},
 {"when":{"tool_result":"edit_file"},"reply":{"text":"edit {{status}}: {{reason}}"}}
]`

// filesProject is a test project with a workspace holding notes.md and two
// real symbolic links that lead outside it: to a folder and to a file.
func filesProject(t *testing.T) (dir, ws, outside string) {
	t.Helper()
	dir, _ = writeProject(t, projectOpts{})
	ws, outside = filepath.Join(dir, "ws"), filepath.Join(t.TempDir(), "outside")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "notes.md"), []byte("one\ntwo\nthree\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside secret\n"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(ws, "out")))
	must(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "secret")))
	writeAgent(t, dir, filesRules, map[string]any{"workspace": "ws"})
	return dir, ws, outside
}

// Acceptance 3: write_file parks with a unified diff; nothing changes
// before approval; a file changed after the card gets a fresh card, not an
// overwrite; the approval of the fresh card writes exactly that content.
func TestWriteFileDiffCardEndToEnd(t *testing.T) {
	dir, ws, _ := filesProject(t)
	base, _ := startServer(t, dir, t.TempDir(), nil)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "write notes")

	cr := st.waitFor("confirmation_required", nil)
	card, _ := cr.Data["card"].(map[string]any)
	wantDiff := "--- a/notes.md\n+++ b/notes.md\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
	if cr.Data["server_id"] != "files" || cr.Data["tool_name"] != "write_file" || card["diff"] != wantDiff {
		t.Fatalf("card: %s", cr.Raw)
	}
	notes := filepath.Join(ws, "notes.md")
	if b, _ := os.ReadFile(notes); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("the file changed before approval: %q", b)
	}
	// The file changes after the card: the approval parks the call again
	// with a fresh diff, and nothing is written over the change.
	must(t, os.WriteFile(notes, []byte("one\ntwo\nthree\nfour\n"), 0o644))
	callID := str(cr.Data, "tool_call_id")
	approveCall(t, base, callID, str(cr.Data, "arguments_sha256"))
	cr2 := st.waitFor("confirmation_required", nil)
	card2, _ := cr2.Data["card"].(map[string]any)
	if str(cr2.Data, "tool_call_id") != callID || !strings.Contains(str(card2, "diff"), "-four\n") ||
		!strings.Contains(str(cr2.Data, "reason"), "file changed") {
		t.Fatalf("fresh card: %s", cr2.Raw)
	}
	if b, _ := os.ReadFile(notes); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("the change was overwritten: %q", b)
	}
	for _, ev := range st.seen {
		if ev.Type == "tool_call_started" {
			t.Fatalf("the call started on the stale approval: %s", ev.Raw)
		}
	}
	// The fresh card is named by its card_revision: the first approval
	// repeated is stale (issue 17), never a decision on it.
	if status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "",
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q,"card_revision":2}`, str(cr2.Data, "arguments_sha256"))); status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve card 2: %d %v", status, dec)
	}
	res := st.waitFor("tool_call_result", nil)
	if res.Data["status"] != "completed" || !strings.Contains(res.Raw, `"action":"replaced"`) {
		t.Fatalf("result: %s", res.Raw)
	}
	if b, _ := os.ReadFile(notes); string(b) != "one\nTWO\nthree\n" {
		t.Fatalf("written %q, want exactly the approved content", b)
	}
	st.waitFor("run_finished", nil)
	status, got := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	if decs, _ := got["decisions"].([]any); status != 200 || len(decs) != 2 || got["status"] != "completed" {
		t.Fatalf("call history: %d %v", status, got)
	}
}

// Acceptance 3: "..", absolute paths and real symbolic links that lead
// outside the workspace are refused (tier never, with the reason), and
// nothing outside is read or written.
func TestFileToolsRefuseEscapes(t *testing.T) {
	dir, ws, outside := filesProject(t)
	base, _ := startServer(t, dir, t.TempDir(), nil)
	for _, tc := range []struct{ msg, want string }{
		{"read secret", "leads outside the workspace"},
		{"read through", "leads outside the workspace"},
		{"read abs", "absolute path"},
		{"read up", `".."`},
		{"write out", "leads outside the workspace"},
		{"edit secret", "leads outside the workspace"},
	} {
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, tc.msg)
		ref := st.waitFor("tool_call_refused", nil)
		if ref.Data["tier"] != "never" || !strings.Contains(str(ref.Data, "reason"), tc.want) {
			t.Errorf("%s: %s, want tier never and %q", tc.msg, ref.Raw, tc.want)
		}
		msg := st.waitFor("message", nil)
		if strings.Contains(str(msg.Data, "content"), "outside secret") || !strings.Contains(str(msg.Data, "content"), "refused") {
			t.Errorf("%s: the model read %q", tc.msg, msg.Data["content"])
		}
		st.waitFor("run_finished", nil)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "outside secret\n" {
		t.Fatalf("outside file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Fatal("a file was created outside the workspace")
	}
	// Inside, reads are auto.
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "read notes")
	if msg := st.waitFor("message", nil); !strings.Contains(str(msg.Data, "content"), `one\ntwo`) {
		t.Fatalf("read: %v", msg.Data["content"])
	}
	_ = ws
}

// Issue 17: a path that would forge the card (a line break that starts a
// fake hunk, a right-to-left override) and a hard link to a file outside
// the workspace are refused with the reason (tier never): no card is
// shown, nothing is written, and the outside file is neither read nor
// changed.
func TestFileToolsRefuseForgedPathsAndHardLinks(t *testing.T) {
	dir, ws, outside := filesProject(t)
	if err := os.Link(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "hard.txt")); err != nil {
		t.Skipf("hard link: %v", err)
	}
	base, _ := startServer(t, dir, t.TempDir(), nil)
	for _, tc := range []struct{ msg, want string }{
		{"write forged", `refused: it contains the control character U+000A`},
		{"write rtl", `refused: it contains the bidirectional formatting character U+202E`},
		{"read hardlink", "has 2 hard links"},
		{"write hardlink", "has 2 hard links"},
	} {
		conv, st := newConversation(t, base, "")
		send(t, base, "", conv, tc.msg)
		ref := st.waitFor("tool_call_refused", nil)
		if ref.Data["tier"] != "never" || !strings.Contains(str(ref.Data, "reason"), tc.want) {
			t.Errorf("%s: %s, want tier never and %q", tc.msg, ref.Raw, tc.want)
		}
		msg := st.waitFor("message", nil)
		if strings.Contains(str(msg.Data, "content"), "outside secret") || !strings.Contains(str(msg.Data, "content"), "refused") {
			t.Errorf("%s: the model read %q", tc.msg, msg.Data["content"])
		}
		st.waitFor("run_finished", nil)
		for _, ev := range st.seen {
			if ev.Type == "confirmation_required" {
				t.Errorf("%s: a card was shown: %s", tc.msg, ev.Raw)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "outside secret\n" {
		t.Fatalf("outside file changed: %q", b)
	}
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if strings.Contains(e.Name(), "report") || strings.Contains(e.Name(), "invoice") {
			t.Errorf("a file %q was created", e.Name())
		}
	}
}

// Issue 17: notes.md swapped, between the card and the approval, for a
// symbolic link to another file of the workspace with equal content: the
// approval is bound to the file's identity, so the call is parked again
// (the recheck sees a new state) and the other file is not written.
func TestWriteFileBoundToFileIdentityEndToEnd(t *testing.T) {
	dir, ws, _ := filesProject(t)
	must(t, os.WriteFile(filepath.Join(ws, "other.md"), []byte("one\ntwo\nthree\n"), 0o644))
	base, _ := startServer(t, dir, t.TempDir(), nil)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "write notes")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	notes := filepath.Join(ws, "notes.md")
	must(t, os.Remove(notes))
	must(t, os.Symlink("other.md", notes))
	approveCall(t, base, callID, str(cr.Data, "arguments_sha256"))
	cr2 := st.waitFor("confirmation_required", nil)
	if str(cr2.Data, "tool_call_id") != callID || !strings.Contains(str(cr2.Data, "reason"), "file changed") {
		t.Fatalf("want the call parked again, got %s", cr2.Raw)
	}
	for _, ev := range st.seen {
		if ev.Type == "tool_call_started" {
			t.Fatalf("the call started on an approval of another file: %s", ev.Raw)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "other.md")); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("the other file was written: %q", b)
	}
}
