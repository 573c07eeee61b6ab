package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sse"
	"github.com/labstack/echo/v4"
)

// decode reads exactly one JSON object into v, rejecting unknown fields and
// trailing data. An empty body is allowed only when optional is true.
func decode(c echo.Context, v any, optional bool) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return agentd.Errorf(agentd.ETOOLARGE, "request body is larger than %d bytes", mbe.Limit)
		}
		return agentd.Errorf(agentd.EINVALID, "cannot read request body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return agentd.Errorf(agentd.EINVALID, "request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return agentd.Errorf(agentd.EINVALID, "malformed JSON at byte %d: %v", se.Offset, se)
		case errors.As(err, &te):
			return agentd.Errorf(agentd.EINVALID, "field %q must be %s, not %s", te.Field, te.Type, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return agentd.Errorf(agentd.EINVALID, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return agentd.Errorf(agentd.EINVALID, "malformed JSON: %v", err)
		}
	}
	if dec.More() {
		return agentd.Errorf(agentd.EINVALID, "unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return agentd.Errorf(agentd.EINVALID, "unexpected data after the JSON object")
	}
	return nil
}

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(c echo.Context) error {
	if err := s.store.Ping(c.Request().Context()); err != nil {
		return &agentd.Error{Code: agentd.EUNAVAILABLE, Message: "store is not ready", Detail: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

type createConversationRequest struct {
	Agent    string          `json:"agent"`
	Metadata json.RawMessage `json:"metadata"`
}

func (s *Server) handleCreateConversation(c echo.Context) error {
	var req createConversationRequest
	if err := decode(c, &req, true); err != nil {
		return err
	}
	conv, err := s.engine.CreateConversation(c.Request().Context(), principal(c), req.Agent, req.Metadata)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, conv)
}

func (s *Server) handleGetConversation(c echo.Context) error {
	v, err := s.engine.ConversationView(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

type sendMessageRequest struct {
	Content string `json:"content"`
}

func (s *Server) handleSendMessage(c echo.Context) error {
	var req sendMessageRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	run, err := s.engine.Send(c.Request().Context(), principal(c), c.Param("id"), req.Content)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"run_id": run.ID, "correlation_id": run.CorrelationID})
}

func (s *Server) handleGetRun(c echo.Context) error {
	run, err := s.engine.Run(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

func (s *Server) handleCancelRun(c echo.Context) error {
	var empty struct{}
	if err := decode(c, &empty, true); err != nil {
		return err
	}
	run, err := s.engine.Cancel(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

func (s *Server) handleGetToolCall(c echo.Context) error {
	call, err := s.engine.ToolCall(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, call)
}

func (s *Server) handleApproval(c echo.Context) error {
	var req loop.DecisionRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	d, err := s.engine.Decide(c.Request().Context(), principal(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// handleListApprovals is the reconcile list: GET /v1/approvals?status=pending
// [&limit=N][&cursor=ID]. Only pending approvals are listed.
func (s *Server) handleListApprovals(c echo.Context) error {
	if st := c.QueryParam("status"); st != "" && st != "pending" {
		return agentd.Errorf(agentd.EINVALID, `status must be "pending"`)
	}
	limit := 0
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			return agentd.Errorf(agentd.EINVALID, "limit must be an integer between 1 and 100")
		}
		limit = n
	}
	calls, next, err := s.engine.PendingApprovals(c.Request().Context(), principal(c), c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"approvals": calls, "next_cursor": next})
}

type toolView struct {
	agentd.ToolSpec
	ServerID string `json:"server_id"`
	// Tier is the tool's tier; for the request tool it depends on each
	// call's connection, method and endpoint, and is "per_call".
	Tier agentd.Tier `json:"tier"`
}

func (s *Server) handleListTools(c echo.Context) error {
	specs := s.engine.ToolSpecs()
	out := make([]toolView, 0, len(specs))
	for _, t := range specs {
		tier, server := s.engine.ToolTier(t.Name)
		out = append(out, toolView{ToolSpec: t, ServerID: server, Tier: tier})
	}
	return c.JSON(http.StatusOK, map[string]any{"tools": out})
}

// handleEvents streams a conversation's event log (SPEC §6).
func (s *Server) handleEvents(c echo.Context) error {
	ctx := c.Request().Context()
	conv, err := s.engine.Conversation(ctx, principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	last, err := sse.ParseLastEventID(c.Request().Header.Get("Last-Event-ID"), c.QueryParam("last_event_id"))
	if err != nil {
		return agentd.Errorf(agentd.EINVALID, "%v", err)
	}
	err = sse.Serve(ctx, c.Response(), s.hub, s.store, conv.ID, last, sse.Options{Heartbeat: s.cfg.Heartbeat})
	if err != nil && !c.Response().Committed {
		return fmt.Errorf("stream: %w", err)
	}
	if err != nil {
		s.log.Debug().Err(err).Str("conversation_id", conv.ID).Msg("stream ended")
	}
	return nil
}

// connectionRequest is the body of POST /v1/connections/{name}/request: the
// request tool's arguments without the connection, which the path names.
type connectionRequest struct {
	Method   string            `json:"method"`
	Endpoint string            `json:"endpoint"`
	Params   map[string]any    `json:"params,omitempty"`
	Data     json.RawMessage   `json:"data,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Intent   string            `json:"intent"`
}

// handleConnectionRequest is the durable/workflow request path (SPEC §2.3):
// no approval prompt; a confirm-tier write answers a preview object, a
// confirmed_write runs; review and never are refused (403). Operator,
// delegate and admin keys only.
func (s *Server) handleConnectionRequest(c echo.Context) error {
	p := principal(c)
	switch p.Role {
	case agentd.RoleOperator, agentd.RoleDelegate, agentd.RoleAdmin:
	default:
		return agentd.Errorf(agentd.EFORBIDDEN, "the durable request path needs an operator or delegate key")
	}
	if s.cfg.Connections == nil {
		return agentd.Errorf(agentd.ENOTFOUND, "connection %q not found", c.Param("name"))
	}
	var req connectionRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return agentd.Errorf(agentd.EINVALID, "Idempotency-Key is longer than 255 bytes")
	}
	args, err := json.Marshal(struct {
		Connection string `json:"connection"`
		connectionRequest
	}{c.Param("name"), req})
	if err != nil {
		return agentd.Errorf(agentd.EINVALID, "bad request: %v", err)
	}
	out, preview, err := s.cfg.Connections.Request(c.Request().Context(), c.Param("name"), args, p, key)
	// Every outcome is logged: this path has no human in it.
	ev := s.log.Info().Str("connection", c.Param("name")).Str("method", req.Method).Str("endpoint", req.Endpoint).
		Str("intent", req.Intent).Str("key_id", p.KeyID).Str("tenant_id", p.TenantID)
	switch {
	case err != nil:
		ev.Str("outcome", agentd.ErrorCode(err)).Str("reason", agentd.ErrorMessage(err)).Msg("durable connection request")
		return err
	case preview:
		ev.Str("outcome", "preview").Msg("durable connection request")
	default:
		ev.Str("outcome", "performed").Msg("durable connection request")
	}
	return c.JSON(http.StatusOK, out)
}
