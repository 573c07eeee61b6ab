package callcontext

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/rs/zerolog"
)

// A durable tool's call (tool.json "execution": "durable") journals its
// child requests, both routes' (POST …/request and …/tools/{name}): the
// n-th child request of the call is its ordinal n, and it is keyed in the
// store (agentd.ChildJournal) by the call's tenant, the call's id and n,
// with a digest of what it asked. Once the child succeeded (a request the
// downstream API answered, a child tool call that completed) its answer is
// recorded. When the call runs again after a crash (recovery re-runs a
// durable call, SPEC §8), its n-th child request finds the entry: with the
// same digest the journaled answer is returned and nothing is sent; with
// another digest the child fails (ECONFLICT, nothing sent): the tool did
// not make the same requests in the same order, and the journal cannot say
// what the new one would repeat. A child that failed or was refused is not
// journaled and runs again.

// journaled is one child request of a durable call; the zero value (an
// inline call's child) replays and records nothing.
type journaled struct {
	journal  agentd.ChildJournal
	call     agentd.ToolCall
	ordinal  int
	digest   string
	describe string // "request" or `tool "name"`, for errors
}

// childOf takes the next ordinal of g's child requests for one that asks
// kind ("request" or "tool") of name with args. Arguments that have no
// canonical form (not JSON, or a number a double does not hold: the rule
// of agentd.CanonicalJSON, the arguments_sha256 rule) are EINVALID, and
// take no ordinal: nothing is sent, as classification would refuse them.
func (e *Endpoint) childOf(g *grant, kind, name string, args json.RawMessage) (journaled, error) {
	describe, tool := "request", confirm.RequestToolName
	if kind == "tool" {
		describe, tool = fmt.Sprintf("call of tool %q", name), name
	}
	digest, err := childDigest(kind, name, args)
	if err != nil {
		return journaled{}, agentd.Errorf(agentd.EINVALID, "invalid arguments for tool %q: %v", tool, err)
	}
	return journaled{journal: e.journalOf(g), call: g.call, ordinal: int(g.ordinal.Add(1)),
		digest: digest, describe: describe}, nil
}

// childDigest identifies a child request: the lowercase hex SHA-256 of a
// version label, the route, the child tool's name and the arguments'
// canonical form (agentd.CanonicalJSON, RFC 8785; empty is {}), each
// preceded by its length, so the same request written with its keys in
// another order or spaced otherwise has the same digest, and two requests
// with different numbers never do. It fails as agentd.CanonicalJSON does.
func childDigest(kind, name string, args json.RawMessage) (string, error) {
	canon := []byte("{}")
	if trimmed := bytes.TrimSpace(args); len(trimmed) > 0 {
		var err error
		if canon, err = agentd.CanonicalJSON(trimmed); err != nil {
			return "", err
		}
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("agentd child v2"), []byte(kind), []byte(name), canon} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// key is the Idempotency-Key a durable call's write child carries, before
// the durable path namespaces it by tenant and project: the call's id and
// the child's ordinal, the same on every run of the call.
func (c journaled) key() string { return fmt.Sprintf("%s#%d", c.call.ID, c.ordinal) }

// replay returns the journaled answer of c, with done true: the answer
// itself when the digest matches, ECONFLICT when it does not, EUNAVAILABLE
// when the journal cannot be read. done is false when c is not journaled
// (it is to run).
func (c journaled) replay(ctx context.Context) (any, bool, error) {
	if c.journal == nil {
		return nil, false, nil
	}
	got, err := c.journal.JournaledChild(ctx, c.call.TenantID, c.call.ID, c.ordinal)
	switch {
	case agentd.ErrorCode(err) == agentd.ENOTFOUND:
		return nil, false, nil
	case err != nil:
		return nil, true, agentd.Errorf(agentd.EUNAVAILABLE, "the journal of durable tool %q could not be read: %v", c.call.Name, err)
	case got.Digest != c.digest:
		return nil, true, agentd.Errorf(agentd.ECONFLICT,
			"durable tool %q is not deterministic: its child request %d (a %s) differs from the one it made before the restart, which the journal holds; "+
				"nothing was sent. A durable tool must make the same child requests in the same order when its call runs again",
			c.call.Name, c.ordinal, c.describe)
	}
	return json.RawMessage(got.Result), true, nil
}

// record journals out, the answer of c that succeeded. A failure to record
// is logged: the answer stands, and a re-run would send the child again
// (a write with the same Idempotency-Key).
func (c journaled) record(ctx context.Context, log zerolog.Logger, out any) {
	if c.journal == nil {
		return
	}
	result, err := json.Marshal(out)
	if err == nil {
		err = c.journal.JournalChild(context.WithoutCancel(ctx), agentd.JournalEntry{TenantID: c.call.TenantID,
			ToolCallID: c.call.ID, Ordinal: c.ordinal, Digest: c.digest, Result: result, CreatedAt: time.Now()})
	}
	if err != nil {
		log.Error().Err(err).Str("tool", c.call.Name).Str("tool_call_id", c.call.ID).Int("ordinal", c.ordinal).
			Msg("durable tool's child request not journaled")
	}
}
