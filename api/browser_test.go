package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// TestBrowsersDevMode: a keyless server refuses pages of other sites (403,
// nothing done) and DNS-rebound Host names (421), and answers CORS only for
// cors_origins.
func TestBrowsersDevMode(t *testing.T) {
	s := newServer(t, nil, api.Config{CORSOrigins: []string{"https://chat.example.com"}})
	conv := s.createConversation("")
	send := "/v1/conversations/" + conv + "/messages"
	plain := map[string]string{"Content-Type": "text/plain"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	for _, o := range []string{"https://evil.example", "http://127.0.0.1.evil.example", "null", "http://localhost:1", "https://chat.example.com:8443"} {
		r := s.do("POST", send, "", `{"content":"pay"}`, with(plain, "Origin", o))
		want(t, "cross-site POST from "+o, r, http.StatusForbidden, agentd.EFORBIDDEN)
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("foreign origin %s got Access-Control-Allow-Origin", o)
		}
	}
	if r := s.do("GET", "/v1/conversations/"+conv, "", "", nil); !strings.Contains(r.body, `"messages":[]`) {
		t.Fatalf("a refused cross-site POST started a run: %s", r.body)
	}
	for _, h := range []string{"evil.example", "evil.example:80", "127.0.0.1.nip.io", "192.168.1.10:8787"} {
		want(t, "Host "+h, s.do("GET", "/v1/conversations/"+conv, "", "", map[string]string{"Host": h}), http.StatusMisdirectedRequest, agentd.EMISDIRECTED)
		want(t, "POST with Host "+h, s.do("POST", send, "", `{"content":"pay"}`, with(plain, "Host", h)), http.StatusMisdirectedRequest, agentd.EMISDIRECTED)
	}
	for _, h := range []string{"localhost", "localhost:8787", "app.localhost:1", "[::1]:8787", "127.0.0.2"} {
		want(t, "Host "+h, s.do("GET", "/v1/conversations/"+conv, "", "", map[string]string{"Host": h}), http.StatusOK, "")
	}

	// The server's own origin (the page it serves) passes.
	want(t, "own origin", s.do("GET", "/v1/conversations/"+conv, "", "", map[string]string{"Origin": s.url}), http.StatusOK, "")

	// A listed origin: preflight answered, requests carry the CORS header.
	pre := s.do("OPTIONS", send, "", "", map[string]string{"Origin": "https://chat.example.com",
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
	want(t, "preflight", pre, http.StatusNoContent, "")
	if pre.header.Get("Access-Control-Allow-Origin") != "https://chat.example.com" ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight headers: %v", pre.header)
	}
	r := s.do("GET", "/v1/conversations/"+conv, "", "", map[string]string{"Origin": "HTTPS://Chat.Example.com:443"})
	want(t, "listed origin", r, http.StatusOK, "")
	if r.header.Get("Access-Control-Allow-Origin") != "https://chat.example.com" || r.header.Get("Vary") != "Origin" {
		t.Fatalf("listed origin headers: %v", r.header)
	}
	foreign := s.do("OPTIONS", send, "", "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
	want(t, "foreign preflight", foreign, http.StatusForbidden, agentd.EFORBIDDEN)
}

// TestBrowsersWithKeys: with keys, the Host is not checked (keys are), but
// foreign origins still are.
func TestBrowsersWithKeys(t *testing.T) {
	s := newServer(t, []testKey{{key: "k-op", id: "op", tenant: "t1", project: "p1", role: agentd.RoleOperator}}, api.Config{})
	want(t, "public Host", s.do("POST", "/v1/conversations", "k-op", "", map[string]string{"Host": "agentd.example.com"}), http.StatusCreated, "")
	want(t, "own origin behind TLS", s.do("POST", "/v1/conversations", "k-op", "",
		map[string]string{"Host": "agentd.example.com", "Origin": "https://agentd.example.com"}), http.StatusCreated, "")
	want(t, "foreign origin", s.do("POST", "/v1/conversations", "k-op", "",
		map[string]string{"Host": "agentd.example.com", "Origin": "https://evil.example"}), http.StatusForbidden, agentd.EFORBIDDEN)
}

// TestWebPageAndCORS: the web chat's page and module are served behind the
// same browser guard (a DNS-rebound Host gets 421), with their security
// headers; for a listed origin, a 401 carries the CORS header so that an
// embedding page can read it and ask for a key.
func TestWebPageAndCORS(t *testing.T) {
	s := newServer(t, nil, api.Config{CORSOrigins: []string{"https://shop.example"}})
	for _, p := range []string{"/", "/agentd.js", "/agentd.css"} {
		r := s.do("GET", p, "", "", nil)
		want(t, "GET "+p, r, http.StatusOK, "")
		if r.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(r.header.Get("Content-Security-Policy"), "connect-src 'self'") {
			t.Errorf("GET %s headers: %v", p, r.header)
		}
		want(t, "GET "+p+" rebound", s.do("GET", p, "", "", map[string]string{"Host": "evil.example"}), http.StatusMisdirectedRequest, agentd.EMISDIRECTED)
	}
	if r := s.do("GET", "/agentd.js", "", "", map[string]string{"Origin": "https://evil.example"}); r.status != http.StatusForbidden {
		t.Errorf("the module for an unlisted origin: %d, want 403", r.status)
	}
	// The stream from a listed origin is covered in a real browser
	// (cmd/agentd TestWebChatInBrowser, acceptance 4).

	k := newServer(t, []testKey{{key: "k-c", id: "c", tenant: "t1", project: "p1", role: agentd.RoleClient}}, api.Config{CORSOrigins: []string{"https://shop.example"}})
	r := k.do("GET", "/v1/tools", "", "", map[string]string{"Origin": "https://shop.example"})
	want(t, "no key from a listed origin", r, http.StatusUnauthorized, agentd.EUNAUTHORIZED)
	if r.header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Errorf("a 401 to a listed origin lacks Access-Control-Allow-Origin: %v", r.header)
	}
	want(t, "the page needs no key", k.do("GET", "/", "", "", nil), http.StatusOK, "")
}

// TestAPIResponsesNoSniff: every answer of the API — JSON, errors of any
// kind, the probes — carries "X-Content-Type-Options: nosniff", as the
// page does, so that no browser reads a JSON body as another type.
func TestAPIResponsesNoSniff(t *testing.T) {
	s := newServer(t, []testKey{{key: "k-op", id: "op", tenant: "t1", project: "p1", role: agentd.RoleOperator}}, api.Config{})
	for _, tt := range []struct {
		name, method, path, key, body string
		header                        map[string]string
		status                        int
	}{
		{"created", "POST", "/v1/conversations", "k-op", "{}", nil, http.StatusCreated},
		{"list", "GET", "/v1/tools", "k-op", "", nil, http.StatusOK},
		{"bad json", "POST", "/v1/conversations", "k-op", "{", nil, http.StatusBadRequest},
		{"no key", "GET", "/v1/tools", "", "", nil, http.StatusUnauthorized},
		{"unknown call", "GET", "/v1/tool-calls/call_01a23125-6d10-7a01-8c3e-3f0b2c9d1e77", "k-op", "", nil, http.StatusNotFound},
		{"unknown path", "GET", "/v1/nope", "k-op", "", nil, http.StatusNotFound},
		{"wrong method", "DELETE", "/v1/tools", "k-op", "", nil, http.StatusMethodNotAllowed},
		{"foreign origin", "POST", "/v1/conversations", "k-op", "{}", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"healthz", "GET", "/healthz", "", "", nil, http.StatusOK},
	} {
		r := s.do(tt.method, tt.path, tt.key, tt.body, tt.header)
		if r.status != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, r.status, tt.status, r.body)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", tt.name, got)
		}
	}
}
