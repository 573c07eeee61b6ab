package api

import (
	"net/http"
	"strconv"

	"github.com/agentd-dev/agentd"
	"github.com/labstack/echo/v4"
)

// The operator routes of the webhook outbox (SPEC §7): the delivery log,
// redelivery, the endpoints and re-enabling one.

// webhooks returns the configured outbox, or ENOTFOUND when there is none.
func (s *Server) webhooks() (Webhooks, error) {
	if s.cfg.Webhooks == nil {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "no webhooks are configured")
	}
	return s.cfg.Webhooks, nil
}

// handleListDeliveries is GET /v1/webhooks/deliveries[?endpoint_id=]
// [&status=][&event_name=][&limit=N][&cursor=C].
func (s *Server) handleListDeliveries(c echo.Context) error {
	w, err := s.webhooks()
	if err != nil {
		return err
	}
	q := agentd.WebhookDeliveryQuery{EndpointID: c.QueryParam("endpoint_id"), Status: c.QueryParam("status"),
		EventName: c.QueryParam("event_name"), Cursor: c.QueryParam("cursor")}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			return agentd.Errorf(agentd.EINVALID, "limit must be an integer between 1 and 100")
		}
		q.Limit = n
	}
	ds, next, err := w.Deliveries(c.Request().Context(), principal(c), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": ds, "next_cursor": next})
}

// handleRedeliver is POST /v1/webhooks/deliveries/{id}/redeliver.
func (s *Server) handleRedeliver(c echo.Context) error {
	w, err := s.webhooks()
	if err != nil {
		return err
	}
	d, err := w.Redeliver(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

// handleListEndpoints is GET /v1/webhooks/endpoints.
func (s *Server) handleListEndpoints(c echo.Context) error {
	w, err := s.webhooks()
	if err != nil {
		return err
	}
	eps, err := w.Endpoints(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"endpoints": eps})
}

// handleEnableEndpoint is POST /v1/webhooks/endpoints/{id}/enable.
func (s *Server) handleEnableEndpoint(c echo.Context) error {
	w, err := s.webhooks()
	if err != nil {
		return err
	}
	ep, err := w.EnableEndpoint(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ep)
}
