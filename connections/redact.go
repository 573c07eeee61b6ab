package connections

import (
	"bytes"
	"encoding/base64"
)

// redactMarker replaces a connection's secret in what a response gives back.
const redactMarker = "[redacted]"

// minSecretLen is the shortest secret that is redacted: rewriting bodies
// over a trivially short secret would mangle them and hide nothing.
const minSecretLen = 4

// secrets returns what redact replaces: the secrets as they are sent (the
// token, the header value, the basic-auth password and the base64 form of
// user:password), each at least minSecretLen bytes. It is nil without
// credentials.
func (c *credentials) secrets() []string {
	if c == nil {
		return nil
	}
	all := []string{c.value}
	if c.kind == "basic" {
		all = []string{base64.StdEncoding.EncodeToString([]byte(c.username + ":" + c.password)), c.password}
	}
	var out []string
	for _, s := range all {
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	return out
}

// longestSecret is the length of the longest secret redact replaces (0
// without credentials): how far past a cut a secret can reach.
func (c *Connection) longestSecret() int {
	n := 0
	for _, s := range c.redacts {
		n = max(n, len(s))
	}
	return n
}

// redact is the one place the connection's secrets are taken out of what a
// response gives back. It returns b with every secret replaced by
// "[redacted]", then bounded to limit bytes (limit < 0: no bound), and
// whether the result is incomplete: cut to limit, or more is set (b is only
// the beginning of a longer text). An incomplete result never ends with the
// beginning of a secret that the rest of the text may complete: that
// beginning is replaced by "[redacted]" too (within the bound), so a secret
// that straddles a cut never shows in part. Secrets are replaced before
// the text is cut, so a caller should pass at least limit +
// longestSecret() bytes of a longer text.
func (c *Connection) redact(b []byte, limit int64, more bool) ([]byte, bool) {
	secrets := c.redacts
	for _, s := range secrets {
		b = bytes.ReplaceAll(b, []byte(s), []byte(redactMarker))
	}
	end := len(b)
	if limit >= 0 && int64(end) > limit {
		end = int(limit)
	}
	if !more && end == len(b) {
		return b, false
	}
	m := safeEnd(b, end, secrets)
	if m == end {
		return b[:end:end], true
	}
	// A secret's beginning ended at the cut: it is replaced as well, and
	// the marker must fit in the bound.
	if limit >= 0 && int64(m+len(redactMarker)) > limit {
		if limit < int64(len(redactMarker)) {
			return b[:m:m], true
		}
		m = safeEnd(b, int(limit)-len(redactMarker), secrets)
	}
	return append(b[:m:m], redactMarker...), true
}

// redactString is redact for a whole, unbounded text (a status line, an
// error message).
func (c *Connection) redactString(s string) string {
	b, _ := c.redact([]byte(s), -1, false)
	return string(b)
}

// safeEnd returns the largest m <= end such that b[:m] does not end with
// the beginning of a secret: with no i < m < i+len(s) where b from i on
// agrees with a secret s for as far as both go (so b, or the text after
// it, may hold s at i).
func safeEnd(b []byte, end int, secrets []string) int {
	for {
		cut := end
		for _, s := range secrets {
			for i := max(0, end-len(s)+1); i < cut; i++ {
				n := min(len(b)-i, len(s))
				if bytes.Equal(b[i:i+n], []byte(s[:n])) {
					cut = i
					break
				}
			}
		}
		if cut == end {
			return end
		}
		end = cut
	}
}
