package loop_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// checkStoreRules is TestImportRules' part about the store: only the
// wiring imports a backend, and only the backends, the contract and the
// wiring name the whole agentd.Store; every other package names the roles
// it uses (store.go).
func checkStoreRules(t *testing.T) {
	const mod = "github.com/agentd-dev/agentd"
	// No non-test package but the wiring — package server, which
	// assembles the server, and cmd/agentd — imports a backend (sqlite,
	// postgres). The rule reads
	// each package's own imports (go list's Imports), not its tests': test
	// files may open a real database — sqlite's own tests, bench, and the
	// existing tests of cmd/agentd, loop, webhook, sse, feed, protocol, api
	// and internal/seed do. internal/seed is the one other package allowed:
	// it writes parked runs into a SQLite file for tests and benchmarks, and
	// only test files may import it (checked here too). internal/pgtest
	// (a PostgreSQL database per test), internal/replicas (real agentd
	// processes on one database) and internal/mcptest (the MCP test
	// server's build) are for test files only as well.
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg, imports := f[0], f[1:]
		wiring := pkg == mod+"/server" || pkg == mod+"/cmd/agentd"
		if slices.Contains(imports, mod+"/sqlite") && !wiring && pkg != mod+"/internal/seed" {
			t.Errorf("%s imports %s/sqlite: only the wiring (server, cmd/agentd) may (tests may too)", pkg, mod)
		}
		if slices.Contains(imports, mod+"/postgres") && !wiring {
			t.Errorf("%s imports %s/postgres: only the wiring (server, cmd/agentd) may (tests may too)", pkg, mod)
		}
		for _, testOnly := range []string{"/internal/seed", "/internal/pgtest", "/internal/replicas", "/internal/mcptest"} {
			if slices.Contains(imports, mod+testOnly) {
				t.Errorf("%s imports %s%s: only test files may", pkg, mod, testOnly)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	// No non-test Go file outside the backends (sqlite/, postgres/), the contract
	// (storetest/) and the wiring (server/, cmd/agentd/) mentions agentd.Store, in
	// code or comment.
	allowed := []string{"sqlite", "postgres", "storetest", "server", "cmd/agentd"}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	whole := regexp.MustCompile(`\bagentd\.Store\b`)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || slices.Contains(allowed, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if whole.MatchString(line) {
				t.Errorf("%s:%d names agentd.Store: name the store roles the package uses (store.go)", rel, i+1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
