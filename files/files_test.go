package files

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// workspace makes a workspace with notes.md, a folder, and symbolic links
// that lead outside it (to a folder and a file whose content must never be
// read or changed) and one that stays inside.
func workspace(t *testing.T) (*Source, string, string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	out := filepath.Join(base, "outside")
	for _, d := range []string{ws, out, filepath.Join(ws, "docs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(ws, "notes.md"), "one\ntwo\nthree\n")
	write(t, filepath.Join(out, "secret.txt"), "outside secret\n")
	for link, target := range map[string]string{"out": out, "secret": filepath.Join(out, "secret.txt"), "inner": "notes.md", "up": "../outside"} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ws, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws, out
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *Source) def(name string) toolset.Tool {
	for _, d := range s.defs {
		if d.Spec.Name == name {
			return d
		}
	}
	panic(name)
}

// classify is what the loop does at the model's step: confirm's decision,
// then Prepare of the effective arguments.
func classify(t *testing.T, s *Source, name, args string) (confirm.Classification, toolset.Preparation, error) {
	t.Helper()
	def := s.def(name)
	d := confirm.Classify(confirm.Call{Name: name, Arguments: json.RawMessage(args), Tool: def.Confirm})
	if d.Refused {
		return d, toolset.Preparation{}, nil
	}
	p, err := def.Prepare(context.Background(), d.Arguments)
	return d, p, err
}

func TestTiers(t *testing.T) {
	s, _, _ := workspace(t)
	for name, want := range map[string]agentd.Tier{ListFiles: agentd.TierAuto, ReadFile: agentd.TierAuto,
		WriteFile: agentd.TierConfirm, EditFile: agentd.TierConfirm, DeleteFile: agentd.TierConfirm} {
		if got := confirm.ExposureTier(s.def(name).Confirm.Exposure); got != want {
			t.Errorf("%s: tier %s, want %s", name, got, want)
		}
		if s.def(name).Confirm.ServerID != "files" {
			t.Errorf("%s: server_id %q", name, s.def(name).Confirm.ServerID)
		}
	}
}

// Absolute paths and ".." are refused by the arguments' validation (tier
// never, a reason), and links that lead outside by Prepare; nothing
// outside is read or written.
func TestRefusals(t *testing.T) {
	s, _, out := workspace(t)
	for _, tc := range []struct{ tool, args, want string }{
		{ReadFile, `{"path":"/etc/passwd"}`, "absolute path"},
		{ReadFile, `{"path":"../outside/secret.txt"}`, `".."`},
		{WriteFile, `{"path":"docs/../../x","content":"x"}`, `".."`},
		{ListFiles, `{"path":"/"}`, "absolute path"},
		{ReadFile, `{}`, `"path" is required`},
		{ReadFile, `{"path":"a","extra":1}`, "unknown field"},
		{WriteFile, `{"path":"a"}`, `"content" is required`},
	} {
		d, _, err := classify(t, s, tc.tool, tc.args)
		if err != nil || !d.Refused || d.Tier != agentd.TierNever || !strings.Contains(d.Reason, tc.want) {
			t.Errorf("%s %s: %+v %v, want refused (never) with %q", tc.tool, tc.args, d, err, tc.want)
		}
	}
	for _, tc := range []struct{ tool, args string }{
		{ReadFile, `{"path":"secret"}`},
		{ReadFile, `{"path":"out/secret.txt"}`},
		{ListFiles, `{"path":"out"}`},
		{ListFiles, `{"path":"up"}`},
		{WriteFile, `{"path":"out/new.txt","content":"x"}`},
		{WriteFile, `{"path":"secret","content":"x"}`},
		{EditFile, `{"path":"secret","old_text":"outside","new_text":"pwned"}`},
		{DeleteFile, `{"path":"out/secret.txt"}`},
	} {
		_, _, err := classify(t, s, tc.tool, tc.args)
		if err == nil || !strings.Contains(err.Error(), "leads outside the workspace") {
			t.Errorf("%s %s: %v, want a refusal naming the way outside", tc.tool, tc.args, err)
		}
		// Execute refuses the same, whatever the loop did.
		_, err = s.Execute(context.Background(), agentd.ToolCall{Name: tc.tool, Arguments: json.RawMessage(tc.args), StateSHA256: "x"})
		if err == nil {
			t.Errorf("Execute %s %s ran", tc.tool, tc.args)
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "secret.txt"))
	if string(b) != "outside secret\n" {
		t.Fatalf("outside file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "new.txt")); err == nil {
		t.Fatal("a file was created outside the workspace")
	}
	// A link that stays inside is followed.
	if _, _, err := classify(t, s, ReadFile, `{"path":"inner"}`); err != nil {
		t.Fatalf("inner link: %v", err)
	}
}

// write_file's card is the unified diff of exactly what would change; the
// approval writes exactly that; a change after the card is refused.
func TestWriteDiffAndState(t *testing.T) {
	s, ws, _ := workspace(t)
	d, p, err := classify(t, s, WriteFile, `{"path":"notes.md","content":"one\n2\nthree\n"}`)
	if err != nil || d.Tier != agentd.TierConfirm {
		t.Fatalf("classify: %+v %v", d, err)
	}
	want := "--- a/notes.md\n+++ b/notes.md\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
	if p.Diff != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", p.Diff, want)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("classification changed the file: %q", b)
	}
	call := agentd.ToolCall{Name: WriteFile, Arguments: d.Arguments, StateSHA256: p.State}
	// Someone changes the file after the card: nothing is written over it.
	write(t, filepath.Join(ws, "notes.md"), "one\ntwo\nthree\nfour\n")
	if _, err := s.Execute(context.Background(), call); err == nil || !strings.Contains(err.Error(), "changed after the approval") {
		t.Fatalf("stale write: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("stale write changed the file: %q", b)
	}
	// A fresh card then writes exactly the content.
	_, p2, err := classify(t, s, WriteFile, `{"path":"notes.md","content":"one\n2\nthree\n"}`)
	if err != nil || p2.State == p.State || !strings.Contains(p2.Diff, "-four") {
		t.Fatalf("fresh card: %+v %v", p2, err)
	}
	call.StateSHA256 = p2.State
	res, err := s.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "one\n2\nthree\n" {
		t.Fatalf("written %q", b)
	}
	var r map[string]any
	_ = json.Unmarshal(res, &r)
	if r["action"] != "replaced" || r["lines_added"] != float64(1) || r["lines_removed"] != float64(2) {
		t.Errorf("result %s", res)
	}
}

func TestEditDeleteCreate(t *testing.T) {
	s, ws, _ := workspace(t)
	ctx := context.Background()
	for _, tc := range []struct{ args, want string }{
		{`{"path":"notes.md","old_text":"zzz","new_text":"x"}`, "does not occur"},
		{`{"path":"notes.md","old_text":"t","new_text":"x"}`, "occurs 2 times"},
		{`{"path":"nope.md","old_text":"t","new_text":"x"}`, "does not exist"},
	} {
		if _, _, err := classify(t, s, EditFile, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("edit %s: %v, want %q", tc.args, err, tc.want)
		}
	}
	d, p, err := classify(t, s, EditFile, `{"path":"notes.md","old_text":"two","new_text":"TWO"}`)
	if err != nil || !strings.Contains(p.Diff, "-two\n+TWO") {
		t.Fatalf("edit: %+v %v", p, err)
	}
	if _, err := s.Execute(ctx, agentd.ToolCall{Name: EditFile, Arguments: d.Arguments, StateSHA256: p.State}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(b) != "one\nTWO\nthree\n" {
		t.Fatalf("edited %q", b)
	}
	d, p, err = classify(t, s, WriteFile, `{"path":"new/dir/a.txt","content":"hi\n"}`)
	if err != nil || p.State != absent || !strings.HasPrefix(p.Diff, "--- a/new/dir/a.txt\n+++ b/new/dir/a.txt\n") {
		t.Fatalf("create: %+v %v", p, err)
	}
	if res, err := s.Execute(ctx, agentd.ToolCall{Name: WriteFile, Arguments: d.Arguments, StateSHA256: p.State}); err != nil || !strings.Contains(string(res), `"created"`) {
		t.Fatalf("create: %s %v", res, err)
	}
	d, p, err = classify(t, s, DeleteFile, `{"path":"new/dir/a.txt"}`)
	if err != nil || !strings.Contains(p.Diff, "-hi") {
		t.Fatalf("delete: %+v %v", p, err)
	}
	if _, err := s.Execute(ctx, agentd.ToolCall{Name: DeleteFile, Arguments: d.Arguments, StateSHA256: p.State}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new/dir/a.txt")); !os.IsNotExist(err) {
		t.Fatalf("not deleted: %v", err)
	}
	res, err := s.Execute(ctx, agentd.ToolCall{Name: ListFiles, Arguments: json.RawMessage(`{"path":""}`)})
	if err != nil || !strings.Contains(string(res), `{"name":"notes.md","type":"file","size":14}`) || !strings.Contains(string(res), `"name":"out","type":"symlink"`) {
		t.Fatalf("list: %s %v", res, err)
	}
}

func TestSizeLimits(t *testing.T) {
	s, ws, _ := workspace(t)
	big := strings.Repeat("x", DefaultMaxReadBytes+1)
	write(t, filepath.Join(ws, "big.txt"), big)
	if _, err := s.Execute(context.Background(), agentd.ToolCall{Name: ReadFile, Arguments: json.RawMessage(`{"path":"big.txt"}`)}); err == nil || !strings.Contains(err.Error(), "read limit") {
		t.Fatalf("big read: %v", err)
	}
	args, _ := json.Marshal(map[string]string{"path": "w.txt", "content": big})
	if d, _, _ := classify(t, s, WriteFile, string(args)); !d.Refused || !strings.Contains(d.Reason, "write limit") {
		t.Fatalf("big write: %+v", d)
	}
}

// The path resolver never accepts a path that is absolute or leaves the
// workspace, and whatever it accepts, os.Root resolves inside: a real
// workspace with a link outside is never read through.
func FuzzCleanPath(f *testing.F) {
	for _, seed := range []string{"", ".", "a", "a/b", "../x", "a/../../b", "/etc", "a//b/", "./a", "out/secret.txt", "secret", `\x`, "a\x00b", "up/x", "..", "a/..",
		"report.txt\n+++ b/report.txt\n@@ -1 +1 @@", "a\rb", "txt\u202eexe.md", "a\u2066b", "a\u2028b", "a\u0085b", "a\xffb", "März.md"} {
		f.Add(seed)
	}
	base := f.TempDir()
	ws := filepath.Join(base, "ws")
	_ = os.MkdirAll(filepath.Join(ws, "a"), 0o755)
	_ = os.WriteFile(filepath.Join(base, "secret.txt"), []byte("outside"), 0o644)
	_ = os.Symlink(base, filepath.Join(ws, "out"))
	_ = os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(ws, "secret"))
	s, err := Open(ws, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := CleanPath(p, true)
		if err != nil {
			return
		}
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(clean, "/../") {
			t.Fatalf("CleanPath(%q) = %q escapes", p, clean)
		}
		if !filepath.IsLocal(clean) && clean != "." {
			t.Fatalf("CleanPath(%q) = %q is not local", p, clean)
		}
		// Nothing accepted can make the card read otherwise: valid UTF-8,
		// no control, line separator or bidirectional formatting character.
		if !utf8.ValidString(clean) {
			t.Fatalf("CleanPath(%q) = %q is not valid UTF-8", p, clean)
		}
		for _, r := range clean {
			if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Bidi_Control) {
				t.Fatalf("CleanPath(%q) = %q holds %U", p, clean, r)
			}
		}
		f, err := s.current(clean)
		if err == nil && f != nil && strings.Contains(string(f.content), "outside") {
			t.Fatalf("%q read a file outside the workspace", p)
		}
	})
}
