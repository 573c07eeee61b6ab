package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// TestWrongMethodOnEveryRoute: every route the server registers, the
// authenticated /v1 ones included, answers a method it does not serve with
// 405 method_not_allowed and an Allow header naming the methods it does —
// never 404, with or without API keys, authenticated or not. The routes
// come from the router itself, so a route added later is covered too.
func TestWrongMethodOnEveryRoute(t *testing.T) {
	sum := sha256.Sum256([]byte("k-op"))
	key := agentd.APIKey{ID: "op", SHA256: hex.EncodeToString(sum[:]), TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator}
	for _, tc := range []struct {
		name string
		keys []agentd.APIKey
		auth string
	}{{"dev mode", nil, ""}, {"keys, none sent", []agentd.APIKey{key}, ""}, {"keys, one sent", []agentd.APIKey{key}, "Bearer k-op"}} {
		t.Run(tc.name, func(t *testing.T) {
			hub := sse.NewHub()
			defer hub.Close()
			s := New(nil, hub, nil, Config{Keys: tc.keys, Metrics: http.NotFoundHandler()})
			served := map[string][]string{}
			for _, r := range s.echo.Routes() {
				served[r.Path] = append(served[r.Path], r.Method)
			}
			if len(served) < 20 {
				t.Fatalf("only %d routes: %v", len(served), served)
			}
			for path, methods := range served {
				url := routePath(path)
				for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
					if slices.Contains(methods, m) {
						continue
					}
					req := httptest.NewRequest(m, url, nil)
					req.Host = "127.0.0.1:8080"
					if tc.auth != "" {
						req.Header.Set("Authorization", tc.auth)
					}
					rec := httptest.NewRecorder()
					s.Handler().ServeHTTP(rec, req)
					var body errorBody
					_ = json.Unmarshal(rec.Body.Bytes(), &body)
					if rec.Code != http.StatusMethodNotAllowed || body.Error.Code != agentd.EMETHODNOTALLOWED {
						t.Errorf("%s %s (route %s): %d %s, want 405 %s", m, url, path, rec.Code, rec.Body, agentd.EMETHODNOTALLOWED)
						continue
					}
					allow := rec.Header().Get("Allow")
					for _, want := range methods {
						if !strings.Contains(allow, want) {
							t.Errorf("%s %s: Allow %q does not name %s", m, url, allow, want)
						}
					}
				}
			}
		})
	}
}

// routePath is a request path for the route path p: each :param is "x".
func routePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "x"
		}
	}
	return strings.Join(parts, "/")
}
