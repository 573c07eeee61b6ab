package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
	"github.com/labstack/echo/v4"
)

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(c echo.Context) error {
	if err := s.store.Ping(c.Request().Context()); err != nil {
		return &agentd.Error{Code: agentd.EUNAVAILABLE, Message: "store is not ready", Detail: err}
	}
	// A disabled webhook endpoint or a failed MCP server does not make the
	// server unready; the details say which ones wait for an operator or
	// are being started again — to an operator or admin key, and only those
	// of its tenant (the probe itself needs no key, and tells anyone else
	// only that the server is ready).
	out := map[string]any{"status": "ready"}
	p, ok := s.probeReader(c)
	if !ok {
		return c.JSON(http.StatusOK, out)
	}
	if s.cfg.Webhooks != nil {
		out["webhooks"] = map[string]any{"disabled_endpoints": s.cfg.Webhooks.DisabledEndpoints(p)}
	}
	if s.cfg.MCPServers != nil {
		out["mcp_servers"] = s.cfg.MCPServers(p.TenantID)
	}
	return c.JSON(http.StatusOK, out)
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

// conversationView is GET /v1/conversations/{id}: the conversation's
// fields with its messages and tool calls.
type conversationView struct {
	*agentd.Conversation
	Messages  []agentd.Message  `json:"messages"`
	ToolCalls []agentd.ToolCall `json:"tool_calls"`
}

func (s *Server) handleGetConversation(c echo.Context) error {
	d, err := s.engine.ConversationDetail(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	v := conversationView{Conversation: d.Conversation, Messages: d.Messages, ToolCalls: d.ToolCalls}
	if v.Messages == nil {
		v.Messages = []agentd.Message{}
	}
	if v.ToolCalls == nil {
		v.ToolCalls = []agentd.ToolCall{}
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

// approvalRequest is the body of POST /v1/tool-calls/{id}/approval.
type approvalRequest struct {
	Decision        string          `json:"decision"`
	Reason          string          `json:"reason,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsSHA256 string          `json:"arguments_sha256,omitempty"`
	// CardRevision is the card_revision of the card decided (absent: see
	// agentd.DecisionRequest.CardRevision).
	CardRevision *int `json:"card_revision,omitempty"`
	// Remember makes a grant of the approval (SPEC §11.2).
	Remember *agentd.Remember `json:"remember,omitempty"`
}

func (s *Server) handleApproval(c echo.Context) error {
	var req approvalRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	card, err := cardRevision("card_revision", req.CardRevision)
	if err != nil {
		return err
	}
	d, err := s.engine.Decide(c.Request().Context(), principal(c), c.Param("id"), agentd.DecisionRequest{
		Decision: req.Decision, Reason: req.Reason, Arguments: req.Arguments, ArgumentsSHA256: req.ArgumentsSHA256,
		CardRevision: card, Via: agentd.ViaSingle, Remember: req.Remember,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// handleExtend is POST /v1/tool-calls/{id}/extend (SPEC §11.3): the call
// as extended.
func (s *Server) handleExtend(c echo.Context) error {
	var req agentd.ExtendRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	tc, err := s.engine.Extend(c.Request().Context(), principal(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tc)
}

// bulkApprovalRequest is the body of POST /v1/approvals.
type bulkApprovalRequest struct {
	Approvals []bulkApprovalItem `json:"approvals"`
	Atomic    bool               `json:"atomic"`
}

type bulkApprovalItem struct {
	ToolCallID      string          `json:"tool_call_id"`
	Approve         *bool           `json:"approve"`
	Reason          string          `json:"reason,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsSHA256 string          `json:"arguments_sha256,omitempty"`
	CardRevision    *int            `json:"card_revision,omitempty"`
	// Remember is approvalRequest.Remember, per item.
	Remember *agentd.Remember `json:"remember,omitempty"`
}

// cardRevision is a body's card_revision: 0 when absent, EINVALID when
// below 1 (field names it in the message).
func cardRevision(field string, v *int) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, agentd.Errorf(agentd.EINVALID, "%s must be 1 or more (the card_revision of the card decided)", field)
	}
	return *v, nil
}

// handleBulkApprovals is POST /v1/approvals: 200 with one result per item,
// in request order, whatever became of each (docs/api.md).
func (s *Server) handleBulkApprovals(c echo.Context) error {
	var req bulkApprovalRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	if req.Approvals == nil {
		return agentd.Errorf(agentd.EINVALID, `"approvals" is required: a list of {tool_call_id, approve}`)
	}
	items := make([]agentd.BatchDecisionItem, len(req.Approvals))
	for i, it := range req.Approvals {
		if it.ToolCallID == "" || it.Approve == nil {
			return agentd.Errorf(agentd.EINVALID, `approvals[%d] needs "tool_call_id" and "approve" (true or false)`, i)
		}
		card, err := cardRevision(fmt.Sprintf("approvals[%d].card_revision", i), it.CardRevision)
		if err != nil {
			return err
		}
		items[i] = agentd.BatchDecisionItem{ToolCallID: it.ToolCallID, Approve: *it.Approve, Reason: it.Reason,
			Arguments: it.Arguments, ArgumentsSHA256: it.ArgumentsSHA256, CardRevision: card, Remember: it.Remember}
	}
	results, err := s.engine.DecideBatch(c.Request().Context(), principal(c), items, req.Atomic)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"atomic": req.Atomic, "results": results})
}

