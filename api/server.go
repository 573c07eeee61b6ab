// Package api is agentd's HTTP API (SPEC §5) on echo v4: authentication,
// body limits, strict JSON decoding, the one error-code → status table, and
// thin handlers that make one call into the loop. Every route is in
// routes.go.
package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
	"github.com/agentd-dev/agentd/sse"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Config configures the API.
type Config struct {
	// Keys are the accepted API keys. With none, the server is in dev mode:
	// every request is the single tenant default/default (package server
	// binds loopback only then).
	Keys []agentd.APIKey
	// MaxBodyBytes bounds request bodies (default 1 MiB); larger get 413.
	MaxBodyBytes int64
	// MaxStreamsPerKey bounds the streams one API key holds open at once
	// (default agentd.DefaultMaxStreamsPerKey); one more is 429.
	MaxStreamsPerKey int
	// MaxPageBytes bounds a GET /v1/approvals page's JSON (default
	// agentd.DefaultMaxPageBytes).
	MaxPageBytes int
	Logger       zerolog.Logger
	// Heartbeat of SSE streams (default 15s).
	Heartbeat time.Duration
	// Connections serves POST /v1/connections/{name}/request; nil when the
	// project has no connections.
	Connections Connections
	// CORSOrigins are the origins, besides the server's own, whose pages
	// may call the API, normalized as by internal/origin.Normalize
	// (agentd.json cors_origins). Every other Origin gets 403.
	CORSOrigins []string
	// Registerer, when set, gets the API's own collectors: requests by
	// route template, method and status, their durations, open SSE streams.
	Registerer prometheus.Registerer
	// Metrics serves GET /metrics (unauthenticated, like the probes:
	// docs/metrics.md says why); nil: no such route.
	Metrics http.Handler
	// MCPServers reports the states of the MCP servers whose tools a
	// tenant sees, for /readyz's details (a JSON value); nil when the
	// project has none. A failed server does not make the server unready.
	MCPServers func(tenantID string) any
	// Webhooks serves the delivery log and the endpoints (the /v1/webhooks
	// routes); nil when no webhooks are configured (those routes answer
	// 404 then).
	Webhooks Webhooks
	// Context serves a command tool's per-call context endpoint, POST
	// /v1/context/request and /v1/context/tools/{name}; nil: every token
	// is refused (401).
	Context ContextEndpoint
	// Tools serves direct eval and the invoke trigger, POST
	// /v1/tools/{name}/eval and /run; nil: both answer 404.
	Tools ToolRunner
	// Links mints and answers decision links (SPEC §11.4): POST
	// /v1/tool-calls/{id}/links and the /d/{token} pages; nil: those
	// answer 404.
	Links Links
	// PublicURL is agentd.json public_url, the server's base URL as its
	// users reach it (no trailing slash): the decision links' URLs start
	// with it. Empty: the request's scheme and Host.
	PublicURL string
}

// Links are decision links (SPEC §11.4); links.Service implements it.
type Links interface {
	// Mint returns call id's approve and deny tokens minted by p, valid
	// for ttl ("" for the default): EINVALID (ttl), the rule's 403 codes,
	// ENOTFOUND, ECONFLICT, EEXPIRED.
	Mint(ctx context.Context, p agentd.Principal, id, ttl string) (*agentd.DecisionLinks, error)
	// Open is what a link's page shows; it never decides. ENOTFOUND
	// (tampered, unknown), EGONE (spent, expired), ECONFLICT (decided).
	Open(ctx context.Context, token string) (*agentd.LinkView, error)
	// Use decides once as the minting key (via "link"): Open's errors.
	Use(ctx context.Context, token, reason string) (*agentd.LinkView, *agentd.Decision, error)
}

// ToolRunner runs tools outside the agent loop (SPEC §2.3, §4.1);
// direct.Runner implements it. Both methods audit every call, refused ones
// too, and answer ENOTFOUND for a tool p's tenant does not see and EINVALID
// for arguments its schema refuses.
type ToolRunner interface {
	// Eval runs any tool of the tenant's list, every gate bypassed:
	// EFORBIDDEN unless p is an operator or admin key. The answer is
	// {"status": "completed"|"failed", "result"|"error"}.
	Eval(ctx context.Context, p agentd.Principal, name string, args json.RawMessage) (any, error)
	// Run runs a tool with the invoke trigger in the durable execution
	// context: EFORBIDDEN for a client key, a tool without the trigger, or
	// a tier that refuses (review, never); a confirm-tier call without
	// intent confirmed_write answers {"preview": …} and runs nothing.
	Run(ctx context.Context, p agentd.Principal, name string, args json.RawMessage, intent string) (any, error)
}

