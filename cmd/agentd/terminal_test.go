package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerminalText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nnext, café, \ufffd":    "plain\ttext\nnext, café, \ufffd",
		"\x1b[2K\x1b[1A\rover":               `\x1b[2K\x1b[1A\rover`,
		"bell\a del\x7f c1\u009b31m nul\x00": `bell\x07 del\x7f c1\u009b31m nul\x00`,
		"lone \x9b byte":                     `lone \x9b byte`,
	} {
		if got := terminalText(in); got != want {
			t.Errorf("terminalText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCompactNeverCutsARune: the chat's one-line JSON is cut on a rune
// boundary, whatever rune the limit falls in.
func TestCompactNeverCutsARune(t *testing.T) {
	raw := []byte(`{"note":"aé€😀b"}`) // runes of 1, 2, 3, 4 and 1 bytes
	for max := 9; max < len(raw); max++ {
		got := compact(raw, max)
		cut, ok := strings.CutSuffix(got, "…")
		if !ok || len(cut) > max || !utf8.ValidString(got) || !strings.HasPrefix(string(raw), cut) {
			t.Errorf("compact(%d) = %q", max, got)
		}
	}
	if got := compact([]byte("{ \"a\": 1 }"), 80); got != `{"a":1}` {
		t.Errorf("a body that fits: %q", got)
	}
}
