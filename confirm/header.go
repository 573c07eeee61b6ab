package confirm

import (
	"fmt"
	"strings"
)

// The header rule (SPEC §3, docs/connections.md "Outbound safety"). A
// header name is compared in lower case, whole and word by word (words are
// separated by '-', '_' and '.'): X-Forwarded-For has the words x,
// forwarded and for. A word pattern "*w*" matches a word containing w,
// "w*" one starting with w, "*w" one ending with w, and "w" the word w.
// The first family whose names or word patterns match decides.
var headerFamilies = []struct {
	kind  headerKind
	names []string // whole names
	words []string // word patterns
}{
	{headerTransport, []string{"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
		"content-length", "content-type", "content-encoding", "accept-encoding", "expect", "http2-settings",
		"idempotency-key"}, nil},
	{headerCredential, nil, []string{"*auth*", "*token*", "*secret*", "*passw*", "*cookie*", "*session*",
		"*credential*", "*csrf*", "*xsrf*", "*signature*", "*apikey*", "*key"}},
	{headerRoute, nil, []string{"*forward*", "*proxy*", "*origin*", "*remote*", "*override*", "*rewrite*",
		"*host", "via", "real*", "ip", "addr*", "method", "range"}},
	{headerIdentity, nil, []string{"client*", "user*", "tenant*", "account*", "org", "organization*",
		"principal*", "role*", "sudo", "behalf", "*impersonat*"}},
}

// headerKind is the family of a header name the rule refuses.
type headerKind int

const (
	headerOrdinary   headerKind = iota
	headerTransport             // hop-by-hop, framing, or set by the client and runtime
	headerCredential            // carries a credential
	headerRoute                 // changes the client address, host, method, path or range the server sees
	headerIdentity              // says who is calling
)

// why is the refusal's explanation.
func (k headerKind) why() string {
	switch k {
	case headerTransport:
		return "it is a hop-by-hop or framing header, or one the HTTP client and the runtime set themselves"
	case headerCredential:
		return "it carries credentials"
	case headerRoute:
		return "it would change the client address, host, method, path or range the server sees (route)"
	case headerIdentity:
		return "it says who is calling"
	}
	return ""
}

// classifyHeader returns the family of a valid header name.
func classifyHeader(name string) headerKind {
	lower := strings.ToLower(name)
	words := strings.FieldsFunc(lower, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	for _, f := range headerFamilies {
		for _, n := range f.names {
			if lower == n {
				return f.kind
			}
		}
		for _, w := range words {
			for _, p := range f.words {
				if matchWord(p, w) {
					return f.kind
				}
			}
		}
	}
	return headerOrdinary
}

// matchWord matches one word against a pattern of the header rule.
func matchWord(pattern, word string) bool {
	pre, suf := strings.HasPrefix(pattern, "*"), strings.HasSuffix(pattern, "*")
	core := strings.Trim(pattern, "*")
	switch {
	case pre && suf:
		return strings.Contains(word, core)
	case pre:
		return strings.HasSuffix(word, core)
	case suf:
		return strings.HasPrefix(word, core)
	}
	return word == core
}

// ValidHeaderName reports whether name is a valid header field name: an
// RFC 9110 token.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0) {
			return false
		}
	}
	return true
}

// CheckHeader refuses a header name a model or a durable-path caller may
// not set: a name that is not a valid token, or one of the header rule's
// families — hop-by-hop, framing and client-set headers (Idempotency-Key
// included), credentials, headers that change the client address, host,
// method, path or range the server sees, and headers that say who is
// calling. The error says which.
func CheckHeader(name string) error {
	if !ValidHeaderName(name) {
		return fmt.Errorf("header name %q is not a valid header name", name)
	}
	if k := classifyHeader(name); k != headerOrdinary {
		return fmt.Errorf("header %q cannot be set by the model: %s", name, k.why())
	}
	return nil
}

// CheckStaticHeader refuses a name that connection.json's headers may not
// set: CheckHeader's families except headers that say who is calling,
// which are the connection's to set.
func CheckStaticHeader(name string) error {
	if !ValidHeaderName(name) {
		return fmt.Errorf("%q is not a valid header name, so it cannot be a static header", name)
	}
	switch k := classifyHeader(name); k {
	case headerOrdinary, headerIdentity:
		return nil
	case headerCredential:
		return fmt.Errorf("header %q cannot be a static header: credentials belong in \"auth\"", name)
	default:
		return fmt.Errorf("header %q cannot be a static header: %s", name, k.why())
	}
}

// CheckAuthHeader refuses a name that cannot carry a connection's
// credential (auth type "header"): a name that is not a valid token, a
// hop-by-hop, framing, client-set or route header (see CheckHeader), a
// cookie or User-Agent.
func CheckAuthHeader(name string) error {
	if !ValidHeaderName(name) {
		return fmt.Errorf("%q is not a valid header name", name)
	}
	if l := strings.ToLower(name); l == "cookie" || l == "set-cookie" || l == "user-agent" {
		return fmt.Errorf("header %q cannot carry credentials", name)
	}
	if k := classifyHeader(name); k == headerTransport || k == headerRoute {
		return fmt.Errorf("header %q cannot carry credentials: %s", name, k.why())
	}
	return nil
}

// CheckHeaderValue refuses a header value that cannot be sent as is: one
// with a control character other than a horizontal tab (CR, LF and NUL
// among them), which would end or split the header.
func CheckHeaderValue(name, value string) error {
	for i := 0; i < len(value); i++ {
		if b := value[i]; (b < 0x20 && b != '\t') || b == 0x7f {
			return fmt.Errorf("the value of header %q contains a control character (such as CR, LF or NUL), which cannot be sent", name)
		}
	}
	return nil
}
