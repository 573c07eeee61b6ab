package files

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// within runs f and fails the test if it has not returned in time (a
// failure deadline: f blocking forever is the bug).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// A named pipe in the workspace is not a file: reading, writing over,
// editing or deleting it is refused at once, never a read that blocks
// (at classification that would stall the run's model step for good).
func TestNamedPipeIsRefused(t *testing.T) {
	s, ws, _ := workspace(t)
	fifo := filepath.Join(ws, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Unblock a reader stuck on the pipe when the test ends, whatever happened.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	for _, tc := range []struct{ tool, args string }{
		{WriteFile, `{"path":"pipe","content":"x"}`},
		{EditFile, `{"path":"pipe","old_text":"a","new_text":"b"}`},
		{DeleteFile, `{"path":"pipe"}`},
	} {
		within(t, tc.tool+" classification", func() {
			if _, _, err := classify(t, s, tc.tool, tc.args); err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v, want a refusal: not a regular file", tc.tool, err)
			}
		})
	}
	within(t, "read_file", func() {
		_, err := s.Execute(context.Background(), agentd.ToolCall{Name: ReadFile, Arguments: json.RawMessage(`{"path":"pipe"}`)})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("read_file: %v", err)
		}
	})
}

// delete_file of a symbolic link that stays inside removes the link, and
// the card says so: it does not show the target's content as deleted
// (the target is left as it is).
func TestDeleteSymlinkCard(t *testing.T) {
	s, ws, _ := workspace(t)
	d, p, err := classify(t, s, DeleteFile, `{"path":"inner"}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Diff, "-one") || !strings.Contains(p.Diff, "-notes.md") {
		t.Fatalf("the card must show the link (its target's path) going, not notes.md's content:\n%s", p.Diff)
	}
	call := agentd.ToolCall{Name: DeleteFile, Arguments: d.Arguments, StateSHA256: p.State}
	// The link pointed elsewhere after the card: the approval does not apply.
	must(t, os.Remove(filepath.Join(ws, "inner")))
	must(t, os.Symlink("docs", filepath.Join(ws, "inner")))
	if _, err := s.Execute(context.Background(), call); err == nil || !strings.Contains(err.Error(), "changed after the approval") {
		t.Fatalf("a re-pointed link was deleted on the old card: %v", err)
	}
	must(t, os.Remove(filepath.Join(ws, "inner")))
	must(t, os.Symlink("notes.md", filepath.Join(ws, "inner")))
	res, err := s.Execute(context.Background(), call)
	if err != nil || !strings.Contains(string(res), `"symlink_to":"notes.md"`) {
		t.Fatalf("delete: %s %v", res, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "inner")); !os.IsNotExist(err) {
		t.Fatalf("link not removed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("the target changed: %q", b)
	}
}

// list_files follows a link to a folder inside the workspace, refuses one
// to a folder outside, and says nothing of what is outside.
func TestListThroughLinks(t *testing.T) {
	s, ws, _ := workspace(t)
	write(t, filepath.Join(ws, "docs", "a.md"), "a")
	if err := os.Symlink("docs", filepath.Join(ws, "docslink")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Execute(context.Background(), agentd.ToolCall{Name: ListFiles, Arguments: json.RawMessage(`{"path":"docslink"}`)})
	if err != nil || !strings.Contains(string(res), `"name":"a.md"`) {
		t.Fatalf("list through an inner link: %s %v", res, err)
	}
	for _, p := range []string{"out", "up", "out/.", "docslink/../out"} {
		args := `{"path":"` + p + `"}`
		res, err := s.Execute(context.Background(), agentd.ToolCall{Name: ListFiles, Arguments: json.RawMessage(args)})
		if err == nil || strings.Contains(string(res), "secret.txt") {
			t.Errorf("list %s: %s %v", p, res, err)
		}
	}
}

// Bad paths and an empty old_text are refused as invalid arguments, before
// the workspace is touched: tier never, with the reason.
func TestRefusedArguments(t *testing.T) {
	s, _, _ := workspace(t)
	long := strings.Repeat("a/", 600)
	for _, tc := range []struct{ tool, args, want string }{
		{EditFile, `{"path":"notes.md","old_text":"","new_text":"x"}`, `"old_text" must not be empty`},
		{ReadFile, `{"path":"a\u0000b"}`, "NUL"},
		{ReadFile, `{"path":"` + long + `"}`, "longer than"},
		{WriteFile, `{"path":"` + strings.Repeat("n", 300) + `","content":"x"}`, "file name too long"},
	} {
		d, _, err := classify(t, s, tc.tool, tc.args)
		reason := d.Reason
		if err != nil {
			reason = err.Error()
		}
		if !(d.Refused || err != nil) || !strings.Contains(reason, tc.want) {
			t.Errorf("%s %.60s: %+v %v, want refused with %q", tc.tool, tc.args, d, err, tc.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
