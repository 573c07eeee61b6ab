package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/api"
)

// ogenVersion is the client generator TestGeneratedClient uses, a
// maintained generator that reads OpenAPI 3.1 (docs/api.md "Generated
// clients").
const ogenVersion = "v1.24.0"

// A client generated from the server's own OpenAPI document compiles and
// talks to the real server: ogen generates a Go client from
// api.OpenAPIDocument into a module of its own, and a program using it
// (testdata/genclient) creates a conversation, reads it back and lists the
// tools against the running binary. It needs the Go module proxy (as the
// build does); -short skips it.
func TestGeneratedClient(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the generator; not with -short")
	}
	t.Parallel() // its builds are CPU; TestChaos, beside it, mostly waits
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "openapi.json"), api.OpenAPIDocument(), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/agentdclient\n\ngo 1.26\n"), 0o644))
	src, err := os.ReadFile("testdata/genclient/main.go.txt")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644))
	goCmd := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	goCmd("run", "github.com/ogen-go/ogen/cmd/ogen@"+ogenVersion, "--target", "client", "--package", "client", "--clean", "openapi.json")
	goCmd("get", "github.com/ogen-go/ogen@"+ogenVersion)
	goCmd("mod", "tidy")
	goCmd("build", "-o", "genclient", ".")

	const apiKey = "k-generated-client"
	proj, _ := writeProject(t, projectOpts{keys: map[string][3]string{apiKey: {"t1", "client", ""}}})
	base, _ := startProcess(t, agentdBinary(t), proj, t.TempDir())
	client := exec.Command(filepath.Join(dir, "genclient"), base)
	client.Env = append(os.Environ(), "AGENTD_API_KEY="+apiKey)
	out, err := client.CombinedOutput()
	if err != nil {
		t.Fatalf("the generated client: %v\n%s", err, out)
	}
	id, ok := strings.CutPrefix(strings.SplitN(string(out), "\n", 2)[0], "conversation ")
	if !ok || !strings.HasPrefix(id, "conv_") {
		t.Fatalf("the generated client printed %q", out)
	}
	if status, conv := call(t, http.MethodGet, base+"/v1/conversations/"+id, apiKey, ""); status != http.StatusOK || conv["id"] != id {
		t.Fatalf("the conversation the client created: %d %v", status, conv)
	}
}
