package agentd

import "unicode/utf8"

// TruncateUTF8 returns the longest prefix of s of at most n bytes that ends
// on a rune boundary (s itself when it fits; "" for n <= 0). It is the one
// place where agentd cuts text: callers that mark a cut add their own marker
// within their own limit.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
