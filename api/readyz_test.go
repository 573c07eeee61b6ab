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
