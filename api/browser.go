package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/origin"
	"github.com/labstack/echo/v4"
)

// CORS answers for the origins of Config.CORSOrigins.
const (
	corsAllowMethods = "GET, POST, OPTIONS"
	corsAllowHeaders = "Authorization, Content-Type, Last-Event-ID, Idempotency-Key"
	corsMaxAge       = "600"
)

// guardBrowsers is SPEC §5 "Browsers", applied before routing to every
// request: in dev mode a Host that is not a loopback name or address is 421
// (a DNS-rebinding page reaches the server by another name); a request
// whose Origin is neither the server's own nor one of Config.CORSOrigins is
// 403 (a page on another site, which may send a simple text/plain POST with
// no preflight). A request without Origin (curl, SDKs, same-origin GETs) is
// not a browser's cross-site request and passes. Allowed cross origins get
// CORS headers, and their preflights are answered here.
func (s *Server) guardBrowsers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// The checks are in checkBrowser, so that this frame, which stays
		// on the stack of every open stream, is small.
		if answered, err := s.checkBrowser(c); answered || err != nil {
			return err
		}
		return next(c)
	}
}

// checkBrowser refuses c (an error), answers its CORS preflight (answered),
// or lets it pass (neither), with the CORS headers of an allowed origin.
func (s *Server) checkBrowser(c echo.Context) (answered bool, err error) {
	r := c.Request()
	if s.DevMode() && !origin.IsLoopbackHost(r.Host) {
		return false, agentd.Errorf(agentd.EMISDIRECTED, "this development server (no API keys) answers only loopback host names, not %q", r.Host)
	}
	raw := r.Header.Get("Origin")
	if raw == "" {
		return false, nil
	}
	o, err := origin.Normalize(raw)
	if err == nil && sameOrigin(o, r.Host) {
		return false, nil
	}
	if err != nil || !slices.Contains(s.cfg.CORSOrigins, o) {
		return false, agentd.Errorf(agentd.EFORBIDDEN, "requests from the origin %q are not allowed (list it in agentd.json cors_origins)", raw)
	}
	h := c.Response().Header()
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Allow-Origin", o)
	if isPreflight(r) {
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		return true, c.NoContent(http.StatusNoContent)
	}
	return false, nil
}

// sameOrigin reports whether the normalized origin o is the server's own as
// the request addressed it (Host), over http or https: behind a proxy that
// ends TLS the server itself cannot tell which scheme the page used.
func sameOrigin(o, host string) bool {
	for _, scheme := range []string{"http://", "https://"} {
		if own, err := origin.Normalize(scheme + host); err == nil && own == o {
			return true
		}
	}
	return false
}

// isPreflight reports whether r is a CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		strings.TrimSpace(r.Header.Get("Access-Control-Request-Method")) != ""
}
