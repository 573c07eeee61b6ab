package files

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

// leftovers are the temporary files of writes left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".agentd-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// write_file replaces a file in one rename: a reader that opened the old
// file reads all of the old content, the new one has the new content and
// the old mode, and no temporary file stays behind. A write that fails
// before the rename (as a crash would stop it) leaves the old file whole.
// A call run again after it wrote (crash recovery: write_file is
// idempotent) answers that the file already holds its content.
func TestWriteFileAtomic(t *testing.T) {
	s, ws, _ := workspace(t)
	file := filepath.Join(ws, "notes.md")
	must(t, os.Chmod(file, 0o600))
	old, err := os.Open(file)
	must(t, err)
	defer old.Close()

	content := strings.Repeat("new line\n", 1000)
	args, _ := json.Marshal(map[string]string{"path": "notes.md", "content": content})
	d, p, err := classify(t, s, WriteFile, string(args))
	if err != nil {
		t.Fatal(err)
	}
	call := agentd.ToolCall{Name: WriteFile, Arguments: d.Arguments, StateSHA256: p.State}

	crash := errors.New("killed before the rename")
	beforeReplace = func() error { return crash }
	_, err = s.Execute(context.Background(), call)
	beforeReplace = func() error { return nil }
	if err == nil || !strings.Contains(err.Error(), crash.Error()) {
		t.Fatalf("failed write: %v", err)
	}
	if got := readString(t, file); got != "one\ntwo\nthree\n" {
		t.Fatalf("after a failed write the file holds %q", got)
	}
	if l := leftovers(t, ws); len(l) != 0 {
		t.Fatalf("temporary files left: %v", l)
	}

	res, err := s.Execute(context.Background(), call)
	if err != nil || !strings.Contains(string(res), `"action":"replaced"`) {
		t.Fatalf("write: %s %v", res, err)
	}
	if got := readString(t, file); got != content {
		t.Fatalf("the file holds %d bytes, want %d", len(got), len(content))
	}
	if b, err := io.ReadAll(old); err != nil || string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("a reader of the old file read %q, %v", b, err)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("mode after the write: %v %v", info.Mode(), err)
	}
	if l := leftovers(t, ws); len(l) != 0 {
		t.Fatalf("temporary files left: %v", l)
	}

	// Recovery runs the same call again: nothing to do, and it says so.
	res, err = s.Execute(context.Background(), call)
	if err != nil || !strings.Contains(string(res), `"action":"unchanged"`) {
		t.Fatalf("again: %s %v", res, err)
	}
	for _, def := range s.Tools() {
		if def.Spec.Name == WriteFile && !def.Idempotent {
			t.Fatal("write_file is not idempotent")
		}
	}

	// A new file, in a new folder, written once and then again.
	d, p, err = classify(t, s, WriteFile, `{"path":"docs/new/fresh.md","content":"fresh\n"}`)
	if err != nil {
		t.Fatal(err)
	}
	call = agentd.ToolCall{Name: WriteFile, Arguments: d.Arguments, StateSHA256: p.State}
	for _, want := range []string{`"action":"created"`, `"action":"unchanged"`} {
		if res, err := s.Execute(context.Background(), call); err != nil || !strings.Contains(string(res), want) {
			t.Fatalf("new file: %s %v, want %s", res, err, want)
		}
	}
	if got := readString(t, filepath.Join(ws, "docs", "new", "fresh.md")); got != "fresh\n" {
		t.Fatalf("fresh.md: %q", got)
	}
	if l := leftovers(t, filepath.Join(ws, "docs", "new")); len(l) != 0 {
		t.Fatalf("temporary files left: %v", l)
	}
}
