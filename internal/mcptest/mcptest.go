// Package mcptest builds the MCP test server — mcp/testdata/server, the
// MCP SDK's own server with the tools of mcp/internal/testserver — for the
// tests of package mcp, cmd/agentd and bench: once per test process, into
// a temporary folder that Remove deletes. Only test files import it
// (TestImportRules).
package mcptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// Remove deletes the server Build built, if any; call it from TestMain
// after m.Run.
func Remove() {
	if path != "" {
		os.RemoveAll(filepath.Dir(path))
	}
}
