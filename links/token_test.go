package links

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
)

var testSecret = bytes.Repeat([]byte("s"), 32)

// TestSignVerify: a signed token verifies to its claims; a token of
// another secret, one changed character anywhere, a cut or extended
// token, and claims that are not a link's are all the same ENOTFOUND.
func TestSignVerify(t *testing.T) {
	s, err := NewSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	c := Claims{CallID: "call_1", Decision: "deny", Digest: strings.Repeat("a", 64), KeyID: "op1", Expires: 1796000000, Nonce: "n1"}
	tok := s.Sign(c)
	if got, err := s.Verify(tok); err != nil || got != c {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, c)
	}
	other, _ := NewSigner(bytes.Repeat([]byte("t"), 32))
	bad := []string{other.Sign(c), "", ".", tok + "A", tok[:len(tok)-1], strings.Replace(tok, ".", "", 1), tok + "." + tok}
	for i := range tok {
		for _, r := range "AaZz09-_." {
			if byte(r) != tok[i] {
				bad = append(bad, tok[:i]+string(r)+tok[i+1:])
			}
		}
	}
	// Signed, but not a link: an unknown decision, no call, no nonce.
	for _, cc := range []Claims{{CallID: "call_1", Decision: "edit", Nonce: "n"}, {Decision: "approve", Nonce: "n"}, {CallID: "c", Decision: "approve"}} {
		bad = append(bad, s.Sign(cc))
	}
	for _, b := range bad {
		if _, err := s.Verify(b); agentd.ErrorCode(err) != agentd.ENOTFOUND {
			t.Fatalf("Verify(%q) = %v, want ENOTFOUND", b, err)
		}
	}
	if _, err := NewSigner(testSecret[:MinSecretBytes-1]); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("a short secret: %v", err)
	}
}

// TestTokenLength: a token of up to 2048 characters verifies, a longer one
// is ENOTFOUND; Seal makes no token longer than Verify reads.
func TestTokenLength(t *testing.T) {
	s, err := NewSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	c := Claims{CallID: "c", Decision: "approve", Nonce: "n"}
	for len(s.Sign(c)) < maxToken { // 4 base64 characters per 3 bytes: one more byte of call id is at most 2 more
		c.CallID += "x"
	}
	for len(s.Sign(c)) > maxToken {
		c.CallID = c.CallID[:len(c.CallID)-1]
	}
	for _, n := range []string{"", "n", "nn"} { // reach 2048 exactly: the call id moves the length by 1 or 2
		if c2 := (Claims{CallID: c.CallID, Decision: "approve", Nonce: "n" + n}); len(s.Sign(c2)) == maxToken {
			c = c2
		}
	}
	longest := s.Sign(c)
	if len(longest) != maxToken {
		t.Fatalf("the longest token has %d characters", len(longest))
	}
	if _, err := s.Verify(longest); err != nil {
		t.Fatalf("a token of %d characters: %v", len(longest), err)
	}
	if tok, err := s.Seal(Unsealed(c)); err != nil || tok != longest {
		t.Fatalf("sealing the longest token: %v", err)
	}
	c.CallID += "xx"
	if _, err := s.Verify(s.Sign(c)); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("a token of %d characters: %v", len(s.Sign(c)), err)
	}
	if _, err := s.Seal(Unsealed(c)); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("sealing a token of %d characters: %v", len(s.Sign(c)), err)
	}
}

// TestSecret: AGENTD_LINK_SECRET wins and must be long enough; without it
// the secret is generated once and read back by every later start.
func TestSecret(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == SecretEnv {
				return v
			}
			return ""
		}
	}
	long := strings.Repeat("x", 40)
	if got, err := Secret(ctx, env(long), db); err != nil || string(got) != long {
		t.Fatalf("from the environment: %q, %v", got, err)
	}
	if _, err := Secret(ctx, env(long[:MinSecretBytes-1]), db); err == nil || !strings.Contains(err.Error(), SecretEnv) {
		t.Fatalf("a short AGENTD_LINK_SECRET: %v", err)
	}
	if got, err := Secret(ctx, env(long[:MinSecretBytes]), db); err != nil || string(got) != long[:MinSecretBytes] {
		t.Fatalf("the shortest AGENTD_LINK_SECRET: %q, %v", got, err)
	}
	first, err := Secret(ctx, env(""), db)
	if err != nil || len(first) < MinSecretBytes {
		t.Fatalf("generated: %x, %v", first, err)
	}
	if again, err := Secret(ctx, env(""), db); err != nil || !bytes.Equal(again, first) {
		t.Fatalf("second start: %x, %v; want the stored %x", again, err, first)
	}
}
