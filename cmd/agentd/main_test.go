package main

import (
	"os"
	"testing"

	"github.com/agentd-dev/agentd/internal/replicas"
)

// TestMain removes the agentd binary the process tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	replicas.RemoveBinary()
	os.Exit(code)
}
