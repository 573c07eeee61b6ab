package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// TestReadyzAsksTheStore: /readyz is 503 unavailable while the store's
// Ping fails, without the store's error, and ready once it answers.
func TestReadyzAsksTheStore(t *testing.T) {
	store := newFakeStore()
	s := serve(t, newFake(store), store, nil, api.Config{})
	store.mu.Lock()
	store.down = errors.New("disk on fire at /var/lib/agentd")
	store.mu.Unlock()
	r := s.do("GET", "/readyz", "", "", nil)
	want(t, "store down", r, http.StatusServiceUnavailable, agentd.EUNAVAILABLE)
	if strings.Contains(r.body, "disk") {
		t.Errorf("/readyz shows the store's error: %s", r.body)
	}
	store.mu.Lock()
	store.down = nil
	store.mu.Unlock()
	want(t, "store up", s.do("GET", "/readyz", "", "", nil), http.StatusOK, "")
}

// TestReadyzDetailsPerTenant: the MCP servers' details are asked for the
// tenant of the operator or admin key that reads them, and a client key,
// a delegate key, a bad key and no key get the status alone.
func TestReadyzDetailsPerTenant(t *testing.T) {
	s, _ := newFakeServer(t, roleKeys, api.Config{MCPServers: func(tenantID string) any { return []string{"servers of " + tenantID} }})
	for key, wantBody := range map[string]string{
		"k-op":    `{"mcp_servers":["servers of t1"],"status":"ready"}`,
		"k-admin": `{"mcp_servers":["servers of t1"],"status":"ready"}`,
		"k-other": `{"mcp_servers":["servers of t2"],"status":"ready"}`,
		"k-alice": `{"status":"ready"}`,
		"k-robot": `{"status":"ready"}`,
		"k-wrong": `{"status":"ready"}`,
		"":        `{"status":"ready"}`,
	} {
		r := s.do("GET", "/readyz", key, "", nil)
		if r.status != http.StatusOK || strings.TrimSpace(r.body) != wantBody {
			t.Errorf("/readyz as %q = %d %s, want %s", key, r.status, r.body, wantBody)
		}
	}
}