// ContextEndpoint is the command tools' per-call context endpoint (SPEC
// §4.1); callcontext.Endpoint implements it. token is the caller's bearer
// token (AGENTD_CONTEXT_TOKEN): EUNAUTHORIZED unless a call it was given
// to runs now.
type ContextEndpoint interface {
	// Request performs one request on a connection (args: the request
	// tool's arguments): EWRITENOTALLOWED for a write of a tool whose
	// confirm is false, EFORBIDDEN when the policy refuses, ENOTFOUND,
	// EINVALID, EUNAVAILABLE as on the durable path.
	Request(ctx context.Context, token string, args json.RawMessage) (any, error)
	// CallTool runs one call of a tool of the composite's uses.tools
	// (EFORBIDDEN for another, or one a composite may not call).
	// The answer is {"status": "completed"|"failed", "result"|"error"}.
	CallTool(ctx context.Context, token, name string, args json.RawMessage) (any, error)
	// Check reports whether token is the token of a call that runs now:
	// nil, or EUNAUTHORIZED. The routes check it before they read the body.
	Check(token string) error
}

// Webhooks is the webhook outbox as operators see it; webhook.Service
// implements it. Every method answers EFORBIDDEN for a role below operator
// and shows only the caller's tenant and project: ENOTFOUND for a delivery
// or endpoint outside them, with the same message as for one that does not
// exist.
type Webhooks interface {
	// Deliveries returns a page of the delivery log, newest first, and the
	// next page's cursor ("" at the end). EINVALID for a bad filter, limit
	// or cursor.
	Deliveries(ctx context.Context, p agentd.Principal, q agentd.WebhookDeliveryQuery) ([]agentd.WebhookDelivery, string, error)
	// Redeliver makes a delivery due now, with the same webhook-id.
	Redeliver(ctx context.Context, p agentd.Principal, id string) (*agentd.WebhookDelivery, error)
	// Endpoints returns the endpoints that receive p's events.
	Endpoints(ctx context.Context, p agentd.Principal) ([]agentd.WebhookEndpoint, error)
	// EnableEndpoint enables an endpoint disabled by a 410 answer.
	EnableEndpoint(ctx context.Context, p agentd.Principal, id string) (*agentd.WebhookEndpoint, error)
	// DisabledEndpoints are the ids of the disabled endpoints that receive
	// events of p's tenant and project (for /readyz).
	DisabledEndpoints(p agentd.Principal) []string
}

// Connections is the durable/workflow request path (SPEC §2.3).
type Connections interface {
	// Request previews or performs one request-tool call on connection
	// name outside the agent loop, for caller (its tenant and project
	// namespace idempotencyKey downstream and must be allowed to use the
	// connection; a delegate role is a delegated caller). args are the
	// request tool's arguments. It returns the answer to encode and
	// whether it is a preview (nothing was sent). Errors: EFORBIDDEN (a
	// role other than operator, delegate, admin), ENOTFOUND
	// (unknown connection, or one the caller's tenant may not use),
	// EINVALID (bad arguments), EFORBIDDEN (refused by the policy),
	// EUNAVAILABLE (the downstream request failed).
	Request(ctx context.Context, name string, args json.RawMessage, caller agentd.Principal, idempotencyKey string) (out any, preview bool, err error)
}

