package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// terminalText returns s with every control character except newline and
// tab — C0, DEL, C1 (as U+0080–U+009F or a lone byte) — written as a
// visible escape (\x1b, \r, \u009b), so that what a model, a tool or a
// person wrote is shown and cannot drive the terminal (erase a line, move
// the cursor up over what was printed).
func terminalText(s string) string {
	// A byte that is not UTF-8 may be C1 to an 8-bit terminal.
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isTerminalControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && isTerminalControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isTerminalControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isTerminalControl reports whether r is a control character a terminal
// may act on; newline and tab are text.
func isTerminalControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// terminalWriter writes to a terminal through terminalText. Each Write is
// neutralised whole (the printers write a line, or a model's delta, at a
// time).
type terminalWriter struct{ w io.Writer }

func (t terminalWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, terminalText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
