package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/agentd-dev/agentd"
	"github.com/labstack/echo/v4"
)

// The API's own OpenAPI 3.1 document, served at GET /v1/openapi.json
// (docs/api.md#the-openapi-document). It is built once from the Go types
// the handlers decode and encode (openapi_schema.go), the error table
// (statusOf) and the event payload types, so that each fact lives in one
// place; what the Go types cannot say (paths, parameters, which fields a
// handler requires) is written here once. The tests check it both ways
// against the router and validate the end-to-end tests' exchanges with it.

// openAPIVersion is the info.version of the document: the API's version,
// not the server's (the routes are all /v1).
const openAPIVersion = "1"

var (
	openAPIOnce sync.Once
	openAPIJSON []byte
)

// OpenAPIDocument is the document's JSON.
func OpenAPIDocument() []byte {
	openAPIOnce.Do(func() {
		b, err := json.MarshalIndent(buildOpenAPI(), "", "  ")
		if err != nil {
			panic("api: openapi: " + err.Error())
		}
		openAPIJSON = b
	})
	return openAPIJSON
}

// handleOpenAPI serves the document to anyone: it describes the API and
// holds nothing of any tenant, like the probes.
func (s *Server) handleOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, OpenAPIDocument())
}

// operation is what the document says of one method on one path.
type operation struct {
	method, path, id, summary string
	public                    bool     // no key needed
	tokenInQuery              bool     // ?access_token= too (the SSE stream)
	contextToken              bool     // the context token, not an API key (/v1/context/*)
	params                    []schema // Parameter Objects
	body                      schema   // the request body's schema, nil for none
	bodyRequired              bool
	form                      schema // a form body's schema (application/x-www-form-urlencoded), nil for none
	status                    int    // the success status
	content                   schema // the success response's Content Object, nil for none
	headers                   schema // the success response's headers
	noContent                 string // when set, a 204 the route may answer instead, and why
}

func buildOpenAPI() schema {
	paths := schema{}
	for _, op := range operations() {
		item, _ := paths[op.path].(schema)
		if item == nil {
			item = schema{}
			paths[op.path] = item
		}
		item[lower(op.method)] = op.object()
	}
	return schema{
		"openapi": "3.1.0",
		"info": schema{"title": "agentd HTTP API", "version": openAPIVersion,
			"description": "The HTTP API of agentd: conversations, runs, tool calls and their approvals, the event stream, " +
				"the chat protocols, audit and webhooks. docs/api.md is the prose; this document is generated from the server's types."},
		"security": []any{schema{"bearer": []string{}}},
		"paths":    paths,
		"components": schema{
			"schemas":         componentSchemas(),
			"responses":       errorComponents(),
			"securitySchemes": securitySchemes(),
		},
	}
}

