package server

import (
	"context"
	"encoding/json"
	"net"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/tools/callcontext"
)

// The command tools' per-call context endpoint (docs/runtime.md) is served
// by the API on the server's own listener: AGENTD_CONTEXT_URL is that
// listener's address as a loopback URL when it listens on every address.

// contextURL is AGENTD_CONTEXT_URL for a server listening on addr.
func contextURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/v1/context"
}

// inlineRequests is the connections' request path of the context
// endpoint.
type inlineRequests struct{ d *connections.Durable }

func (r inlineRequests) Inline(ctx context.Context, args json.RawMessage, caller agentd.Principal, o callcontext.RequestOptions) (any, bool, error) {
	return r.d.Inline(ctx, args, caller, connections.InlineOptions{Writes: o.Writes, Durable: o.Durable, Delegated: o.Delegated, IdempotencyKey: o.IdempotencyKey})
}

// wireContext hands the context endpoint the registry (a composite's
// children), the connections (nil: none) and the store's journal of
// durable tools' children.
func wireContext(ep *callcontext.Endpoint, lp *servedProject, durable *connections.Durable, journal agentd.ChildJournal) {
	var requests callcontext.Requests
	if durable != nil {
		requests = inlineRequests{durable}
	}
	ep.Wire(lp.tools.Registry(), requests)
	ep.WireJournal(journal)
}