// Engine is the agent loop as the API's handlers use it; loop.Engine
// implements it. Every method that takes a principal answers ENOTFOUND for
// an object the principal does not reach (SPEC §5), with one message per
// kind of object whether or not it exists elsewhere; EINVALID for a
// malformed id or input.
type Engine interface {
	// CreateConversation starts a conversation owned by p's key. EINVALID
	// for an unknown agent or metadata that is not a JSON object of at most
	// 16 KiB of valid UTF-8.
	CreateConversation(ctx context.Context, p agentd.Principal, agent string, metadata json.RawMessage) (*agentd.Conversation, error)
	// Conversation returns one conversation.
	Conversation(ctx context.Context, p agentd.Principal, id string) (*agentd.Conversation, error)
	// ConversationDetail returns one conversation with its history.
	ConversationDetail(ctx context.Context, p agentd.Principal, id string) (*agentd.ConversationDetail, error)
	// Send starts a run with a user message. ERUNACTIVE while one is active.
	Send(ctx context.Context, p agentd.Principal, conversationID, content string) (*agentd.Run, error)
	// Run returns one run.
	Run(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error)
	// Cancel cancels an active run; a cancelled run is returned as is,
	// another finished run is ECONFLICT.
	Cancel(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error)
	// ToolCall returns one call with its decisions.
	ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error)
	// Decide applies a decision to a parked call: EFORBIDDEN for a role
	// that may not decide (or an edit that escalates), ECONFLICT, EEXPIRED,
	// ESTALE as SPEC §5 says.
	Decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error)
	// Extend moves a parked call's deadline later (SPEC §11.3): the
	// rule's 403 codes, EEXTENSIONEXCEEDSMAX, ECONFLICT, EEXPIRED.
	Extend(ctx context.Context, p agentd.Principal, id string, req agentd.ExtendRequest) (*agentd.ToolCall, error)
	// DecideBatch applies bulk decisions, each as Decide would, and returns
	// one result per item in order; with atomic, all or none. The batch's
	// own errors: EFORBIDDEN (a delegate key), EINVALID (no items, more
	// than agentd.MaxBatchDecisions, a call named twice).
	DecideBatch(ctx context.Context, p agentd.Principal, items []agentd.BatchDecisionItem, atomic bool) ([]agentd.BatchDecisionResult, error)
	// DecideAll applies a chat-protocol request's decisions all or
	// nothing, each as Decide would (protocol.Engine).
	DecideAll(ctx context.Context, p agentd.Principal, ds []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error)
	// PendingApprovals returns a page (limit 1..100, 0 = 50) of the parked
	// calls p reaches that match q, and the next cursor ("" at the end).
	PendingApprovals(ctx context.Context, p agentd.Principal, q agentd.PendingQuery) ([]agentd.ToolCall, string, error)
	// Audit returns a page (limit 1..100, 0 = 50) of the audit log of p's
	// tenant and project that matches q, and the next cursor (0 at the
	// end). EFORBIDDEN unless p is an operator or admin key.
	Audit(ctx context.Context, p agentd.Principal, q agentd.AuditQuery) ([]agentd.AuditEntry, int64, error)
	// Grants returns a page (limit 1..100, 0 = 50) of the live grants p
	// may see (SPEC §11.2) after cursor, and the next cursor ("" at the
	// end).
	Grants(ctx context.Context, p agentd.Principal, cursor string, limit int) ([]agentd.Grant, string, error)
	// RevokeGrant revokes a grant: EFORBIDDEN for a key that sees it but
	// did not create it and is no operator or admin; ENOTFOUND for one it
	// does not see.
	RevokeGrant(ctx context.Context, p agentd.Principal, id string) (*agentd.Grant, error)
	// Inputs returns a page (limit 1..100, 0 = 50) of the input requests
	// p reaches that match q (SPEC §12.2), and the next cursor ("" at the
	// end).
	Inputs(ctx context.Context, p agentd.Principal, q agentd.InputQuery) ([]agentd.Input, string, error)
	// Input returns one input request p reaches; ENOTFOUND otherwise.
	Input(ctx context.Context, p agentd.Principal, id string) (*agentd.Input, error)
	// AnswerInput answers an input request once (SPEC §12.3): ENOTFOUND,
	// EANSWERERNOTALLOWED, EINVALID, EINVALIDINPUT (with Error.Fields),
	// ECONFLICT, EEXPIRED.
	AnswerInput(ctx context.Context, p agentd.Principal, id string, a agentd.InputAnswer) (*agentd.Input, error)
	// ToolSpecs are the tools the agent's model sees in the tenant's
	// conversations.
	ToolSpecs(tenantID string) []agentd.ToolSpec
	// ToolTier is a tool's base tier and server id ("per_call" for the
	// request tool).
	ToolTier(name string) (agentd.Tier, string)
}

