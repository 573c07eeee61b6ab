package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// headerSeen records the Authorization headers a server got.
type headerSeen struct {
	mu   sync.Mutex
	auth []string
}

func (h *headerSeen) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headerSeen) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auth...)
}

// redirector answers every request with a 307 to target (the same path).
func redirector(t *testing.T, target func(*http.Request) string) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target(r), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func startCRM(t *testing.T, u string) (*Server, error) {
	t.Helper()
	cfg := fmt.Sprintf(`{"servers": [{"id": "crm", "url": %q, "headers_env": {"Authorization": "CRM_AUTH"}}]}`, u)
	c, err := Parse([]byte(cfg), t.TempDir(), func(string) string { return "Bearer s3cret" })
	if err != nil {
		t.Fatal(err)
	}
	s := NewServers(c, zerolog.Nop())[0]
	t.Cleanup(s.Close)
	return s, s.Start(context.Background())
}

// A redirect to another origin (another port of loopback: another origin)
// is refused before anything is sent there, so mcp.json's headers never
// reach it; the server is reported down with why.
func TestRedirectToAnotherOrigin(t *testing.T) {
	var seen headerSeen
	h, _ := mcpHandler(t, "s3cret") // would accept the header and work
	target := httptest.NewServer(seen.wrap(h))
	t.Cleanup(target.Close)
	from := redirector(t, func(r *http.Request) string { return target.URL + r.URL.Path })
	s, err := startCRM(t, from.URL+"/mcp")
	if err == nil || !strings.Contains(err.Error(), "redirect to another origin (http://"+strings.TrimPrefix(target.URL, "http://")+") was refused") {
		t.Fatalf("Start = %v", err)
	}
	if got := seen.got(); len(got) != 0 {
		t.Errorf("the other origin got %d requests, with Authorization %q", len(got), got)
	}
	if st := s.Status(); st.State != StateStarting || !strings.Contains(st.Error, "was refused") || len(st.Tools) != 0 {
		t.Errorf("status = %+v", st)
	}
}

// A redirect on the server's own origin is followed, with the headers.
func TestRedirectOnTheSameOrigin(t *testing.T) {
	inner, _ := mcpHandler(t, "s3cret")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s, err := startCRM(t, ts.URL+"/old")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := call(s, context.Background(), "crm__lookup", `{"q": "a"}`); err != nil || !strings.HasPrefix(got, "found a") {
		t.Errorf("lookup through a same-origin redirect = %q, %v", got, err)
	}
}

// The redirect policy: the origin only, and a bounded number of hops.
func TestSameOrigin(t *testing.T) {
	check := sameOrigin("http://127.0.0.1:8080/mcp")
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	via := func(n int) []*http.Request { return make([]*http.Request, n) }
	if err := check(req("http://127.0.0.1:8080/other"), via(1)); err != nil {
		t.Errorf("same origin: %v", err)
	}
	if err := check(req("http://127.0.0.1:8080/other"), via(maxRedirects)); err != nil {
		t.Errorf("redirect %d: %v", maxRedirects, err)
	}
	if err := check(req("http://127.0.0.1:8080/other"), via(maxRedirects+1)); err == nil {
		t.Error("too many redirects followed")
	}
	for _, u := range []string{"http://127.0.0.1:8081/mcp", "https://127.0.0.1:8080/mcp", "http://localhost:8080/mcp"} {
		if err := check(req(u), via(1)); err == nil || !strings.Contains(err.Error(), "was refused") {
			t.Errorf("redirect to %s: %v", u, err)
		}
	}
	if err := sameOrigin("::bad")(req("http://127.0.0.1:8080/"), via(1)); err == nil {
		t.Error("a redirect followed from an endpoint that is no URL")
	}
}
