package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/api"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The end-to-end tests talk to the server through openAPICheck: every
// request they send and every response they get is validated against the
// API's own OpenAPI document (api.OpenAPIDocument, GET /v1/openapi.json),
// and an exchange that does not match fails the request with an error, so
// the test fails. A request the document refuses must be refused by the
// server too (a 4xx in the error shape): tests that send bad input on
// purpose check the document as much as the server.

var (
	openAPIOnce   sync.Once
	openAPIRouter routers.Router
	openAPIErr    error
)

func openAPIRoutes() (routers.Router, error) {
	openAPIOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPIDocument())
		if err == nil {
			err = doc.Validate(context.Background())
		}
		if err == nil {
			openAPIRouter, err = legacy.NewRouter(doc)
		}
		openAPIErr = err
	})
	return openAPIRouter, openAPIErr
}

// openAPICheck is a RoundTripper that validates each exchange of base.
type openAPICheck struct{ base http.RoundTripper }

func (c openAPICheck) RoundTrip(req *http.Request) (*http.Response, error) {
	router, err := openAPIRoutes()
	if err != nil {
		return nil, fmt.Errorf("openapi: the document: %w", err)
	}
	var body []byte
	if req.Body != nil {
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := checkExchange(router, req, body, resp); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("openapi: %s %s → %d: %w", req.Method, req.URL.Path, resp.StatusCode, err)
	}
	return resp, nil
}

// checkExchange validates one request and its response; it reads the
// response body (except a stream's) and puts it back.
func checkExchange(router routers.Router, req *http.Request, body []byte, resp *http.Response) error {
	stream := isStream(resp.Header.Get("Content-Type"))
	var respBody []byte
	if !stream {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("read the response: %w", err)
		}
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		respBody = b
	}
	// The request as the server got it, for the validator.
	vreq := req.Clone(req.Context())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > 0 {
		// The server reads every body as JSON whatever its Content-Type
		// (curl -d sends a form's), as the document says.
		vreq.Header.Set("Content-Type", "application/json")
	}
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		return checkUndocumented(req, resp, respBody)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: acceptAuth, ExcludeResponseBody: stream, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	if reqErr := openapi3filter.ValidateRequest(req.Context(), in); reqErr != nil {
		// The document refuses this request: so must the server.
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			return fmt.Errorf("the document refuses the request (%v), the server answered %d", reqErr, resp.StatusCode)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: opts}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		return fmt.Errorf("the response does not match the document: %w\n%s", err, respBody)
	}
	return nil
}

// checkUndocumented: a request to no documented operation under /v1 is a
// preflight or answered with an error in the error shape. Other paths are
// the web chat's files or another server the tests talk to (the demo's
// billing API, a downstream), which the document does not describe.
func checkUndocumented(req *http.Request, resp *http.Response, body []byte) error {
	if !strings.HasPrefix(req.URL.Path, "/v1/") || req.Method == http.MethodOptions {
		return nil
	}
	if resp.StatusCode < 400 {
		return fmt.Errorf("no operation of the document, yet the server answered %d", resp.StatusCode)
	}
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if req.Method != http.MethodHead {
		if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Code == "" {
			return fmt.Errorf("an error answer not in the error shape: %s", body)
		}
	}
	return nil
}

func isStream(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "text/event-stream"
}

// acceptAuth leaves authentication to the server (dev mode needs no key).
func acceptAuth(context.Context, *openapi3filter.AuthenticationInput) error { return nil }

// validatingProxy is a loopback proxy to base that validates every
// exchange as openAPICheck does (for the curl sessions of the docs): a
// mismatch fails t and answers 502.
func validatingProxy(t *testing.T, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	must(t, err)
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     openAPICheck{http.DefaultTransport},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t.Errorf("%v", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOpenAPICheckFails: the check is not vacuous — a response with a field
// the document does not name, or without a required one, or a request the
// document refuses that the server accepts, fails the exchange.
func TestOpenAPICheckFails(t *testing.T) {
	router, err := openAPIRoutes()
	must(t, err)
	run := `{"id":"run_1","conversation_id":"conv_1","tenant_id":"t","project_id":"p","correlation_id":"c","status":"running",` +
		`"step":1,"usage":{"input_tokens":1,"output_tokens":2},"created_at":"2026-12-01T12:00:00Z","updated_at":"2026-12-01T12:00:00Z"}`
	exchange := func(method, path, reqBody string, status int, respBody string) error {
		req := httptest.NewRequest(method, "http://127.0.0.1:1"+path, bytes.NewReader([]byte(reqBody)))
		req.Header.Set("Content-Type", "application/json")
		resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader([]byte(respBody)))}
		return checkExchange(router, req, []byte(reqBody), resp)
	}
	if err := exchange("GET", "/v1/runs/run_1", "", 200, run); err != nil {
		t.Fatalf("a valid run fails: %v", err)
	}
	for name, err := range map[string]error{
		"unknown field":     exchange("GET", "/v1/runs/run_1", "", 200, run[:len(run)-1]+`,"surprise":1}`),
		"no required field": exchange("GET", "/v1/runs/run_1", "", 200, `{"id":"run_1"}`),
		"bad error code":    exchange("GET", "/v1/runs/run_1", "", 404, `{"error":{"code":"conflict","message":"x"}}`),
		"refused request accepted": exchange("POST", "/v1/tool-calls/call_1/approval", `{"decision":"maybe"}`, 200,
			`{"id":"d","tool_call_id":"call_1","decision":"approved","decided_by":"k","arguments_sha256":"x","decided_at":"2026-12-01T12:00:00Z"}`),
		"undocumented route": exchange("GET", "/v1/nope", "", 200, `{}`),
		"null not allowed":   exchange("GET", "/v1/runs/run_1", "", 200, strings.Replace(run, `"step":1`, `"step":null`, 1)),
	} {
		if err == nil {
			t.Errorf("%s: the exchange passed", name)
		}
	}
}
