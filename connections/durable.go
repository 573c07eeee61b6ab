package connections

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// Durable is the durable/workflow request path, POST
// /v1/connections/{name}/request (SPEC §2.3): the request tool's
// arguments, classified without an approval prompt. A confirm-tier call that
// does not declare intent confirmed_write answers a Preview and sends
// nothing; confirmed_write runs; review and never are refused. The gate
// here is the caller's role and the downstream API's own authorization —
// the docs say so. It serves the connections that expose the request tool.
type Durable struct {
	tool  *RequestTool
	audit AuditLog
	log   zerolog.Logger
	clock agentd.Clock
}

// AuditLog is where the durable path records each request it answers: the
// one write of agentd.AuditLog.
type AuditLog interface {
	AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error)
}

// DurableOption configures NewDurable.
type DurableOption func(*Durable)

// WithAudit records every request the durable path answers in a, as an
// audit entry of kind connection_request (who, connection, method,
// endpoint, outcome), after the answer is known; a failure to record is
// logged on log (the request's own log line stays the record then).
func WithAudit(a AuditLog, log zerolog.Logger) DurableOption {
	return func(d *Durable) { d.audit, d.log = a, log }
}

// NewDurable returns the durable path over conns.
func NewDurable(conns []*Connection, opts ...DurableOption) *Durable {
	d := &Durable{tool: NewRequestTool(conns), clock: agentd.SystemClock{}, log: zerolog.Nop()}
	for _, o := range opts {
		o(d)
	}
	return d
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
	Status    int             `json:"status"`
	Body      json.RawMessage `json:"body"`
	Truncated bool            `json:"truncated"`
	// IdempotencyKey is the Idempotency-Key sent downstream (writes only).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Request previews or performs one request on connection name for caller.
// args are the request tool's arguments (connection included, and it must
// be name). A delegate-role caller gets the policy's
// delegations.escalateConfirm. idempotencyKey, the caller's own key, is
// sent downstream on writes namespaced by the caller's tenant and project
// (see namespacedKey); empty means a fresh one. It returns {"preview":
// Preview} or a Result, and whether it is a preview.
//
// Errors: EFORBIDDEN (a caller whose role is not operator, delegate or
// admin), ENOTFOUND (no such connection on this path, or one whose
// tenant_ids do not list the caller's tenant: the two read the same),
// EINVALID (bad arguments, unsafe endpoint, forbidden header or header
// value), EFORBIDDEN (refused by the policy: review, never, a write
// declared as a read), EUNAVAILABLE (the downstream request failed or
// redirected elsewhere).
func (d *Durable) Request(ctx context.Context, name string, args json.RawMessage, caller agentd.Principal, idempotencyKey string) (any, bool, error) {
	out, preview, dec, err := d.request(ctx, name, args, caller, idempotencyKey)
	if d != nil && d.audit != nil {
		d.record(ctx, name, args, caller, dec, out, preview, err)
	}
	return out, preview, err
}

// record appends the audit entry of one answered request.
func (d *Durable) record(ctx context.Context, name string, args json.RawMessage, caller agentd.Principal,
	dec *confirm.Classification, out any, preview bool, reqErr error) {
	e := agentd.AuditEntry{Kind: agentd.AuditConnectionRequest, TenantID: caller.TenantID, ProjectID: caller.ProjectID,
		KeyID: caller.KeyID, Role: caller.Role, Connection: name, CreatedAt: d.clock.Now()}
	var asked struct {
		Method   string `json:"method"`
		Endpoint string `json:"endpoint"`
	}
	_ = json.Unmarshal(args, &asked)
	e.Method, e.Endpoint = agentd.TruncateUTF8(asked.Method, 16), agentd.TruncateUTF8(asked.Endpoint, 2048)
	if dec != nil {
		e.Tier, e.ArgumentsSHA256 = dec.Tier, dec.Digest
		if dec.Connection != "" && !dec.Invalid {
			e.Method, e.Endpoint = dec.Method, dec.Endpoint
		}
	}
	switch r, _ := out.(Result); {
	case reqErr != nil:
		e.Outcome, e.Reason = agentd.ErrorCode(reqErr), agentd.ErrorMessage(reqErr)
	case preview:
		e.Outcome = "preview"
	default:
		e.Outcome, e.Reason = "performed", fmt.Sprintf("downstream status %d", r.Status)
	}
	if _, err := d.audit.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		d.log.Error().Err(err).Str("connection", name).Str("key_id", caller.KeyID).Str("outcome", e.Outcome).
			Msg("durable connection request not recorded in the audit log")
	}
}

