// Package links mints and checks decision links (SPEC §11.4,
// docs/governance.md#decision-links): single-use approve and deny URLs of a
// parked call, for a person who has no API key. A link's token is signed
// with HMAC-SHA256 and binds the call, the decision, the arguments digest,
// the minting key and the expiry; its use decides through the engine's one
// decision path as the minting key, with via "link". The package knows the
// domain, the store's LinkStore role and a small Engine interface: not the
// loop, not HTTP (the API serves the pages, package api).
package links

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
)

// MinSecretBytes is the shortest signing secret accepted
// (AGENTD_LINK_SECRET, or the generated one).
const MinSecretBytes = 32

// Claims are what a token binds.
type Claims struct {
	CallID   string `json:"c"`
	Decision string `json:"d"` // "approve" or "deny"
	Digest   string `json:"a"` // the call's arguments_sha256 when minted
	KeyID    string `json:"k"` // the minting key
	Expires  int64  `json:"e"` // unix seconds
	Nonce    string `json:"n"` // random: the link's id in the spent list
}

// b64 is the tokens' encoding: unpadded base64url, strict, so that no two
// spellings decode to the same bytes (a changed last character is a
// changed token, never the same one).
var b64 = base64.RawURLEncoding.Strict()

// macContext separates link MACs from any other use of the secret.
const macContext = "agentd decision link v1\n"

// Signer signs and verifies tokens with one secret.
type Signer struct{ key []byte }

// NewSigner returns a Signer of secret (at least MinSecretBytes).
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretBytes {
		return nil, agentd.Errorf(agentd.EINVALID, "a decision link secret has at least %d bytes, got %d", MinSecretBytes, len(secret))
	}
	return &Signer{key: append([]byte(nil), secret...)}, nil
}

func (s *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(macContext))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Sign returns the token of c: base64url(JSON of c) "." base64url(MAC).
func (s *Signer) Sign(c Claims) string { return s.seal(Unsealed(c)) }

// Unsealed is the token of c without its MAC: base64url(JSON of c). It
// opens nothing (Verify refuses it) until Seal adds the MAC; anyone may
// read it.
func Unsealed(c Claims) string {
	b, _ := json.Marshal(c) // strings and an int64: cannot fail
	return b64.EncodeToString(b)
}

func (s *Signer) seal(payload string) string {
	return payload + "." + b64.EncodeToString(s.mac(payload))
}

// Seal returns the token of an unsealed one (Unsealed): it adds the MAC,
// the only part that needs the secret, so the same unsealed token always
// seals to the same token. ENOTFOUND when unsealed is not the unsealed
// token of a link's claims (a sealed token included).
func (s *Signer) Seal(unsealed string) (string, error) {
	if _, err := parseClaims(unsealed); err != nil {
		return "", err
	}
	if tok := s.seal(unsealed); len(tok) <= maxToken {
		return tok, nil
	}
	return "", errNoLink() // Verify would refuse it
}

// maxToken bounds the length of a token read.
const maxToken = 2048

// Verify returns the claims of a token this Signer signed. Every fault —
// a malformed token, a MAC that does not match (compared in constant time,
// hmac.Equal), claims that do not decode — is the same ENOTFOUND, so a
// guess learns nothing. Expiry is the caller's to check (Claims.Expires).
func (s *Signer) Verify(token string) (Claims, error) {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > maxToken {
		return Claims{}, errNoLink()
	}
	got, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return Claims{}, errNoLink()
	}
	return parseClaims(payload)
}

// parseClaims decodes a token's claims part; ENOTFOUND unless they are a
// link's (a call, a nonce, approve or deny).
func parseClaims(payload string) (Claims, error) {
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return Claims{}, errNoLink()
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil || c.CallID == "" || c.Nonce == "" || (c.Decision != "approve" && c.Decision != "deny") {
		return Claims{}, errNoLink()
	}
	return c, nil
}

func errNoLink() error { return agentd.Errorf(agentd.ENOTFOUND, "no such decision link") }

// ExpiresAt is the claims' expiry as a time.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0).UTC() }
