package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol/agui"
	"github.com/agentd-dev/agentd/protocol/aisdk"
	"github.com/agentd-dev/agentd/web"
)

// operations is every operation of the document, in the order of
// routes.go (TestOpenAPIMatchesRoutes checks both ways).
func operations() []operation {
	return slicesConcat(probeOperations(), webOperations(), conversationOperations(), approvalOperations(), inputOperations(), otherOperations())
}

func slicesConcat(lists ...[]operation) []operation {
	var out []operation
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func query(name, desc string, s schema) schema {
	return schema{"name": name, "in": "query", "description": desc, "schema": s}
}

func str() schema { return schema{"type": "string"} }

// mcpServerStatus is one MCP server in /readyz (mcp.Status, docs/mcp.md).
func mcpServerStatus() schema {
	return object([]string{"id", "transport", "state", "restarts", "tools"}, schema{
		"id": str(), "transport": schema{"enum": []string{"stdio", "http"}},
		"state":    schema{"enum": []string{"ready", "starting", "stopped"}},
		"error":    str(),
		"restarts": schema{"type": "integer", "minimum": 0},
		"tools":    schema{"type": "array", "items": str()},
		"left_out": schema{"type": "array", "items": object([]string{"tool", "reason"}, schema{"tool": str(), "reason": str()})},
		"pid":      schema{"type": "integer", "minimum": 0}})
}

var (
	limitParam = query("limit", "1 to 100 (default 50)", schema{"type": "integer", "minimum": 1, "maximum": 100})
	timeSchema = schema{"type": "string", "format": "date-time"}
)

func object(required []string, props schema) schema {
	return schema{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

// webOperations are the web chat's page and its files (package web,
// docs/web.md), GET and HEAD each: public static files, in the document so
// that it lists every route the server answers.
func webOperations() []operation {
	var ops []operation
	for _, p := range web.Paths {
		name, summary := strings.NewReplacer("/", "", ".", "_").Replace(p), "A file of the web chat: its component or style (docs/web.md)"
		if p == "/" {
			name, summary = "index", "The web chat's page (docs/web.md)"
		}
		content := schema{web.ContentType(p): schema{"schema": str()}}
		ops = append(ops,
			operation{method: http.MethodGet, path: p, id: "web_" + name, summary: summary, public: true, status: http.StatusOK, content: content},
			operation{method: http.MethodHead, path: p, id: "web_" + name + "_head", summary: summary + ", headers only", public: true, status: http.StatusOK})
	}
	return ops
}

func probeOperations() []operation {
	status := func(v string) schema { return schema{"type": "string", "const": v} }
	return []operation{
		{method: http.MethodGet, path: "/healthz", id: "healthz", summary: "The process is up", public: true,
			status: http.StatusOK, content: jsonContent(object([]string{"status"}, schema{"status": status("ok")}))},
		{method: http.MethodGet, path: "/readyz", id: "readyz", summary: "The store answers (503 unavailable when not)", public: true,
			status: http.StatusOK, content: jsonContent(object([]string{"status"}, schema{"status": status("ready"),
				"webhooks": object([]string{"disabled_endpoints"}, schema{
					"disabled_endpoints": schema{"type": []string{"array", "null"}, "items": str()}}),
				"mcp_servers": schema{"type": "array", "items": mcpServerStatus()}}))},
		{method: http.MethodGet, path: "/metrics", id: "metrics", summary: "Prometheus metrics (docs/metrics.md)", public: true,
			status: http.StatusOK, content: schema{"text/plain": schema{"schema": str()}}},
		{method: http.MethodGet, path: "/v1/openapi.json", id: "openapi", summary: "This document", public: true,
			status: http.StatusOK, content: jsonContent(schema{"type": "object"})},
	}
}

func conversationOperations() []operation {
	return []operation{
		{method: http.MethodPost, path: "/v1/conversations", id: "createConversation", summary: "Create a conversation",
			body: requestBody[createConversationRequest](), status: http.StatusCreated, content: jsonContent(ref("Conversation"))},
		{method: http.MethodGet, path: "/v1/conversations/{id}", id: "getConversation",
			summary: "A conversation with its messages and tool calls", status: http.StatusOK, content: jsonContent(ref("ConversationDetail"))},
		{method: http.MethodPost, path: "/v1/conversations/{id}/messages", id: "sendMessage",
			summary: "Send a user message (at most 64 KiB, not blank): starts a run (409 run_active while one runs or waits)",
			body:    requestBody[sendMessageRequest]("content"), bodyRequired: true, status: http.StatusAccepted,
			content: jsonContent(object([]string{"run_id", "correlation_id"}, schema{"run_id": str(), "correlation_id": str()}))},
		{method: http.MethodGet, path: "/v1/conversations/{id}/events", id: "streamEvents", tokenInQuery: true,
			summary: "The conversation's event stream (SSE, docs/sse.md)",
			params: []schema{
				{"name": "Last-Event-ID", "in": "header", "description": "resume after this event id", "schema": str()},
				query("last_event_id", "Last-Event-ID for clients that cannot set it", str())},
			status: http.StatusOK, content: sseContent("Server-sent events: `id` is the event's sequence number, `event` its type, " +
				"`data` its JSON, one of the schemas of components.schemas.Event (by its type).")},
		{method: http.MethodGet, path: "/v1/runs/{id}", id: "getRun", summary: "A run", status: http.StatusOK, content: jsonContent(ref("Run"))},
		{method: http.MethodPost, path: "/v1/runs/{id}/cancel", id: "cancelRun", summary: "Cancel a run (a finished run is 409)",
			body: requestBody[struct{}](), status: http.StatusOK, content: jsonContent(ref("Run"))},
		{method: http.MethodGet, path: "/v1/tool-calls/{id}", id: "getToolCall", summary: "A tool call with every value",
			status: http.StatusOK, content: jsonContent(ref("ToolCall"))},
	}
}

// reasonSchema is a decision's or an extension's reason.
func reasonSchema() schema {
	return schema{"type": "string", "description": "at most " + strconv.Itoa(agentd.MaxReasonBytes) + " bytes"}
}

func approvalOperations() []operation {
	approval := requestBody[approvalRequest]("decision")
	props := approval["properties"].(schema)
	props["decision"] = schema{"type": "string", "enum": []string{"approve", "edit", "deny"}}
	props["card_revision"] = schema{"type": "integer", "minimum": 1}
	props["reason"] = reasonSchema()
	props["remember"] = rememberSchema()
	extend := requestBody[agentd.ExtendRequest]("by")
	extend["properties"].(schema)["by"] = schema{"type": "string", "description": `a positive Go duration such as "30m"`, "minLength": 1}
	extend["properties"].(schema)["reason"] = reasonSchema()
	bulk := requestBody[bulkApprovalRequest]("approvals")
	items := bulk["properties"].(schema)["approvals"].(schema)
	items["type"], items["minItems"], items["maxItems"] = "array", 1, agentd.MaxBatchDecisions
	item := items["items"].(schema)
	item["required"] = []string{"tool_call_id", "approve"}
	item["properties"].(schema)["card_revision"] = schema{"type": "integer", "minimum": 1}
	item["properties"].(schema)["remember"] = rememberSchema()
	return []operation{
		{method: http.MethodPost, path: "/v1/tool-calls/{id}/approval", id: "decideToolCall",
			summary: "Approve, edit or deny a parked call (docs/api.md#approval-rules)",
			body:    approval, bodyRequired: true, status: http.StatusOK, content: jsonContent(ref("Decision"))},
		{method: http.MethodPost, path: "/v1/tool-calls/{id}/extend", id: "extendToolCall",
			summary: "Move a parked call's deadline later, within max_extension (docs/governance.md#reminders-and-extensions)",
			body:    extend, bodyRequired: true, status: http.StatusOK, content: jsonContent(ref("ToolCall"))},
		linksOperation(),
		{method: http.MethodGet, path: "/d/{token}", id: "decisionLinkPage", public: true,
			summary: "A decision link's page: the card and one button; never decides (docs/governance.md#decision-links). Errors are short text/html pages.",
			status:  http.StatusOK, content: htmlContent},
		{method: http.MethodPost, path: "/d/{token}", id: "useDecisionLink", public: true,
			summary: "Decide once as the link's minting key (410 spent or expired, 404 tampered or unknown, 409 decided otherwise; text/html pages)",
			form:    object(nil, schema{"reason": schema{"type": "string", "description": "a deny link's optional reason, at most " + strconv.Itoa(agentd.MaxReasonBytes) + " bytes"}}),
			status:  http.StatusOK, content: htmlContent},
		{method: http.MethodGet, path: "/v1/approvals", id: "listApprovals", summary: "The caller's parked calls, oldest first",
			params: []schema{query("status", "only pending is listed", schema{"type": "string", "enum": []string{"pending"}}),
				limitParam, query("cursor", "the next_cursor of the previous page", str()),
				query("tool_name", "", str()), query("server_id", "", str()), query("conversation_id", "", str()),
				query("expires_before", "RFC 3339 with offset", timeSchema),
				query("decidable", "true: only the calls this key may decide now (docs/governance.md)", schema{"type": "string", "enum": []string{"true", "false"}})},
			status: http.StatusOK, content: jsonContent(page("approvals", ref("ListedToolCall")))},
		{method: http.MethodPost, path: "/v1/approvals", id: "decideBatch", summary: "Bulk decisions (docs/api.md#bulk-decisions)",
			body: bulk, bodyRequired: true, status: http.StatusOK,
			content: jsonContent(object([]string{"atomic", "results"}, schema{"atomic": schema{"type": "boolean"},
				"results": schema{"type": "array", "items": ref("BatchDecisionResult")}}))},
		{method: http.MethodGet, path: "/v1/audit", id: "listAudit", summary: "The audit log, oldest first (operator and admin keys)",
			params: []schema{query("kind", "", schema{"type": "string", "enum": agentd.AuditKinds}),
				query("tool_call_id", "", str()), query("conversation_id", "", str()),
				query("since", "RFC 3339", timeSchema), query("until", "RFC 3339", timeSchema),
				query("cursor", "the next_cursor of the previous page", schema{"type": "string", "pattern": "^[0-9]+$"}), limitParam},
			status: http.StatusOK, content: jsonContent(page("entries", ref("AuditEntry")))},
		{method: http.MethodGet, path: "/v1/grants", id: "listGrants",
			summary: "The live remembered grants the caller may see (docs/governance.md#remembered-grants)",
			params:  []schema{limitParam, query("cursor", "the next_cursor of the previous page", str())},
			status:  http.StatusOK, content: jsonContent(page("grants", ref("Grant")))},
		{method: http.MethodDelete, path: "/v1/grants/{id}", id: "revokeGrant",
			summary: "Revoke a remembered grant (its creator, an operator or an admin)",
			status:  http.StatusOK, content: jsonContent(ref("Grant"))},
	}
}

// inputOperations are the input requests' routes (SPEC §12, docs/inputs.md).
func inputOperations() []operation {
	answer := requestBody[agentd.InputAnswer]("action")
	answer["properties"].(schema)["action"] = schema{"type": "string", "enum": []string{agentd.InputAccept, agentd.InputDecline, agentd.InputCancel}}
	answer["properties"].(schema)["content"] = schema{"type": "object", "description": "accept of a form input only: the answer, checked against the input's schema"}
	statuses := []string{string(agentd.InputPending), string(agentd.InputAnswered), string(agentd.InputExpired),
		string(agentd.InputCancelled), string(agentd.InputLost)}
	return []operation{
		{method: http.MethodGet, path: "/v1/inputs", id: "listInputs", summary: "The input requests the caller reaches, oldest first (docs/inputs.md)",
			params: []schema{query("status", "", schema{"type": "string", "enum": statuses}),
				limitParam, query("cursor", "the next_cursor of the previous page", str()),
				query("conversation_id", "", str()), query("tool_name", "", str()),
				query("answerable", "true: only the pending inputs this key may answer now", schema{"type": "string", "enum": []string{"true", "false"}})},
			status: http.StatusOK, content: jsonContent(page("inputs", ref("Input")))},
		{method: http.MethodGet, path: "/v1/inputs/{id}", id: "getInput", summary: "An input request",
			status: http.StatusOK, content: jsonContent(ref("Input"))},
		{method: http.MethodPost, path: "/v1/inputs/{id}/answer", id: "answerInput",
			summary: "Answer an input request once: accept (with content), decline or cancel (422 invalid_input names each bad field in error.fields)",
			body:    answer, bodyRequired: true, status: http.StatusOK, content: jsonContent(ref("Input"))},
	}
}

func otherOperations() []operation {
	sse := "Server-sent events of the protocol (docs/protocols.md)."
	return []operation{
		{method: http.MethodGet, path: "/v1/tools", id: "listTools", summary: "The agent's tools with their tiers", status: http.StatusOK,
			content: jsonContent(object([]string{"tools"}, schema{"tools": schema{"type": "array", "items": ref("Tool")}}))},
		{method: http.MethodPost, path: "/v1/tools/{name}/eval", id: "evalTool",
			summary: "Direct eval: run any tool, every gate bypassed, audited (operator and admin keys; docs/runtime.md)",
			body:    requestBody[toolEvalRequest](), status: http.StatusOK, content: jsonContent(toolOutcome())},
		{method: http.MethodPost, path: "/v1/tools/{name}/run", id: "runTool",
			summary: "The invoke trigger: run a tool in the durable execution context, audited (operator and delegate keys; docs/runtime.md)",
			body:    requestBody[toolRunRequest](), status: http.StatusOK,
			content: jsonContent(schema{"oneOf": []schema{toolOutcome(), object([]string{"preview"}, schema{"preview": object(
				[]string{"tool", "arguments", "arguments_sha256", "tier", "reason", "instruction"},
				schema{"tool": str(), "arguments": schema{"type": "object"}, "arguments_sha256": str(), "tier": str(),
					"reason": str(), "instruction": str()})})}})},
		{method: http.MethodPost, path: "/v1/connections/{name}/request", id: "connectionRequest",
			summary: "The durable request path (docs/connections.md#the-durable-path): a preview, or the downstream answer",
			params:  []schema{{"name": "Idempotency-Key", "in": "header", "schema": schema{"type": "string", "maxLength": 255}}},
			body:    requestBody[connectionRequest](), bodyRequired: true, status: http.StatusOK, content: jsonContent(schema{"type": "object"})},
		{method: http.MethodPost, path: "/v1/ag-ui", id: "agui", summary: "AG-UI: a RunAgentInput in, AG-UI events out",
			body: protocolBody[agui.RunAgentInput](), bodyRequired: true, status: http.StatusOK, content: sseContent(sse)},
		{method: http.MethodPost, path: "/v1/ai-sdk/chat", id: "aisdkChat", summary: "AI SDK: DefaultChatTransport's body in, the UI message stream out",
			body: protocolBody[aisdk.ChatRequest](), bodyRequired: true, status: http.StatusOK, content: sseContent(sse),
			headers: schema{"x-vercel-ai-ui-message-stream": schema{"schema": schema{"type": "string", "const": "v1"}}}},
		{method: http.MethodGet, path: "/v1/ai-sdk/chat/{id}/stream", id: "aisdkResume",
			summary: "AI SDK: reconnectToStream; the chat's active run replayed from its start, then live",
			status:  http.StatusOK, content: sseContent(sse),
			headers:   schema{"x-vercel-ai-ui-message-stream": schema{"schema": schema{"type": "string", "const": "v1"}}},
			noContent: "no active run: the chat's latest run finished, it has none, or it is no chat of the caller's"},
		{method: http.MethodGet, path: "/v1/webhooks/deliveries", id: "listDeliveries", summary: "The webhook delivery log, newest first",
			params: []schema{query("endpoint_id", "", str()), query("status", "", schema{"type": "string", "enum": []string{"pending", "succeeded", "failed"}}),
				query("event_name", "", str()), limitParam, query("cursor", "the next_cursor of the previous page", str())},
			status: http.StatusOK, content: jsonContent(page("deliveries", ref("WebhookDelivery")))},
		{method: http.MethodPost, path: "/v1/webhooks/deliveries/{id}/redeliver", id: "redeliver", summary: "Deliver again, now",
			status: http.StatusAccepted, content: jsonContent(ref("WebhookDelivery"))},
		{method: http.MethodGet, path: "/v1/webhooks/endpoints", id: "listEndpoints", summary: "The webhook endpoints", status: http.StatusOK,
			content: jsonContent(object([]string{"endpoints"}, schema{"endpoints": schema{"type": []string{"array", "null"}, "items": ref("WebhookEndpoint")}}))},
		{method: http.MethodPost, path: "/v1/webhooks/endpoints/{id}/enable", id: "enableEndpoint", summary: "Re-enable an endpoint",
			status: http.StatusOK, content: jsonContent(ref("WebhookEndpoint"))},
		{method: http.MethodPost, path: "/v1/context/request", id: "contextRequest", contextToken: true,
			summary: "A command tool's request on a connection, with its AGENTD_CONTEXT_TOKEN (docs/runtime.md)",
			body:    requestBody[contextRequest](), bodyRequired: true, status: http.StatusOK,
			content: jsonContent(schema{"oneOf": []schema{object([]string{"status", "body"}, schema{"status": schema{"type": "integer"}, "body": schema{},
				"truncated": schema{"type": "boolean"}, "idempotency_key": str()}),
				// A durable tool's confirm-tier write without confirmed_write.
				object([]string{"preview"}, schema{"preview": schema{"type": "object"}})}})},
		{method: http.MethodPost, path: "/v1/context/tools/{name}", id: "contextTool", contextToken: true,
			summary: "A composite's call of a tool of its uses.tools, with its AGENTD_CONTEXT_TOKEN (docs/runtime.md)",
			body:    requestBody[contextToolRequest](), status: http.StatusOK, content: jsonContent(toolOutcome())},
	}
}

// toolOutcome is the answer of a tool call that ran: completed with its
// result, or failed with its error.
func toolOutcome() schema {
	return object([]string{"status"}, schema{"status": schema{"enum": []string{"completed", "failed"}},
		"result": schema{}, "error": str()})
}

// htmlContent is a page's Content Object (the decision links' pages).
var htmlContent = schema{"text/html": schema{"schema": str()}}

// linksOperation is POST /v1/tool-calls/{id}/links (SPEC §11.4).
func linksOperation() operation {
	links := object(nil, schema{"ttl": schema{"type": "string",
		"description": `a positive Go duration of at most ` + agentd.MaxLinkTTL.String() + `; default ` + agentd.DefaultLinkTTL.String() + `; the links never outlive the call's deadline`}})
	return operation{method: http.MethodPost, path: "/v1/tool-calls/{id}/links", id: "mintDecisionLinks",
		summary: "Single-use approve and deny URLs of a parked call (docs/governance.md#decision-links)",
		body:    links, status: http.StatusOK, content: jsonContent(ref("DecisionLinks"))}
}

// rememberSchema is an approval's remember (SPEC §11.2).
func rememberSchema() schema {
	cond := object(nil, schema{"equals": schema{}, "one_of": schema{"type": "array", "minItems": 1},
		"min": schema{"type": "number"}, "max": schema{"type": "number"}})
	return object([]string{"scope"}, schema{
		"scope": schema{"type": "string", "enum": []string{agentd.GrantConversation, agentd.GrantProject}},
		"ttl":   schema{"type": "string", "description": `a positive Go duration such as "8h", at most the call's grant_max_ttl`},
		"match": schema{"oneOf": []schema{{"type": "string", "enum": []string{agentd.GrantMatchExact, agentd.GrantMatchAny}},
			{"type": "object", "minProperties": 1, "additionalProperties": cond}}},
	})
}
