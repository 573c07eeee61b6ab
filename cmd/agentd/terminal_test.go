package main

import "testing"

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
