package agentd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// OmittedValue stands for a value of a call left out because it is larger
// than LargeValueBytes: its size in bytes and its digest. For arguments
// the digest is the call's arguments_sha256; for params the same kind of
// digest (the hex SHA-256 of the RFC 8785 canonical JSON); for the diff
// the hex SHA-256 of its text.
type OmittedValue struct {
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Omitted names the values a summary left out, by field: "arguments",
// "params", "diff", "decisions[i].edited_arguments". Nil when nothing was.
type Omitted map[string]OmittedValue

// Summarized returns c with each of its arguments, params, diff and
// decisions' edited arguments that is larger than LargeValueBytes left out
// (arguments, params and edited arguments null, diff empty), and what was
// left out. Everything else of c is as it was; c's own slices are not
// changed.
func (c ToolCall) Summarized() (ToolCall, Omitted) {
	var om Omitted
	add := func(field string, v OmittedValue) {
		if om == nil {
			om = Omitted{}
		}
		om[field] = v
	}
	if len(c.Arguments) > LargeValueBytes {
		add("arguments", OmittedValue{Bytes: len(c.Arguments), SHA256: c.ArgumentsSHA256})
		c.Arguments = nil
	}
	if len(c.Params) > LargeValueBytes {
		if d, err := DigestJSON(c.Params); err == nil {
			add("params", OmittedValue{Bytes: len(c.Params), SHA256: d})
			c.Params = nil
		}
	}
	if len(c.Diff) > LargeValueBytes {
		add("diff", OmittedValue{Bytes: len(c.Diff), SHA256: TextSHA256(c.Diff)})
		c.Diff = ""
	}
	copied := false
	for i, d := range c.Decisions {
		if len(d.EditedArguments) <= LargeValueBytes {
			continue
		}
		if !copied { // c's slice is the caller's too
			c.Decisions, copied = append([]Decision(nil), c.Decisions...), true
		}
		add(fmt.Sprintf("decisions[%d].edited_arguments", i), OmittedValue{Bytes: len(d.EditedArguments), SHA256: d.EditedArgumentsSHA256})
		c.Decisions[i].EditedArguments = nil
	}
	return c, om
}

// TextSHA256 is the hex SHA-256 of s's bytes.
func TextSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
