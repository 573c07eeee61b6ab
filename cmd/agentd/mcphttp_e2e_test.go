package main

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/internal/mcptest"
)

// The same over streamable HTTP: the test server in HTTP mode is a real
// subprocess on loopback that refuses requests without its bearer token,
// which agentd reads from the environment (headers_env). An entry with a
// wrong token and one without the header are reported in /readyz while the
// rest works; after kill -9 of the server its tools fail cleanly and
// /readyz says it is down; started again on the same port, it is reached
// again without restarting agentd.
func TestMCPEndToEndHTTP(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes")
	u, proc := mcptest.StartHTTP(t, "127.0.0.1:0", notes)
	v := mcpVariant{
		servers: []map[string]any{
			{"id": "notes", "url": u, "headers_env": map[string]string{"Authorization": "NOTES_MCP_AUTH"}, "timeout_ms": 10000},
			{"id": "wrongauth", "url": u, "headers_env": map[string]string{"Authorization": "WRONG_MCP_AUTH"}},
			{"id": "noauth", "url": u},
		},
		env:    []string{"NOTES_MCP_AUTH=Bearer " + mcptest.Token, "WRONG_MCP_AUTH=Bearer nope"},
		broken: map[string]string{"wrongauth": "Unauthorized", "noauth": "Unauthorized"},
		restart: func(t *testing.T) {
			_, _ = proc.Wait() // killed: its port is free once it is gone
			parsed, err := url.Parse(u)
			must(t, err)
			if again, _ := mcptest.StartHTTP(t, parsed.Host, notes); again != u {
				t.Fatalf("the server came back at %s, not %s", again, u)
			}
		},
	}
	v.notes = notes
	testMCPEndToEnd(t, v)
}