// handleListApprovals is the reconcile list: GET /v1/approvals?status=pending
// [&limit=N][&cursor=ID][&tool_name=…][&server_id=…][&conversation_id=…]
// [&expires_before=RFC 3339][&decidable=true]. Only pending approvals are
// listed; decidable=true keeps those the key may decide now (SPEC §11.1).
func (s *Server) handleListApprovals(c echo.Context) error {
	if st := c.QueryParam("status"); st != "" && st != "pending" {
		return agentd.Errorf(agentd.EINVALID, `status must be "pending"`)
	}
	q := agentd.PendingQuery{Cursor: c.QueryParam("cursor"), ToolName: c.QueryParam("tool_name"),
		ServerID: c.QueryParam("server_id"), ConversationID: c.QueryParam("conversation_id")}
	var err error
	if q.Limit, err = queryLimit(c); err != nil {
		return err
	}
	if q.ExpiresBefore, err = queryTime(c, "expires_before"); err != nil {
		return err
	}
	switch c.QueryParam("decidable") {
	case "", "false":
	case "true":
		q.Decidable = true
	default:
		return agentd.Errorf(agentd.EINVALID, `decidable must be "true" or "false"`)
	}
	calls, next, err := s.engine.PendingApprovals(c.Request().Context(), principal(c), q)
	if err != nil {
		return err
	}
	page, next, err := boundPage(calls, next, s.cfg.MaxPageBytes)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"approvals": page, "next_cursor": next})
}

