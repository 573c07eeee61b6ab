package agentd

import "time"

// The defaults of SPEC §1.1 and §5, in one place: project loading, the API
// and the loop all read these.
const (
	// DefaultApprovalTimeout is how long a parked call waits for a decision
	// when neither the agent, the tool nor the endpoint says otherwise.
	DefaultApprovalTimeout = 15 * time.Minute
	// DefaultLinkTTL is how long a decision link is valid when its request
	// names no ttl (SPEC §11.4); it never outlives the call's deadline.
	DefaultLinkTTL = time.Hour
	// MaxLinkTTL bounds a decision link's ttl; a longer one is EINVALID.
	MaxLinkTTL = 7 * 24 * time.Hour
	// DefaultGrantTTL is a remembered grant's life when its approval names
	// no ttl; DefaultGrantMaxTTL the longest an approval rule allows
	// (SPEC §11.2).
	DefaultGrantTTL    = 8 * time.Hour
	DefaultGrantMaxTTL = 24 * time.Hour
	// MaxReasonBytes bounds the reason of a decision or an extension; a
	// longer one is EINVALID.
	MaxReasonBytes = 4096
	// DefaultMaxTurns is the most model steps one run may take.
	DefaultMaxTurns = 20
	// DefaultMaxBodyBytes bounds a request body; larger ones get 413.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxStreamsPerKey bounds the streams one API key holds open at
	// once (the event stream, the chat protocols' responses): each costs
	// about 41 KiB and a file descriptor. One more is 429.
	DefaultMaxStreamsPerKey = 256
	// DefaultMaxPageBytes bounds the JSON of one GET /v1/approvals page:
	// the page ends early (its next_cursor goes on from there) rather
	// than grow past it. A page always holds at least one call.
	DefaultMaxPageBytes = 512 << 10
	// LargeValueBytes is the size above which a call's arguments, params
	// or diff are left out where they would be copied — a list page, an
	// event, a webhook body — and stand there as an OmittedValue; the
	// whole call is GET /v1/tool-calls/{id}.
	LargeValueBytes = 64 << 10
	// MaxToolResultBytes bounds the result of a command tool (what it
	// prints on stdout) and of a Go tool (its JSON): a larger one fails
	// the call, saying so.
	MaxToolResultBytes = 1 << 20
	// DefaultMCPCallTimeout bounds one MCP tool call when mcp.json's
	// timeout_ms does not say otherwise.
	DefaultMCPCallTimeout = 60 * time.Second
	// DefaultMCPResultBytes bounds the text of one MCP tool result the
	// model reads; a longer one is cut, and says so.
	DefaultMCPResultBytes = 64 << 10
	// DefaultMCPPingTimeout bounds the ping that checks an MCP server's
	// session after one of its calls failed; a failed ping ends the
	// session and agentd connects again with backoff (docs/mcp.md).
	DefaultMCPPingTimeout = 5 * time.Second
	// DefaultMCPKeepAlive is how often agentd pings a streamable HTTP MCP
	// server (the SDK's keepalive, each ping bounded by half of it), so
	// that one which went away while idle is noticed; a failed ping ends
	// the session as above.
	DefaultMCPKeepAlive = 30 * time.Second
	// DefaultTenantID and DefaultProjectID are the tenant and project of a
	// server without API keys (dev mode), and whom a scheduled tool acts
	// for when its tool.json names none.
	DefaultTenantID  = "default"
	DefaultProjectID = "default"
	// DefaultRunLease is how long a replica's lease of a run lasts on a
	// store shared by replicas (PostgreSQL; docs/scale-out.md): renewed
	// every third of it while the replica drives the run, so another
	// replica takes over a dead one's runs about this long after it died.
	DefaultRunLease = 15 * time.Second
)