// request is Request without the audit entry; dec is the classification
// when the request got that far.
func (d *Durable) request(ctx context.Context, name string, args json.RawMessage, caller agentd.Principal, idempotencyKey string) (any, bool, *confirm.Classification, error) {
	switch caller.Role {
	case agentd.RoleOperator, agentd.RoleDelegate, agentd.RoleAdmin:
	default:
		return nil, false, nil, agentd.Errorf(agentd.EFORBIDDEN, "the durable request path needs an operator or delegate key")
	}
	var conn *Connection
	if d != nil && d.tool != nil {
		conn = d.tool.conns[name]
	}
	if conn == nil || !conn.Confirm().AllowsTenant(caller.TenantID) {
		return nil, false, nil, agentd.Errorf(agentd.ENOTFOUND, "connection %q not found", name)
	}
	dec := confirm.Classify(confirm.Call{Name: confirm.RequestToolName, Arguments: args, Tool: d.tool.Confirm(),
		Delegated: caller.Role == agentd.RoleDelegate, TenantID: caller.TenantID, Mode: confirm.ModeDurable})
	switch {
	case dec.Connection != "" && dec.Connection != name:
		return nil, false, &dec, agentd.Errorf(agentd.EINVALID, "the arguments name connection %q, not %q", dec.Connection, name)
	case dec.Invalid:
		return nil, false, &dec, agentd.Errorf(agentd.EINVALID, "%s", dec.Why)
	case dec.Refused:
		return nil, false, &dec, agentd.Errorf(agentd.EFORBIDDEN, "refused (tier %s): %s", dec.Tier, dec.Why)
	case dec.Preview:
		return previewOf(&dec), true, &dec, nil
	}
	r, err := send(ctx, conn, dec.Target, caller, idempotencyKey)
	return r, false, &dec, err
}

// send performs the cleared request tg on conn, the durable path's and the
// context endpoint's alike: a write carries an Idempotency-Key, the
// caller's own namespaced (namespacedKey) or a fresh one. A failed request
// is EUNAVAILABLE.
func send(ctx context.Context, conn *Connection, tg *confirm.Target, caller agentd.Principal, idempotencyKey string) (any, error) {
	key := ""
	if tg.Write() {
		key = uuid.NewString()
		if idempotencyKey != "" {
			key = namespacedKey(caller, idempotencyKey)
		}
	}
	resp, err := conn.Do(ctx, tg, key)
	if err != nil {
		var re *RedirectError
		if errors.As(err, &re) {
			return nil, agentd.Errorf(agentd.EUNAVAILABLE, "%v", err)
		}
		return nil, agentd.Errorf(agentd.EUNAVAILABLE, "the request to connection %q failed: %v", tg.Connection, err)
	}
	r := Result{Status: resp.Status, Truncated: resp.Truncated, IdempotencyKey: key}
	r.Body = shapeBody(resp, conn.maxResponse)
	return r, nil
}

// previewOf is the answer of a confirm-tier write in the durable context
// that did not declare intent confirmed_write: {"preview": Preview}, on
// the durable path and through a durable tool's context endpoint alike.
func previewOf(dec *confirm.Classification) map[string]Preview {
	return map[string]Preview{"preview": {
		Connection: dec.Connection, Method: dec.Method, Endpoint: dec.Endpoint, PathTemplate: dec.PathTemplate,
		Arguments: dec.Params, ArgumentsSHA256: dec.Digest, Tier: dec.Tier, Reason: dec.Reason,
		Instruction: `Nothing was sent. This write needs confirmation: call again with "intent": "confirmed_write" to perform it.`,
	}}
}

// namespacedKey is the Idempotency-Key sent downstream for a durable-path
// caller's own key: the lowercase hex SHA-256 of the caller's tenant id,
// project id and key, each preceded by its length as 8 bytes big-endian,
// after a version label. So two tenants (or two projects) using the same
// key never share a downstream result, no spelling of the ids can make two
// callers collide ("a:b"+"c" is not "a"+"b:c"), the same caller always gets
// the same key, and the header is 64 characters whatever the ids' length.
func namespacedKey(caller agentd.Principal, key string) string {
	h := sha256.New()
	for _, part := range []string{"agentd durable idempotency v1", caller.TenantID, caller.ProjectID, key} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}
