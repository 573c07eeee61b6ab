package api

import (
	"net/http"

	"github.com/agentd-dev/agentd"
	"github.com/labstack/echo/v4"
)

// The input requests' routes (SPEC §12, docs/inputs.md).

// handleListInputs is GET /v1/inputs[?status=…][&conversation_id=…]
// [&tool_name=…][&answerable=true][&cursor=ID][&limit=N]: the inputs the
// key reaches, oldest first.
func (s *Server) handleListInputs(c echo.Context) error {
	q := agentd.InputQuery{Cursor: c.QueryParam("cursor"), Status: agentd.InputStatus(c.QueryParam("status")),
		ConversationID: c.QueryParam("conversation_id"), ToolName: c.QueryParam("tool_name")}
	var err error
	if q.Limit, err = queryLimit(c); err != nil {
		return err
	}
	switch c.QueryParam("answerable") {
	case "", "false":
	case "true":
		q.Answerable = true
	default:
		return agentd.Errorf(agentd.EINVALID, `answerable must be "true" or "false"`)
	}
	ins, next, err := s.engine.Inputs(c.Request().Context(), principal(c), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"inputs": ins, "next_cursor": next})
}

// handleGetInput is GET /v1/inputs/{id}: one input.
func (s *Server) handleGetInput(c echo.Context) error {
	in, err := s.engine.Input(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}

// handleAnswerInput is POST /v1/inputs/{id}/answer {"action", "content"?}:
// the input as answered (SPEC §12.3).
func (s *Server) handleAnswerInput(c echo.Context) error {
	var req agentd.InputAnswer
	if err := decode(c, &req, false); err != nil {
		return err
	}
	req.Via = agentd.ViaSingle
	in, err := s.engine.AnswerInput(c.Request().Context(), principal(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}
