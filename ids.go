package agentd

import (
	"strings"

	"github.com/google/uuid"
)

// ID prefixes of server-assigned identifiers.
const (
	PrefixConversation = "conv"
	PrefixRun          = "run"
	PrefixMessage      = "msg"
	PrefixToolCall     = "call"
	PrefixDecision     = "dec"
	PrefixInput        = "inp"
)

// NewID returns a new identifier "<prefix>_<uuid v7>": unique and roughly
// time-ordered.
func NewID(prefix string) string { return prefix + "_" + newUUID() }

// NewCorrelationID returns a new run's correlation_id: a bare uuid v7,
// without a prefix, unique and roughly time-ordered.
func NewCorrelationID() string { return newUUID() }

// newUUID is a uuid v7 (a random one if the clock fails it).
func newUUID() string {
	u, err := uuid.NewV7()
	if err != nil {
		u = uuid.New()
	}
	return u.String()
}

// CheckID returns EINVALID unless s is an identifier NewID(prefix) could
// have made. what names the identifier in the message ("tool call id").
func CheckID(prefix, what, s string) error {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != 36 {
		return Errorf(EINVALID, "invalid %s %q", what, truncate(s, 80))
	}
	if _, err := uuid.Parse(rest); err != nil {
		return Errorf(EINVALID, "invalid %s %q", what, truncate(s, 80))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return TruncateUTF8(s, n) + "…"
}
