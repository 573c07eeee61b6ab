package files

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

func link(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Link(oldname, newname); err != nil {
		t.Skipf("hard link: %v", err)
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

// A hard link in the workspace to a file outside is neither read nor
// changed: every file with more than one link is refused (its other names
// cannot be seen from the workspace), also one whose other name is inside.
func TestHardLinksRefused(t *testing.T) {
	s, ws, out := workspace(t)
	link(t, filepath.Join(out, "secret.txt"), filepath.Join(ws, "hard.txt"))
	write(t, filepath.Join(ws, "a.md"), "a\n")
	link(t, filepath.Join(ws, "a.md"), filepath.Join(ws, "b.md"))
	for _, p := range []string{"hard.txt", "a.md", "b.md"} {
		res, err := s.Execute(context.Background(), agentd.ToolCall{Name: ReadFile, Arguments: json.RawMessage(`{"path":"` + p + `"}`)})
		if err == nil || !strings.Contains(err.Error(), "has 2 hard links") || strings.Contains(string(res), "secret") {
			t.Errorf("read_file %s: %s %v, want refused: has 2 hard links", p, res, err)
		}
		for _, tc := range []struct{ tool, args string }{
			{ReadFile, `{"path":"` + p + `"}`},
			{WriteFile, `{"path":"` + p + `","content":"pwned\n"}`},
			{EditFile, `{"path":"` + p + `","old_text":"e","new_text":"E"}`},
			{DeleteFile, `{"path":"` + p + `"}`},
		} {
			if _, _, err := classify(t, s, tc.tool, tc.args); err == nil || !strings.Contains(err.Error(), "hard links") {
				t.Errorf("%s %s: %v, want refused: hard links", tc.tool, p, err)
			}
			_, err := s.Execute(context.Background(), agentd.ToolCall{Name: tc.tool, Arguments: json.RawMessage(tc.args), StateSHA256: absent})
			if err == nil {
				t.Errorf("Execute %s %s ran", tc.tool, p)
			}
		}
	}
	if got := readString(t, filepath.Join(out, "secret.txt")); got != "outside secret\n" {
		t.Fatalf("outside file changed: %q", got)
	}
	if got := readString(t, filepath.Join(ws, "a.md")); got != "a\n" {
		t.Fatalf("a.md changed: %q", got)
	}
	// A link made after the card: the approved write does not go through it.
	d, p, err := classify(t, s, WriteFile, `{"path":"notes.md","content":"new\n"}`)
	if err != nil {
		t.Fatal(err)
	}
	link(t, filepath.Join(ws, "notes.md"), filepath.Join(out, "notes-copy.md"))
	if _, err := s.Execute(context.Background(), agentd.ToolCall{Name: WriteFile, Arguments: d.Arguments, StateSHA256: p.State}); err == nil {
		t.Fatal("a write went through a file linked outside after the card")
	}
	if got := readString(t, filepath.Join(out, "notes-copy.md")); got != "one\ntwo\nthree\n" {
		t.Fatalf("the file outside changed: %q", got)
	}
}

// The approval of a change is bound to the file's identity as well as its
// content: notes.md swapped for a symbolic link to another file of the
// workspace with equal content, or for a copy moved over it, is a change
// of state (the loop's recheck parks the call again), and the approved
// write does not reach the other file.
func TestApprovalBoundToFileIdentity(t *testing.T) {
	swaps := map[string]func(t *testing.T, ws string){
		"symlink to an equal file": func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "notes.md")))
			must(t, os.Symlink("other.md", filepath.Join(ws, "notes.md")))
		},
		"equal copy moved over it": func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, "copy.md"), "one\ntwo\nthree\n")
			must(t, os.Rename(filepath.Join(ws, "copy.md"), filepath.Join(ws, "notes.md")))
		},
	}
	for name, swap := range swaps {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct{ tool, args string }{
				{WriteFile, `{"path":"notes.md","content":"one\nTWO\nthree\n"}`},
				{EditFile, `{"path":"notes.md","old_text":"two","new_text":"TWO"}`},
			} {
				s, ws, _ := workspace(t)
				write(t, filepath.Join(ws, "other.md"), "one\ntwo\nthree\n")
				d, p, err := classify(t, s, tc.tool, tc.args)
				if err != nil {
					t.Fatal(err)
				}
				swap(t, ws)
				_, again, err := classify(t, s, tc.tool, tc.args)
				if err != nil || again.State == p.State || again.Diff != p.Diff {
					t.Fatalf("%s after the swap: state %q (was %q), %v; want a new state and the same diff", tc.tool, again.State, p.State, err)
				}
				call := agentd.ToolCall{Name: tc.tool, Arguments: d.Arguments, StateSHA256: p.State}
				if _, err := s.Execute(context.Background(), call); err == nil || !strings.Contains(err.Error(), "changed after the approval") {
					t.Fatalf("%s on the old approval: %v, want refused", tc.tool, err)
				}
				if got := readString(t, filepath.Join(ws, "other.md")); got != "one\ntwo\nthree\n" {
					t.Fatalf("%s wrote the other file: %q", tc.tool, got)
				}
			}
		})
	}
}