// StoreReads is what the API reads of the store itself rather than through its
// Engine, each read after the engine has answered that the principal
// reaches the conversation: the event log its streams replay, the
// chat-protocol endpoints' reads (threads, runs, calls, messages) and
// readiness. The store backends satisfy it.
type StoreReads interface {
	sse.EventSource
	protocol.StoreReads
	agentd.Health
}

// Server serves the API.
type Server struct {
	engine Engine
	// protocols serves the chat-protocol endpoints over the same engine.
	protocols *protocol.Service
	hub       *sse.Hub
	store     StoreReads
	cfg       Config
	keys      map[string]agentd.APIKey // by SHA-256
	echo      *echo.Echo
	log       zerolog.Logger
	m         *httpMetrics
	// streams counts each key's open streams (MaxStreamsPerKey).
	streams *streamSlots
	// streamer serves every stream (GET …/events).
	streamer *sse.Streamer
}

// New returns the API server for one service, the hub its streams follow
// live and the store reads it makes itself.
func New(engine Engine, hub *sse.Hub, store StoreReads, cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = agentd.DefaultMaxBodyBytes
	}
	if cfg.MaxPageBytes <= 0 {
		cfg.MaxPageBytes = agentd.DefaultMaxPageBytes
	}
	if cfg.MaxStreamsPerKey <= 0 {
		cfg.MaxStreamsPerKey = agentd.DefaultMaxStreamsPerKey
	}
	s := &Server{engine: engine, hub: hub, store: store, cfg: cfg, keys: map[string]agentd.APIKey{}, log: cfg.Logger,
		m: newHTTPMetrics(cfg.Registerer), streams: newStreamSlots(cfg.MaxStreamsPerKey),
		protocols: protocol.New(engine, store, hub, protocol.Options{Heartbeat: cfg.Heartbeat}),
		streamer:  sse.NewStreamer(hub, store, sse.Options{Heartbeat: cfg.Heartbeat})}
	for _, k := range cfg.Keys {
		s.keys[strings.ToLower(k.SHA256)] = k
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	s.echo = e
	s.routes()
	for _, r := range e.Routes() {
		s.m.routes[r.Path] = true
	}
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// DevMode reports whether no API keys are configured.
func (s *Server) DevMode() bool { return len(s.keys) == 0 }

const principalKey = "agentd.principal"

func principal(c echo.Context) agentd.Principal {
	p, _ := c.Get(principalKey).(agentd.Principal)
	return p
}

// authenticate resolves the caller from "Authorization: Bearer <key>" (or,
// on SSE routes, ?access_token=). In dev mode every caller is default/default.
func (s *Server) authenticate(allowQueryToken bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// The work is in callerOf, so that this frame, which stays on
			// the stack of every open stream, is small (docs/performance.md
			// §24).
			if err := s.callerOf(c, allowQueryToken); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// callerOf sets c's principal, or returns the 401 of a request without a
// valid API key.
func (s *Server) callerOf(c echo.Context, allowQueryToken bool) error {
	if s.DevMode() {
		c.Set(principalKey, agentd.DevPrincipal)
		return nil
	}
	token := ""
	if h := c.Request().Header.Get("Authorization"); h != "" {
		var ok bool
		if token, ok = bearerToken(h); !ok {
			return s.unauthorized(c, "Authorization must be \"Bearer <api key>\"")
		}
	} else if allowQueryToken {
		token = c.QueryParam("access_token")
	}
	if token == "" {
		return s.unauthorized(c, "missing API key")
	}
	p, ok := s.keyPrincipal(token)
	if !ok {
		return s.unauthorized(c, "invalid API key")
	}
	c.Set(principalKey, p)
	return nil
}

// bearerToken is the token of an Authorization header value "Bearer
// <token>" (the scheme in any case, the token trimmed); false for any other
// value.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// keyPrincipal returns the principal of the API key token, if it is one.
func (s *Server) keyPrincipal(token string) (agentd.Principal, bool) {
	if len(token) > 512 {
		return agentd.Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	k, ok := s.keys[hex.EncodeToString(sum[:])]
	if !ok {
		return agentd.Principal{}, false
	}
	return k.Principal(), true
}

// probeReader returns the principal whose details the probes may show: the
// dev principal in dev mode, else the operator or admin key of the
// request's bearer token; false for anyone else (the probe answers, but
// without details).
func (s *Server) probeReader(c echo.Context) (agentd.Principal, bool) {
	if s.DevMode() {
		return agentd.DevPrincipal, true
	}
	token, ok := bearerToken(c.Request().Header.Get("Authorization"))
	if !ok {
		return agentd.Principal{}, false
	}
	p, ok := s.keyPrincipal(token)
	return p, ok && (p.Role == agentd.RoleOperator || p.Role == agentd.RoleAdmin)
}

func (s *Server) unauthorized(c echo.Context, msg string) error {
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="agentd"`)
	return agentd.Errorf(agentd.EUNAUTHORIZED, "%s", msg)
}

// Draining an oversized body: how much more than the limit is read and
// discarded, and for how long, so that the 413 reaches a client that sends
// its whole body before reading the answer (closing on unread data resets
// the connection, and such a client sees ECONNRESET or EPIPE instead).
const (
	drainBytes   = 16 << 20
	drainTimeout = 10 * time.Second
)

// limitBody rejects bodies over MaxBodyBytes with 413, before reading (by
// Content-Length) and while reading (chunked bodies), and then reads and
// discards the rest of the body, up to drainBytes, before the 413 is sent.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		body := c.Request().Body
		if err := s.boundBody(c); err != nil {
			return err
		}
		err := next(c)
		if agentd.ErrorCode(err) == agentd.ETOOLARGE {
			s.drainLarge(c, body)
		}
		return err
	}
}

// boundBody refuses a request whose Content-Length is over the limit and
// bounds the reading of any other.
func (s *Server) boundBody(c echo.Context) error {
	r := c.Request()
	if r.ContentLength > s.cfg.MaxBodyBytes {
		if r.ContentLength <= s.cfg.MaxBodyBytes+drainBytes {
			drain(c, r.Body)
		}
		c.Response().Header().Set("Connection", "close")
		return agentd.Errorf(agentd.ETOOLARGE, "request body is larger than %d bytes", s.cfg.MaxBodyBytes)
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, s.cfg.MaxBodyBytes)
	return nil
}

// drainLarge drains body after a handler's 413, if nothing was written yet.
func (s *Server) drainLarge(c echo.Context, body io.Reader) {
	if !c.Response().Committed {
		drain(c, body)
		c.Response().Header().Set("Connection", "close")
	}
}

// drain reads and discards up to drainBytes of body within drainTimeout.
// A client that asked "Expect: 100-continue" has sent nothing yet: it gets
// the 413 without being invited to upload the body first.
func drain(c echo.Context, body io.Reader) {
	if strings.EqualFold(c.Request().Header.Get("Expect"), "100-continue") {
		return
	}
	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.CopyN(io.Discard, body, drainBytes)
	_ = rc.SetReadDeadline(time.Time{})
}

// logRequests writes one structured line per request. The query string is
// never logged (it may carry access_token), nor a decision link's token
// (loggedPath).
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		s.logRequest(c, start, err)
		return nil
	}
}

// logRequest answers err, if any, then logs and counts the request. It is
// not part of logRequests' closure, whose frame stays on the stack of every
// open stream.
func (s *Server) logRequest(c echo.Context, start time.Time, err error) {
	if err != nil {
		c.Error(err)
	}
	ev := s.log.Info()
	if c.Response().Status >= 500 {
		ev = s.log.Error()
	}
	p := principal(c)
	took := time.Since(start)
	ev.Str("method", c.Request().Method).Str("path", loggedPath(c.Request())).Int("status", c.Response().Status).
		Dur("duration", took).Str("tenant_id", p.TenantID).Str("key_id", p.KeyID).Msg("request")
	s.m.observe(c.Path(), c.Request().Method, c.Response().Status, took)
}

// loggedPath is r's path as a log line shows it: a decision link's path
// (/d/ and its token, the credential of a decision) is the route's
// template, "/d/{token}", whatever follows /d/ and however it is spelled.
// No other path of the API holds a secret (keys and context tokens travel
// in headers; access_token in the query, which is never logged).
func loggedPath(r *http.Request) string {
	if strings.HasPrefix(path.Clean("/"+r.URL.Path), "/d/") {
		return "/d/{token}"
	}
	return r.URL.Path
}
