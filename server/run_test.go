package server

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/tools/gofunc"
	"github.com/agentd-dev/agentd/toolset"
)

type noArgs struct{}

func goSource(t *testing.T) toolset.Source {
	t.Helper()
	src, err := gofunc.NewSource(gofunc.MustNew("send_invoice", "Send an invoice.",
		func(context.Context, noArgs) (string, error) { return "sent", nil }))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// writeProject writes a project whose agent uses the script model, with
// agent.json's extra fields and a command tool of each name in tools.
func writeProject(t *testing.T, extra string, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	agent := `{"name":"t","system_prompt":"s","model":{"provider":"script","script":{"rules":[]}}` + extra + `}`
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	for _, name := range tools {
		td := filepath.Join(dir, "tools", name)
		must(t, os.MkdirAll(td, 0o755))
		must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"`+name+`","description":"d","command":["/bin/true"]}`), 0o644))
	}
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The embedding program's sources join the project's in the one
// registry: a name both define is a load error naming both, and
// agent.json "tools" is checked against them too.
func TestRunSourcesLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, dir string
		want      []string
	}{
		{"a name both define", writeProject(t, "", "send_invoice"),
			[]string{`tool "send_invoice" is defined by`, "tools (tools/send_invoice/tool.json)", `go tool "send_invoice"`}},
		{"agent.json tools", writeProject(t, `,"tools":["send_invoice","nope"]`),
			[]string{`unknown tool "nope"`, "go"}},
	} {
		// A cancelled context: Run returns at once if it got past loading.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := Run(ctx, Options{Args: []string{"--project", tc.dir, "--addr", "127.0.0.1:0", "--data", t.TempDir()},
			Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard, Sources: []toolset.Source{goSource(t)}})
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Run = %v, want an error containing %q", tc.name, err, w)
			}
		}
	}
}

// Flags that do not parse are ErrUsage, after the flag package said why.
func TestRunUsage(t *testing.T) {
	var stderr strings.Builder
	err := Run(context.Background(), Options{Args: []string{"--nope"}, Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: &stderr})
	if !errors.Is(err, ErrUsage) || !strings.Contains(stderr.String(), "nope") {
		t.Errorf("Run = %v, stderr %q", err, stderr.String())
	}
}

// Without a project named and no Options.Default, Run says what is
// missing and writes no project.
func TestRunNoProject(t *testing.T) {
	data := t.TempDir()
	err := Run(context.Background(), Options{Args: []string{"--addr", "127.0.0.1:0", "--data", data},
		Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "no project: give --project or AGENTD_PROJECT") {
		t.Errorf("Run = %v, want the no-project error", err)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Errorf("data folder holds %d entries, want none", len(entries))
	}
}