func lower(m string) string {
	b := []byte(m)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func securitySchemes() schema {
	return schema{
		"bearer": schema{"type": "http", "scheme": "bearer",
			"description": "An API key of agentd.json api_keys (stored there as its SHA-256). In dev mode (no keys configured) " +
				"every request is the admin key \"dev\" and no header is needed."},
		"accessToken": schema{"type": "apiKey", "in": "query", "name": "access_token",
			"description": "The same API key, for the event stream only (EventSource cannot set headers)."},
		"contextToken": schema{"type": "http", "scheme": "bearer",
			"description": "AGENTD_CONTEXT_TOKEN (agentd_ctx_…): the token a command tool's call gets in its environment, valid only " +
				"while that call runs and only on /v1/context/*; not an API key, and API keys are not accepted there (docs/runtime.md)."},
	}
}

// object is the Operation Object of op.
func (op operation) object() schema {
	o := schema{"operationId": op.id, "summary": op.summary, "responses": op.responses()}
	switch {
	case op.public:
		o["security"] = []any{}
	case op.contextToken:
		o["security"] = []any{schema{"contextToken": []string{}}}
	case op.tokenInQuery:
		o["security"] = []any{schema{"bearer": []string{}}, schema{"accessToken": []string{}}}
	}
	params := op.params
	for _, name := range pathParams(op.path) {
		params = append(params, schema{"name": name, "in": "path", "required": true, "schema": schema{"type": "string"}})
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	if op.body != nil {
		o["requestBody"] = schema{"required": op.bodyRequired, "content": jsonContent(op.body),
			"description": "JSON, read by the strict decoder (docs/api.md#limits-and-decoding) whatever the Content-Type says."}
	}
	if op.form != nil {
		o["requestBody"] = schema{"required": false, "content": schema{echo.MIMEApplicationForm: schema{"schema": op.form}}}
	}
	return o
}

// pathParams are the {names} of an OpenAPI path.
func pathParams(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '{' {
			j := i + 1
			for j < len(p) && p[j] != '}' {
				j++
			}
			out = append(out, p[i+1:j])
			i = j
		}
	}
	return out
}

func (op operation) responses() schema {
	ok := schema{"description": http.StatusText(op.status)}
	if op.content != nil {
		ok["content"] = op.content
	}
	if op.headers != nil {
		ok["headers"] = op.headers
	}
	r := schema{}
	for status := range errorResponses() {
		r[status] = schema{"$ref": "#/components/responses/" + errorResponseName(status)}
	}
	r[strconv.Itoa(op.status)] = ok
	if op.noContent != "" {
		r[strconv.Itoa(http.StatusNoContent)] = schema{"description": op.noContent}
	}
	return r
}

// errorResponseName is the name of the error response of a status.
func errorResponseName(status string) string { return "Error" + status }

// errorComponents are errorResponses by errorResponseName.
func errorComponents() schema {
	c := schema{}
	for status, r := range errorResponses() {
		c[errorResponseName(status)] = r
	}
	return c
}

// errorResponses is one response per status of statusOf, each naming the
// codes that have that status: every route may answer any of them (a
// foreign Origin is 403 and a wrong method 405 on every route, a body too
// large 413 wherever there is one, and so on).
func errorResponses() schema {
	codes := map[int][]string{}
	for code, status := range statusOf {
		codes[status] = append(codes[status], code)
	}
	r := schema{}
	for status, cs := range codes {
		slices.Sort(cs)
		s := errorSchema(cs)
		resp := schema{"description": http.StatusText(status), "content": jsonContent(s)}
		switch status {
		case http.StatusMethodNotAllowed:
			resp["headers"] = schema{"Allow": schema{"description": "the methods the path serves", "schema": schema{"type": "string"}}}
		case http.StatusTooManyRequests:
			resp["headers"] = schema{"Retry-After": schema{"description": "seconds", "schema": schema{"type": "integer"}}}
		case http.StatusUnauthorized:
			resp["headers"] = schema{"WWW-Authenticate": schema{"schema": schema{"type": "string"}}}
		}
		r[strconv.Itoa(status)] = resp
	}
	return r
}

// errorSchema is errorBody's schema with its code one of codes.
func errorSchema(codes []string) schema {
	s := schemaFor(reflect.TypeFor[errorBody](), modeResponse)
	inner := s["properties"].(schema)["error"].(schema)
	inner["properties"].(schema)["code"] = schema{"type": "string", "enum": codes}
	return s
}

func jsonContent(s schema) schema {
	return schema{echo.MIMEApplicationJSON: schema{"schema": s}}
}

func ref(name string) schema { return schema{"$ref": "#/components/schemas/" + name} }

// responseOf is the schema of t as a response.
func responseOf[T any]() schema { return schemaFor(reflect.TypeFor[T](), modeResponse) }

// page is a list response: {field: [item…], next_cursor}.
func page(field string, item schema) schema {
	return schema{"type": "object", "additionalProperties": false, "required": []string{field, "next_cursor"},
		"properties": schema{field: schema{"type": "array", "items": item},
			"next_cursor": schema{"type": "string", "description": "the cursor of the next page; empty on the last"}}}
}

// componentSchemas are the named schemas: the API's objects, the error
// and every event type of the stream.
func componentSchemas() schema {
	c := schema{
		"Error":               errorSchema(sortedCodes()),
		"Conversation":        responseOf[agentd.Conversation](),
		"ConversationDetail":  responseOf[conversationView](),
		"Run":                 responseOf[agentd.Run](),
		"ToolCall":            responseOf[agentd.ToolCall](),
		"ListedToolCall":      responseOf[listedCall](),
		"Decision":            responseOf[agentd.Decision](),
		"BatchDecisionResult": responseOf[agentd.BatchDecisionResult](),
		"AuditEntry":          responseOf[agentd.AuditEntry](),
		"Grant":               responseOf[agentd.Grant](),
		"Input":               responseOf[agentd.Input](),
		"Tool":                responseOf[toolView](),
		"WebhookDelivery":     responseOf[agentd.WebhookDelivery](),
		"WebhookEndpoint":     responseOf[agentd.WebhookEndpoint](),
		"DecisionLinks":       responseOf[agentd.DecisionLinks](),
	}
	var events []any
	mapping := schema{}
	for _, typ := range eventTypes {
		name := eventSchemaName(typ)
		c[name] = eventSchema(typ)
		events = append(events, ref(name))
		mapping[typ] = "#/components/schemas/" + name
	}
	c["Event"] = schema{"description": "The data of one event of the stream (SPEC §6): its type names its schema.",
		"oneOf": events, "discriminator": schema{"propertyName": "type", "mapping": mapping}}
	return c
}

func sortedCodes() []string {
	var cs []string
	for code := range statusOf {
		cs = append(cs, code)
	}
	slices.Sort(cs)
	return cs
}

// eventTypes are the event types of the log (SPEC §6).
var eventTypes = []string{agentd.EventRunStarted, agentd.EventTextDelta, agentd.EventMessage,
	agentd.EventToolCallStarted, agentd.EventConfirmationRequired, agentd.EventConfirmationResolved, agentd.EventConfirmationProgress,
	agentd.EventConfirmationReminder, agentd.EventConfirmationExtended,
	agentd.EventToolCallRefused, agentd.EventToolCallResult, agentd.EventRunWaiting, agentd.EventRunFinished,
	agentd.EventError, agentd.EventSubagentEvent, agentd.EventGrantCreated, agentd.EventGrantRevoked,
	agentd.EventInputRequired, agentd.EventInputResolved}

// eventSchemaName is run_started → RunStartedEvent.
func eventSchemaName(typ string) string {
	b := []byte{}
	up := true
	for _, c := range []byte(typ) {
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b, up = append(b, c-'a'+'A'), false
		default:
			b = append(b, c)
		}
	}
	return string(b) + "Event"
}

// eventSchema is the schema of an event type's data, from its payload type
// (agentd.DecodeEvent makes one): "type" is the event's type.
func eventSchema(typ string) schema {
	p, err := agentd.DecodeEvent(agentd.Event{Type: typ, Data: []byte(`{"type":"` + typ + `"}`)})
	if err != nil {
		panic("api: openapi: " + err.Error())
	}
	s := schemaFor(reflect.TypeOf(p).Elem(), modeResponse)
	s["properties"].(schema)["type"] = schema{"const": typ}
	return s
}

// sseContent is the Content Object of an event stream.
func sseContent(desc string) schema {
	return schema{"text/event-stream": schema{"schema": schema{"type": "string", "description": desc}}}
}

// protocolBody is an open request body (the chat protocols').
func protocolBody[T any]() schema { return schemaFor(reflect.TypeFor[T](), modeOpenRequest) }

// requestBody is a strict request body with its required fields.
func requestBody[T any](required ...string) schema {
	s := schemaFor(reflect.TypeFor[T](), modeRequest)
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}