// handleAudit is GET /v1/audit[?kind=…][&tool_call_id=…][&conversation_id=…]
// [&since=RFC 3339][&until=RFC 3339][&cursor=N][&limit=N] (operator, admin).
func (s *Server) handleAudit(c echo.Context) error {
	q := agentd.AuditQuery{Kind: c.QueryParam("kind"), ToolCallID: c.QueryParam("tool_call_id"),
		ConversationID: c.QueryParam("conversation_id")}
	var err error
	if q.Limit, err = queryLimit(c); err != nil {
		return err
	}
	if q.Since, err = queryTime(c, "since"); err != nil {
		return err
	}
	if q.Until, err = queryTime(c, "until"); err != nil {
		return err
	}
	if cur := c.QueryParam("cursor"); cur != "" {
		if q.Cursor, err = strconv.ParseInt(cur, 10, 64); err != nil || q.Cursor < 0 {
			return agentd.Errorf(agentd.EINVALID, "cursor must be the next_cursor of a previous page")
		}
	}
	entries, next, err := s.engine.Audit(c.Request().Context(), principal(c), q)
	if err != nil {
		return err
	}
	cursor := ""
	if next > 0 {
		cursor = strconv.FormatInt(next, 10)
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": entries, "next_cursor": cursor})
}

// queryLimit is the limit query parameter: 0 when absent, else 1..100.
func queryLimit(c echo.Context) (int, error) {
	l := c.QueryParam("limit")
	if l == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > 100 {
		return 0, agentd.Errorf(agentd.EINVALID, "limit must be an integer between 1 and 100")
	}
	return n, nil
}

// queryTime is an RFC 3339 query parameter: the zero time when absent.
func queryTime(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, agentd.Errorf(agentd.EINVALID, "%s must be an RFC 3339 time such as 2026-12-01T12:00:00Z", name)
	}
	return t, nil
}

type toolView struct {
	agentd.ToolSpec
	ServerID string `json:"server_id"`
	// Tier is the tool's tier; for the request tool it depends on each
	// call's connection, method and endpoint, and is "per_call".
	Tier agentd.Tier `json:"tier"`
}

func (s *Server) handleListTools(c echo.Context) error {
	specs := s.engine.ToolSpecs(principal(c).TenantID)
	out := make([]toolView, 0, len(specs))
	for _, t := range specs {
		tier, server := s.engine.ToolTier(t.Name)
		out = append(out, toolView{ToolSpec: t, ServerID: server, Tier: tier})
	}
	return c.JSON(http.StatusOK, map[string]any{"tools": out})
}

// handleEvents streams a conversation's event log (SPEC §6). Its frame,
// and those of the middleware above it, stay on the stack of every open
// stream: the work before and after the stream is in openStream and
// streamEnded.
func (s *Server) handleEvents(c echo.Context) error {
	conv, last, release, err := s.openStream(c)
	if err != nil {
		return err
	}
	defer release()
	return s.streamEnded(c, conv, s.streamer.Serve(c.Request().Context(), c.Response(), conv, last))
}

// openStream checks a stream request: the conversation (of the caller's
// tenant and project), Last-Event-ID, and the key's limit of open streams.
// release gives the stream's place back.
func (s *Server) openStream(c echo.Context) (conv string, last int64, release func(), err error) {
	cv, err := s.engine.Conversation(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return "", 0, nil, err
	}
	last, err = sse.ParseLastEventID(c.Request().Header.Get("Last-Event-ID"), c.QueryParam("last_event_id"))
	if err != nil {
		return "", 0, nil, agentd.Errorf(agentd.EINVALID, "%v", err)
	}
	hold, err := s.holdStream(c)
	if err != nil {
		return "", 0, nil, err
	}
	s.m.streams.Inc()
	return cv.ID, last, func() { s.m.streams.Dec(); hold() }, nil
}

// streamEnded is what handleEvents answers when sse.Serve returned err: an
// error status while nothing was written, else nil (the error logged).
func (s *Server) streamEnded(c echo.Context, conv string, err error) error {
	if err != nil && !c.Response().Committed {
		return fmt.Errorf("stream: %w", err)
	}
	if err != nil {
		s.log.Debug().Err(err).Str("conversation_id", conv).Msg("stream ended")
	}
	return nil
}

// toolEvalRequest is the body of POST /v1/tools/{name}/eval.
type toolEvalRequest struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// toolRunRequest is the body of POST /v1/tools/{name}/run.
type toolRunRequest struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Intent "confirmed_write" runs a confirm-tier tool; otherwise it
	// answers a preview.
	Intent string `json:"intent,omitempty"`
}

