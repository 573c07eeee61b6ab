package api

import "github.com/labstack/echo/v4/middleware"

// routes is every route of the API in one place. No timeout or body-dump
// middleware is used anywhere: SSE routes must not have them (SPEC §10).
func (s *Server) routes() {
	e := s.echo
	// Before routing, so that refusals and preflights of any path are
	// logged and answered alike.
	e.Pre(middleware.Recover())
	e.Pre(s.logRequests)
	e.Pre(s.guardBrowsers)
	e.Use(s.limitBody)

	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)

	v1 := e.Group("/v1")
	authed := v1.Group("", s.authenticate(false))
	authed.POST("/conversations", s.handleCreateConversation)
	authed.GET("/conversations/:id", s.handleGetConversation)
	authed.POST("/conversations/:id/messages", s.handleSendMessage)
	authed.GET("/runs/:id", s.handleGetRun)
	authed.POST("/runs/:id/cancel", s.handleCancelRun)
	authed.GET("/tool-calls/:id", s.handleGetToolCall)
	authed.POST("/tool-calls/:id/approval", s.handleApproval)
	authed.GET("/approvals", s.handleListApprovals)
	authed.GET("/tools", s.handleListTools)
	authed.POST("/connections/:name/request", s.handleConnectionRequest)
	authed.GET("/webhooks/deliveries", s.handleListDeliveries)
	authed.POST("/webhooks/deliveries/:id/redeliver", s.handleRedeliver)
	authed.GET("/webhooks/endpoints", s.handleListEndpoints)
	authed.POST("/webhooks/endpoints/:id/enable", s.handleEnableEndpoint)

	// The stream also accepts ?access_token= (EventSource cannot set headers).
	v1.GET("/conversations/:id/events", s.handleEvents, s.authenticate(true))
}
