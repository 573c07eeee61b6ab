package confirm

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// CheckShown is the rule for a name that a model chooses and a person
// reads on a card (a file path, a connection endpoint): it must be valid
// UTF-8 and hold no character that makes the card read as something other
// than what it is — no control character (C0, DEL, C1: a line break starts
// a fake diff hunk), no line or paragraph separator (U+2028, U+2029), no
// bidirectional formatting character (embeddings, overrides, isolates and
// marks: U+202E shows "exe.txt" as "txt.exe"). The error names the first
// such character.
func CheckShown(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("it is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("it contains the control character %U", r)
		}
		if r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("it contains the line separator %U", r)
		}
		if unicode.Is(unicode.Bidi_Control, r) {
			return fmt.Errorf("it contains the bidirectional formatting character %U", r)
		}
	}
	return nil
}
