package main

import (
	"bufio"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// The same over streamable HTTP: the test server in HTTP mode is a real
// subprocess on loopback that refuses requests without its bearer token,
// which agentd reads from the environment (headers_env). An entry with a
// wrong token and one without the header are reported in /readyz while the
// rest works; after kill -9 of the server its tools fail cleanly and
// /readyz says it is down; started again on the same port, it is reached
// again without restarting agentd.
func TestMCPEndToEndHTTP(t *testing.T) {
	notes := t.TempDir() + "/notes"
	u := startHTTPMCP(t, "127.0.0.1:0", notes)
	v := mcpVariant{
		servers: []map[string]any{
			{"id": "notes", "url": u, "headers_env": map[string]string{"Authorization": "NOTES_MCP_AUTH"}, "timeout_ms": 10000},
			{"id": "wrongauth", "url": u, "headers_env": map[string]string{"Authorization": "WRONG_MCP_AUTH"}},
			{"id": "noauth", "url": u},
		},
		env:    []string{"NOTES_MCP_AUTH=Bearer s3cret", "WRONG_MCP_AUTH=Bearer nope"},
		broken: map[string]string{"wrongauth": "Unauthorized", "noauth": "Unauthorized"},
		restart: func(t *testing.T) {
			parsed, err := url.Parse(u)
			must(t, err)
			if again := startHTTPMCP(t, parsed.Host, notes); again != u {
				t.Fatalf("the server came back at %s, not %s", again, u)
			}
		},
	}
	v.notes = notes
	testMCPEndToEnd(t, v)
}

// startHTTPMCP starts the MCP test server in HTTP mode on addr, with the
// token s3cret and notes in the given file, and returns its endpoint.
func startHTTPMCP(t *testing.T, addr, notes string) string {
	t.Helper()
	cmd := exec.Command(mcpTestServer(t), "-http", addr)
	cmd.Env = append(os.Environ(), "MCP_TOKEN=s3cret", "NOTES_FILE="+notes)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("the MCP test server did not start on %s: %q %v\n%s", addr, line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on ")) + "/mcp"
}
