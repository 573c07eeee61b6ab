package agentd

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateUTF8(t *testing.T) {
	s := "aé€😀b" // 1, 2, 3, 4 and 1 bytes
	for n := -1; n <= len(s)+1; n++ {
		got := TruncateUTF8(s, n)
		if len(got) > max(n, 0) || !utf8.ValidString(got) || !strings.HasPrefix(s, got) {
			t.Fatalf("TruncateUTF8(%d) = %q", n, got)
		}
		// The longest such prefix: one more rune would not fit.
		if rest := s[len(got):]; rest != "" {
			_, size := utf8.DecodeRuneInString(rest)
			if len(got)+size <= n {
				t.Fatalf("TruncateUTF8(%d) = %q: %q would fit too", n, got, s[:len(got)+size])
			}
		}
	}
	if got := TruncateUTF8("fits", 4); got != "fits" {
		t.Fatalf("a string that fits: %q", got)
	}
}
