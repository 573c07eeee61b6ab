package main

import (
	"os"
	"testing"

	"github.com/agentd-dev/agentd/internal/mcptest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// TestMain removes the agentd binary the process tests built, and the MCP
// test server.
func TestMain(m *testing.M) {
	code := m.Run()
	replicas.RemoveBinary()
	mcptest.Remove()
	os.Exit(code)
}