// Between the last check and the write, another file put at the path is
// not written: the write checks the file it opened.
func TestWriteChecksTheFileItOpens(t *testing.T) {
	s, ws, _ := workspace(t)
	write(t, filepath.Join(ws, "other.md"), "one\ntwo\nthree\n")
	ch, err := s.change(WriteFile, args{Path: "notes.md", Content: ptr("new\n")})
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Remove(filepath.Join(ws, "notes.md")))
	must(t, os.Symlink("other.md", filepath.Join(ws, "notes.md")))
	if err := s.write(ch); err == nil || !strings.Contains(err.Error(), "another file than the approval saw") {
		t.Fatalf("write after a swap: %v", err)
	}
	if got := readString(t, filepath.Join(ws, "other.md")); got != "one\ntwo\nthree\n" {
		t.Fatalf("the other file was written: %q", got)
	}
	// A new file that someone else creates first is not written over.
	ch, err = s.change(WriteFile, args{Path: "fresh.md", Content: ptr("mine\n")})
	if err != nil || ch.existed {
		t.Fatalf("change: %+v %v", ch, err)
	}
	write(t, filepath.Join(ws, "fresh.md"), "theirs\n")
	if err := s.write(ch); err == nil || !strings.Contains(err.Error(), "created after the approval") {
		t.Fatalf("write over a file created after the card: %v", err)
	}
	if got := readString(t, filepath.Join(ws, "fresh.md")); got != "theirs\n" {
		t.Fatalf("fresh.md: %q", got)
	}
}

func ptr(s string) *string { return &s }

// TestWriteComparesWhatItOpens: an edit in place by another writer after the
// change was computed (same file, same inode, one link) is not written over:
// write compares the content it finds through the descriptor it writes with.
func TestWriteComparesWhatItOpens(t *testing.T) {
	s, ws, _ := workspace(t)
	ch, err := s.change(WriteFile, args{Path: "notes.md", Content: ptr("mine\n")})
	if err != nil || !ch.existed {
		t.Fatalf("change: %+v %v", ch, err)
	}
	f, err := os.OpenFile(filepath.Join(ws, "notes.md"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("another writer's line\n")
	must(t, err)
	must(t, f.Close())
	before := readString(t, filepath.Join(ws, "notes.md"))
	if err := s.write(ch); err == nil || !strings.Contains(err.Error(), "changed after the approval") {
		t.Fatalf("write over an edit in place: %v", err)
	}
	if got := readString(t, filepath.Join(ws, "notes.md")); got != before {
		t.Fatalf("the other writer's edit was overwritten: %q", got)
	}
	// Unchanged, the same change writes, from the start of the file.
	ch, err = s.change(WriteFile, args{Path: "notes.md", Content: ptr("mine\n")})
	must(t, err)
	must(t, s.write(ch))
	if got := readString(t, filepath.Join(ws, "notes.md")); got != "mine\n" {
		t.Fatalf("notes.md after the write: %q", got)
	}
}
