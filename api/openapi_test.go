package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
	"github.com/getkin/kin-openapi/openapi3"
)

// loadOpenAPI is the served document as kin-openapi loads it.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument())
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	return doc
}

// TestOpenAPIDocumentValid: the document is a valid OpenAPI 3.1 document,
// with the security scheme, the error shape and every event type.
func TestOpenAPIDocumentValid(t *testing.T) {
	doc := loadOpenAPI(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	if s := doc.Components.SecuritySchemes["bearer"]; s == nil || s.Value.Scheme != "bearer" {
		t.Errorf("no bearer security scheme: %+v", doc.Components.SecuritySchemes)
	}
	events := doc.Components.Schemas["Event"].Value
	if len(events.OneOf) != len(eventTypes) {
		t.Errorf("Event has %d schemas, want %d", len(events.OneOf), len(eventTypes))
	}
	// Every code of the error table is in the Error schema, under the
	// status the table gives it, on every operation.
	for code, status := range statusOf {
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				r := op.Responses.Status(status)
				if r == nil {
					t.Fatalf("%s %s: no %d response", method, path, status)
				}
				codes := r.Value.Content.Get("application/json").Schema.Value.Properties["error"].Value.Properties["code"].Value.Enum
				if !slices.Contains(codes, any(code)) {
					t.Errorf("%s %s: %d does not list %s: %v", method, path, status, code, codes)
				}
			}
		}
	}
}

// documentedRoutes are the document's operations as "METHOD /path/:param".
func documentedRoutes(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		echoPath := path
		for _, p := range pathParams(path) {
			echoPath = strings.Replace(echoPath, "{"+p+"}", ":"+p, 1)
		}
		for method := range item.Operations() {
			out = append(out, method+" "+echoPath)
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIMatchesRoutes: every route the router has is in the document
// and every operation of the document is a route — read from the router,
// every route whatever registered it (the API's, the probes, the web
// chat's page and files, the decision links' pages), so that a route
// added later without its description fails here.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	hub := sse.NewHub()
	defer hub.Close()
	s := New(nil, hub, nil, Config{Metrics: http.NotFoundHandler()})
	var served []string
	for _, r := range s.echo.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	for _, want := range []string{"GET /", "GET /agentd.js", "HEAD /"} {
		if !slices.Contains(served, want) {
			t.Fatalf("the router does not list %s: %v", want, served)
		}
	}
	sort.Strings(served)
	documented := documentedRoutes(loadOpenAPI(t))
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("the OpenAPI document describes %s, which is not served", r)
		}
	}
	if len(served) < 20 {
		t.Fatalf("only %d routes: %v", len(served), served)
	}
}

// TestOpenAPIEventGoldens: every golden event of testdata/events is valid
// against the schema of its type, and the same event without one of its
// required fields, or with an unknown one, is not.
func TestOpenAPIEventGoldens(t *testing.T) {
	doc := loadOpenAPI(t)
	files, err := filepath.Glob("../testdata/events/*.json")
	if err != nil || len(files) < len(eventTypes) {
		t.Fatalf("goldens: %v %v", files, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		typ, _ := v["type"].(string)
		seen[typ] = true
		ref := doc.Components.Schemas[eventSchemaName(typ)]
		if ref == nil {
			t.Errorf("%s: no schema for event type %q", f, typ)
			continue
		}
		s := ref.Value
		if err := s.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s does not match %s: %v", filepath.Base(f), eventSchemaName(typ), err)
		}
		// Through the Event union too.
		if err := doc.Components.Schemas["Event"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s does not match Event: %v", filepath.Base(f), err)
		}
		for _, req := range s.Required {
			w := cloneMap(v)
			delete(w, req)
			if s.VisitJSON(w, openapi3.EnableJSONSchema2020()) == nil {
				t.Errorf("%s without %q still matches its schema", filepath.Base(f), req)
			}
		}
		w := cloneMap(v)
		w["surprise"] = 1
		if s.VisitJSON(w, openapi3.EnableJSONSchema2020()) == nil {
			t.Errorf("%s with an unknown field still matches its schema", filepath.Base(f))
		}
	}
	for _, typ := range eventTypes {
		if !seen[typ] {
			t.Errorf("no golden of event type %s", typ)
		}
	}
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestOpenAPIServed: GET /v1/openapi.json answers the document to anyone,
// with keys configured and none sent, under the same browser rules as
// every route (a foreign Origin is 403).
func TestOpenAPIServed(t *testing.T) {
	hub := sse.NewHub()
	defer hub.Close()
	key := agentd.APIKey{ID: "op", SHA256: strings.Repeat("a", 64), TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator}
	s := New(nil, hub, nil, Config{Keys: []agentd.APIKey{key}})
	get := func(origin string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec
	}
	rec := get("")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/openapi.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !bytes.Equal(rec.Body.Bytes(), OpenAPIDocument()) {
		t.Fatal("the served document is not OpenAPIDocument()")
	}
	if rec := get("https://evil.example"); rec.Code != http.StatusForbidden {
		t.Errorf("foreign Origin: %d, want 403", rec.Code)
	}
}
