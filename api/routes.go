package api

import (
	"github.com/agentd-dev/agentd/internal/tracing"
	"github.com/agentd-dev/agentd/web"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.opentelemetry.io/otel/trace"
)

// routes is every route of the API in one place. No timeout or body-dump
// middleware is used anywhere: SSE routes must not have them (SPEC §10).
func (s *Server) routes() {
	e := s.echo
	// Before routing, so that refusals and preflights of any path are
	// logged and answered alike.
	e.Pre(middleware.Recover())
	e.Pre(noSniff)
	e.Pre(continueTrace)
	e.Pre(s.logRequests)
	e.Pre(s.guardBrowsers)
	e.Use(s.limitBody)

	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	if s.cfg.Metrics != nil {
		// Unauthenticated, like the probes (docs/metrics.md).
		e.GET("/metrics", echo.WrapHandler(s.cfg.Metrics))
	}

	// The API's OpenAPI document: public, it describes the API and holds no
	// tenant's data (docs/api.md#the-openapi-document).
	e.GET("/v1/openapi.json", s.handleOpenAPI)

	// The web chat (package web): the page and its files, public like any
	// static file; what they show comes from the API with the user's key.
	page := echo.WrapHandler(web.Handler())
	for _, p := range web.Paths {
		e.GET(p, page)
		e.HEAD(p, page)
	}

	// Routes with their middleware, not echo groups: a group with
	// middleware also routes every other method and path under its prefix
	// (to run that middleware on them), so a wrong method on a known path
	// answered 404 instead of 405.
	authed := routeGroup{e, "/v1", s.authenticate(false)}
	authed.POST("/conversations", s.handleCreateConversation)
	authed.GET("/conversations/:id", s.handleGetConversation)
	authed.POST("/conversations/:id/messages", s.handleSendMessage)
	authed.GET("/runs/:id", s.handleGetRun)
	authed.POST("/runs/:id/cancel", s.handleCancelRun)
	authed.GET("/tool-calls/:id", s.handleGetToolCall)
	authed.POST("/tool-calls/:id/approval", s.handleApproval)
	authed.POST("/tool-calls/:id/extend", s.handleExtend)
	authed.POST("/tool-calls/:id/links", s.handleMintLinks)
	authed.GET("/approvals", s.handleListApprovals)
	authed.POST("/approvals", s.handleBulkApprovals)
	authed.GET("/audit", s.handleAudit)
	authed.GET("/tools", s.handleListTools)
	authed.POST("/tools/:name/eval", s.handleToolEval)
	authed.POST("/tools/:name/run", s.handleToolRun)
	authed.POST("/connections/:name/request", s.handleConnectionRequest)
	authed.POST("/ag-ui", s.handleAGUI)
	authed.POST("/ai-sdk/chat", s.handleAISDKChat)
	authed.GET("/ai-sdk/chat/:id/stream", s.handleAISDKStream)
	authed.GET("/webhooks/deliveries", s.handleListDeliveries)
	authed.POST("/webhooks/deliveries/:id/redeliver", s.handleRedeliver)
	authed.GET("/webhooks/endpoints", s.handleListEndpoints)
	authed.POST("/webhooks/endpoints/:id/enable", s.handleEnableEndpoint)
	authed.GET("/grants", s.handleListGrants)
	authed.DELETE("/grants/:id", s.handleRevokeGrant)
	authed.GET("/inputs", s.handleListInputs)
	authed.GET("/inputs/:id", s.handleGetInput)
	authed.POST("/inputs/:id/answer", s.handleAnswerInput)

	// A command tool's per-call context endpoint (SPEC §4.1): its own
	// bearer token, valid while the call runs, not an API key.
	e.POST("/v1/context/request", s.handleContextRequest)
	e.POST("/v1/context/tools/:name", s.handleContextTool)

	// Decision links' pages (SPEC §11.4): the token is the credential.
	e.GET("/d/:token", s.handleLinkPage)
	e.POST("/d/:token", s.handleLinkUse)

	// The stream also accepts ?access_token= (EventSource cannot set headers).
	e.GET("/v1/conversations/:id/events", s.authenticate(true)(s.handleEvents))
}

// noSniff marks every answer "X-Content-Type-Options: nosniff" (the page
// sets it too), errors and refusals included: set before anything is
// written, so no browser reads a JSON body as another type.
func noSniff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		return next(c)
	}
}

// continueTrace makes a request's W3C traceparent header the parent of
// what the request starts (a run of POST …/messages or a protocol
// endpoint becomes its child: docs/observability.md). A header that is not
// a traceparent is ignored; without a tracer nothing reads it.
func continueTrace(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		remoteParent(c)
		return next(c)
	}
}

// remoteParent makes c's Traceparent header, if it is one, the parent of
// c's request context.
func remoteParent(c echo.Context) {
	if h := c.Request().Header.Get("Traceparent"); h != "" {
		if sc, ok := tracing.Parse(h); ok {
			r := c.Request()
			c.SetRequest(r.WithContext(trace.ContextWithRemoteSpanContext(r.Context(), sc)))
		}
	}
}

// routeGroup adds routes under a prefix, each with the same middleware.
// Each handler is wrapped in it once, here: echo applies the middleware a
// route is added with again on every request (a closure each time).
type routeGroup struct {
	e      *echo.Echo
	prefix string
	mw     echo.MiddlewareFunc
}

func (g routeGroup) GET(path string, h echo.HandlerFunc)    { g.e.GET(g.prefix+path, g.mw(h)) }
func (g routeGroup) POST(path string, h echo.HandlerFunc)   { g.e.POST(g.prefix+path, g.mw(h)) }
func (g routeGroup) DELETE(path string, h echo.HandlerFunc) { g.e.DELETE(g.prefix+path, g.mw(h)) }
