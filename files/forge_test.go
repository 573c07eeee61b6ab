package files

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentd-dev/agentd"
)

// A path that could forge the card — a line break that starts a fake
// hunk, a right-to-left override that shows "exe.txt" as "txt.exe", any
// other control, line separator or bidirectional formatting character —
// is refused by the arguments' validation with the reason (tier never),
// before the workspace is touched.
func TestForgedPathsRefused(t *testing.T) {
	s, _, _ := workspace(t)
	for _, tc := range []struct{ path, want string }{
		{"report.txt\n+++ b/report.txt\n@@ -0,0 +1 @@\n+all good", "the control character U+000A"},
		{"a\rb", "the control character U+000D"},
		{"a\tb", "the control character U+0009"},
		{"a\x7fb", "the control character U+007F"},
		{"a\u0085b", "the control character U+0085"},
		{"a\u2028b", "the line separator U+2028"},
		{"a\u2029b", "the line separator U+2029"},
		{"invoice\u202etxt.exe", "the bidirectional formatting character U+202E"},
		{"a\u202ab", "the bidirectional formatting character U+202A"},
		{"a\u2066b\u2069", "the bidirectional formatting character U+2066"},
		{"a\u200fb", "the bidirectional formatting character U+200F"},
		{"a\u061cb", "the bidirectional formatting character U+061C"},
		{"a\xffb", "not valid UTF-8"},
	} {
		if _, err := CleanPath(tc.path, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CleanPath(%q): %v, want a refusal with %q", tc.path, err, tc.want)
		}
		if !utf8.ValidString(tc.path) {
			continue // JSON cannot carry it: a decoded argument is valid UTF-8
		}
		for _, tool := range []string{ReadFile, WriteFile, EditFile, DeleteFile, ListFiles} {
			args := map[string]string{"path": tc.path}
			switch tool {
			case WriteFile:
				args["content"] = "x"
			case EditFile:
				args["old_text"], args["new_text"] = "a", "b"
			}
			raw := mustJSON(t, args)
			d, _, err := classify(t, s, tool, raw)
			if err != nil || !d.Refused || d.Tier != agentd.TierNever || !strings.Contains(d.Reason, "refused") {
				t.Errorf("%s %q: %+v %v, want refused (never) with the reason", tool, tc.path, d, err)
			}
		}
	}
	// Names that only look unusual are files like any other.
	for _, p := range []string{"Notizen über März.md", "日本語/ファイル.txt", "a b.txt", "émoji-🙂.md", "עברית.txt"} {
		if got, err := CleanPath(p, false); err != nil || got != p {
			t.Errorf("CleanPath(%q) = %q, %v; want it accepted as is", p, got, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}
