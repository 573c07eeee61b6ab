// Package mcptest builds the MCP test server — mcp/testdata/server, the
// MCP SDK's own server with the tools of mcp/internal/testserver — for the
// tests of package mcp, cmd/agentd and bench: once per test process, into
// a temporary folder that Remove deletes; StartHTTP runs it as a
// streamable HTTP server. Only test files import it
// (TestImportRules).
package mcptest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Build builds the server once per process and returns its path; later
// calls return the same path (or the same error).
func Build() (string, error) {
	once.Do(func() {
		goBin, lookErr := exec.LookPath("go")
		if lookErr != nil {
			err = fmt.Errorf("the go command is needed to build the MCP test server: %w", lookErr)
			return
		}
		dir, tmpErr := os.MkdirTemp("", "agentd-mcp-")
		if tmpErr != nil {
			err = tmpErr
			return
		}
		out := filepath.Join(dir, "server")
		cmd := exec.Command(goBin, "build", "-o", out, "github.com/agentd-dev/agentd/mcp/testdata/server")
		if b, buildErr := cmd.CombinedOutput(); buildErr != nil {
			err = fmt.Errorf("go build mcp/testdata/server: %v\n%s", buildErr, b)
			return
		}
		path = out
	})
	return path, err
}

// Server is Build for a test: its failure fails tb.
func Server(tb testing.TB) string {
	tb.Helper()
	p, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Token is the bearer token StartHTTP's server requires.
const Token = "s3cret"

// StartHTTP starts the server in HTTP mode on addr ("127.0.0.1:0" picks a
// port), as a real subprocess refusing requests without "Bearer "+Token,
// with its notes in the file notes; it returns the server's MCP endpoint
// and process (killed when the test ends).
func StartHTTP(tb testing.TB, addr, notes string) (string, *os.Process) {
	tb.Helper()
	cmd := exec.Command(Server(tb), "-http", addr)
	cmd.Env = append(os.Environ(), "MCP_TOKEN="+Token, "NOTES_FILE="+notes)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // stderr is complete
		tb.Fatalf("the MCP test server did not start on %s: %q %v\n%s", addr, line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on ")) + "/mcp", cmd.Process
}

// Remove deletes the server Build built, if any; call it from TestMain
// after m.Run.
func Remove() {
	if path != "" {
		os.RemoveAll(filepath.Dir(path))
	}
}
