package api_test

import (
	"net/http"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// TestAuthorization: only "Bearer <key>" of a configured key is accepted
// (the scheme case-insensitively, RFC 9110); ?access_token= only on the stream.
func TestAuthorization(t *testing.T) {
	s := newServer(t, roleKeys, api.Config{})
	for _, tc := range []struct {
		name, header string
		status       int
	}{
		{"bearer", "Bearer k-op", http.StatusCreated},
		{"bearer lower case", "bearer k-op", http.StatusCreated},
		{"basic", "Basic k-op", http.StatusUnauthorized},
		{"token", "Token k-op", http.StatusUnauthorized},
		{"no scheme", "k-op", http.StatusUnauthorized},
		{"scheme only", "Bearer", http.StatusUnauthorized},
		{"empty key", "Bearer ", http.StatusUnauthorized},
		{"unknown key", "Bearer k-nobody", http.StatusUnauthorized},
		{"none", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.header != "" {
				h["Authorization"] = tc.header
			}
			r := s.do("POST", "/v1/conversations", "", "", h)
			if r.status != tc.status {
				t.Fatalf("%q: %d %s, want %d", tc.header, r.status, r.body, tc.status)
			}
			if tc.status == http.StatusUnauthorized && (r.errorCode() != agentd.EUNAUTHORIZED || r.header.Get("WWW-Authenticate") == "") {
				t.Fatalf("%q: %s, WWW-Authenticate %q", tc.header, r.body, r.header.Get("WWW-Authenticate"))
			}
		})
	}
	conv := s.createConversation("k-alice")
	want(t, "access_token off the stream", s.do("GET", "/v1/conversations/"+conv+"?access_token=k-alice", "", "", nil), http.StatusUnauthorized, agentd.EUNAUTHORIZED)
}
