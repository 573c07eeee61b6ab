package connections

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/google/uuid"
)

// Durable is the durable/workflow request path, POST
// /v1/connections/{name}/request (SPEC §2.3): the request tool's
// arguments, decided without an approval prompt. A confirm-tier call that
// does not declare intent confirmed_write answers a Preview and sends
// nothing; confirmed_write runs; review and never are refused. The gate
// here is the caller's role and the downstream API's own authorization —
// the docs say so. It serves the connections that expose the request tool.
type Durable struct {
	tool *RequestTool
}

// NewDurable returns the durable path over conns.
func NewDurable(conns []*Connection) *Durable {
	return &Durable{tool: NewRequestTool(conns)}
}

// Preview is what a confirm-tier write answers on the durable path.
type Preview struct {
	Connection      string          `json:"connection"`
	Method          string          `json:"method"`
	Endpoint        string          `json:"endpoint"`
	PathTemplate    string          `json:"path_template,omitempty"`
	Arguments       json.RawMessage `json:"arguments"` // grouped: {path, query, header, body}
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	Tier            agentd.Tier     `json:"tier"`
	Reason          string          `json:"reason"`
	Instruction     string          `json:"instruction"`
}

// Result is a performed durable request.
type Result struct {
	Status         int             `json:"status"`
	Body           json.RawMessage `json:"body"`
	Truncated      bool            `json:"truncated"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// Request previews or performs one request on connection name. args are
// the request tool's arguments (connection included). delegated applies
// the policy's delegations.escalateConfirm. idempotencyKey is sent
// downstream on writes; empty means a fresh one. It returns {"preview":
// Preview} or a Result.
//
// Errors: ENOTFOUND (no such connection on this path), EINVALID (bad
// arguments, unsafe endpoint, forbidden header), EFORBIDDEN (refused by the
// policy: review, never, a write declared as a read), EUNAVAILABLE (the
// downstream request failed or redirected elsewhere).
func (d *Durable) Request(ctx context.Context, name string, args json.RawMessage, delegated bool, idempotencyKey string) (any, bool, error) {
	if d == nil || d.tool == nil || d.tool.conns[name] == nil {
		return nil, false, agentd.Errorf(agentd.ENOTFOUND, "connection %q not found", name)
	}
	dec := confirm.Decide(confirm.Call{Name: confirm.RequestToolName, Arguments: args, Tool: d.tool.Decision(),
		Delegated: delegated, Mode: confirm.ModeDurable})
	why := strings.TrimPrefix(dec.Reason, "The call was not performed: ")
	switch {
	case dec.Invalid:
		return nil, false, agentd.Errorf(agentd.EINVALID, "%s", why)
	case dec.Refused:
		return nil, false, agentd.Errorf(agentd.EFORBIDDEN, "refused (tier %s): %s", dec.Tier, why)
	case dec.Preview:
		return map[string]Preview{"preview": {
			Connection: dec.Connection, Method: dec.Method, Endpoint: dec.Endpoint, PathTemplate: dec.PathTemplate,
			Arguments: dec.Params, ArgumentsSHA256: dec.Digest, Tier: dec.Tier, Reason: dec.Reason,
			Instruction: `Nothing was sent. This write needs confirmation: call again with "intent": "confirmed_write" to perform it.`,
		}}, true, nil
	}
	tg := dec.Target
	key := ""
	if tg.Write() {
		key = idempotencyKey
		if key == "" {
			key = uuid.NewString()
		}
	}
	resp, err := d.tool.conns[tg.Connection].Do(ctx, tg, key)
	if err != nil {
		var re *RedirectError
		if errors.As(err, &re) {
			return nil, false, agentd.Errorf(agentd.EUNAVAILABLE, "%v", err)
		}
		return nil, false, agentd.Errorf(agentd.EUNAVAILABLE, "the request to connection %q failed: %v", tg.Connection, err)
	}
	r := Result{Status: resp.Status, Truncated: resp.Truncated, IdempotencyKey: key}
	r.Body = shapeBody(resp, d.tool.conns[tg.Connection].maxResponse)
	return r, false, nil
}
