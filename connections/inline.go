package connections

import (
	"context"
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// InlineOptions are what the calling tool allows an inline request.
type InlineOptions struct {
	// Writes is the tool's confirm: true or "review" let writes run
	// without a prompt; false lets only reads run.
	Writes bool
	// Durable is the tool's execution "durable": the request is in the
	// durable execution context (SPEC §2.3), so a confirm-tier write that
	// does not declare intent confirmed_write answers a Preview and sends
	// nothing, as on the durable path.
	Durable bool
	// Delegated is the calling tool call's agentd.ToolCall.Delegated: the
	// request is classified as a delegated conversation's call is, so
	// delegations.escalateConfirm turns a confirm-tier write into review,
	// refused here as everywhere.
	Delegated bool
	// IdempotencyKey, when set, is sent downstream on a write namespaced
	// by the caller's tenant and project, as the durable path sends a
	// caller's own key; empty means a fresh one.
	IdempotencyKey string
}

// Inline performs one request a command tool makes through its per-call
// context endpoint, POST $AGENTD_CONTEXT_URL/request (SPEC §4.1): args are
// the request tool's arguments, caller is the call's tenant and project
// (KeyID names the call, for the audit log), and o says what the tool
// allows (InlineOptions). Nothing parks here: a confirm-tier write of a
// tool allowed to write is sent (a durable tool's gets a preview unless it
// declares confirmed_write), review and never are refused like everywhere
// else. It returns a Result, or {"preview": Preview} and true.
//
// Errors: ENOTFOUND (no such connection, or one whose tenant_ids do not
// list the caller's tenant), EINVALID (bad arguments), EWRITENOTALLOWED (a
// write by a tool whose confirm is false), EFORBIDDEN (refused by the
// policy: review, never, a write declared as a read), EUNAVAILABLE (the
// downstream request failed). Every answer is in the audit log as a
// connection_request.
func (d *Durable) Inline(ctx context.Context, args json.RawMessage, caller agentd.Principal, o InlineOptions) (any, bool, error) {
	var named struct {
		Connection string `json:"connection"`
	}
	_ = json.Unmarshal(args, &named)
	out, preview, dec, err := d.inline(ctx, named.Connection, args, caller, o)
	if d != nil && d.audit != nil {
		d.record(ctx, named.Connection, args, caller, dec, out, preview, err)
	}
	return out, preview, err
}

func (d *Durable) inline(ctx context.Context, name string, args json.RawMessage, caller agentd.Principal, o InlineOptions) (any, bool, *confirm.Classification, error) {
	var conn *Connection
	if d != nil && d.tool != nil {
		conn = d.tool.conns[name]
	}
	if conn == nil || !conn.Confirm().AllowsTenant(caller.TenantID) {
		return nil, false, nil, agentd.Errorf(agentd.ENOTFOUND, "connection %q not found", name)
	}
	dec := confirm.Classify(confirm.Call{Name: confirm.RequestToolName, Arguments: args, Tool: d.tool.Confirm(),
		Delegated: o.Delegated, TenantID: caller.TenantID, Mode: confirm.ModeDurable})
	switch {
	case dec.Invalid:
		return nil, false, &dec, agentd.Errorf(agentd.EINVALID, "%s", dec.Why)
	case dec.Refused:
		return nil, false, &dec, agentd.Errorf(agentd.EFORBIDDEN, "refused (tier %s): %s", dec.Tier, dec.Why)
	}
	tg := dec.Target
	if tg.Intent != confirm.IntentRead && !o.Writes {
		return nil, false, &dec, agentd.Errorf(agentd.EWRITENOTALLOWED,
			`%s %s on connection %q is a write, and this tool's confirm is false: only reads run (set "confirm": true in its tool.json to let it write)`,
			tg.Method, tg.Path, tg.Connection)
	}
	if dec.Preview && o.Durable {
		return previewOf(&dec), true, &dec, nil
	}
	r, err := send(ctx, conn, tg, caller, o.IdempotencyKey)
	return r, false, &dec, err
}
