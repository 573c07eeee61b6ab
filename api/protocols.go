package api

import (
	"net/url"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol/agui"
	"github.com/agentd-dev/agentd/protocol/aisdk"
	"github.com/labstack/echo/v4"
)

// handleAGUI is POST /v1/ag-ui: a RunAgentInput in, AG-UI events out
// (docs/protocols.md).
func (s *Server) handleAGUI(c echo.Context) error {
	var in agui.RunAgentInput
	if err := decodeOpen(c, &in); err != nil {
		return err
	}
	release, err := s.holdStream(c)
	if err != nil {
		return err
	}
	defer release()
	return agui.Serve(c.Request().Context(), c.Response(), s.protocols, principal(c), &in)
}

// handleAISDKChat is POST /v1/ai-sdk/chat: the body of the AI SDK's
// DefaultChatTransport in, the UI message stream out (docs/protocols.md).
func (s *Server) handleAISDKChat(c echo.Context) error {
	var in aisdk.ChatRequest
	if err := decodeOpen(c, &in); err != nil {
		return err
	}
	release, err := s.holdStream(c)
	if err != nil {
		return err
	}
	defer release()
	return aisdk.Serve(c.Request().Context(), c.Response(), s.protocols, principal(c), &in)
}

// handleAISDKStream is GET /v1/ai-sdk/chat/{id}/stream: the AI SDK
// transport's reconnectToStream; the chat's active run replayed, or 204
// (docs/protocols.md).
func (s *Server) handleAISDKStream(c echo.Context) error {
	release, err := s.holdStream(c)
	if err != nil {
		return err
	}
	defer release()
	id, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		return agentd.Errorf(agentd.EINVALID, "the chat id in the path is not a valid escaped path segment")
	}
	return aisdk.Resume(c.Request().Context(), c.Response(), s.protocols, principal(c), id)
}