// handleToolEval is direct eval (SPEC §2.3): any tool, every gate
// bypassed, operator and admin keys; the runner checks the role, so a
// refused caller is in the audit log too.
func (s *Server) handleToolEval(c echo.Context) error {
	if s.cfg.Tools == nil {
		return agentd.Errorf(agentd.ENOTFOUND, "tool %q not found", c.Param("name"))
	}
	var req toolEvalRequest
	if err := decode(c, &req, true); err != nil {
		return err
	}
	out, err := s.cfg.Tools.Eval(c.Request().Context(), principal(c), c.Param("name"), req.Arguments)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// handleToolRun is the invoke trigger (SPEC §4.1): a tool whose tool.json
// has triggers.invoke, in the durable execution context.
func (s *Server) handleToolRun(c echo.Context) error {
	if s.cfg.Tools == nil {
		return agentd.Errorf(agentd.ENOTFOUND, "tool %q not found", c.Param("name"))
	}
	var req toolRunRequest
	if err := decode(c, &req, true); err != nil {
		return err
	}
	out, err := s.cfg.Tools.Run(c.Request().Context(), principal(c), c.Param("name"), req.Arguments, req.Intent)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
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
// delegate and admin keys only: Connections checks the role, so a refused
// caller is in the audit log too.
func (s *Server) handleConnectionRequest(c echo.Context) error {
	p := principal(c)
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

// contextRequest is the body of POST /v1/context/request: the request
// tool's arguments.
type contextRequest struct {
	Connection string `json:"connection"`
	connectionRequest
}

// contextToolRequest is the body of POST /v1/context/tools/{name}.
type contextToolRequest struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// contextToken is the bearer token of a context endpoint request, checked
// by the endpoint before the body is read (it is not an API key, and it is
// never logged): EUNAUTHORIZED without one, without an endpoint, or for a
// token of no running call.
func (s *Server) contextToken(c echo.Context) (string, error) {
	token, _ := bearerToken(c.Request().Header.Get("Authorization"))
	if s.cfg.Context == nil || token == "" {
		return "", agentd.Errorf(agentd.EUNAUTHORIZED, "a context token is required: Authorization: Bearer $AGENTD_CONTEXT_TOKEN")
	}
	if err := s.cfg.Context.Check(token); err != nil {
		return "", err
	}
	return token, nil
}

// handleContextRequest is a command tool's request on a connection
// through its per-call context endpoint (SPEC §4.1, docs/runtime.md).
func (s *Server) handleContextRequest(c echo.Context) error {
	token, err := s.contextToken(c)
	if err != nil {
		return err
	}
	var req contextRequest
	if err := decode(c, &req, false); err != nil {
		return err
	}
	args, err := json.Marshal(req)
	if err != nil {
		return agentd.Errorf(agentd.EINVALID, "bad request: %v", err)
	}
	out, err := s.cfg.Context.Request(c.Request().Context(), token, args)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// handleContextTool is a composite's call of one of its uses.tools
// through its per-call context endpoint (SPEC §4.1, docs/runtime.md).
func (s *Server) handleContextTool(c echo.Context) error {
	token, err := s.contextToken(c)
	if err != nil {
		return err
	}
	var req contextToolRequest
	if err := decode(c, &req, true); err != nil {
		return err
	}
	out, err := s.cfg.Context.CallTool(c.Request().Context(), token, c.Param("name"), req.Arguments)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// handleListGrants is GET /v1/grants (SPEC §11.2): the live grants the
// caller may see, a page.
func (s *Server) handleListGrants(c echo.Context) error {
	limit, err := queryLimit(c)
	if err != nil {
		return err
	}
	gs, next, err := s.engine.Grants(c.Request().Context(), principal(c), c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"grants": gs, "next_cursor": next})
}

// handleRevokeGrant is DELETE /v1/grants/{id}: the grant as revoked.
func (s *Server) handleRevokeGrant(c echo.Context) error {
	g, err := s.engine.RevokeGrant(c.Request().Context(), principal(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, g)
}
