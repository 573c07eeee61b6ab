package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/files"
	"github.com/agentd-dev/agentd/hooks"
	procrun "github.com/agentd-dev/agentd/internal/process"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// BenchmarkPreToolUseHook is the cost of one preToolUse hook per call
// (docs/performance.md): the whole hook path — stdin built, the command
// run by the shared runner, its answer decoded and combined — beside a bare
// fork/exec of the same command through the same runner, in one run.
func BenchmarkPreToolUseHook(b *testing.B) {
	dir := b.TempDir()
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"decision\":\"allow\"}'\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	cmd := []string{"/bin/sh", "./run.sh"}
	b.Run("bare_exec", func(b *testing.B) {
		for b.Loop() {
			if _, err := procrun.Run(context.Background(), procrun.Spec{Name: "bench", Command: cmd, Dir: dir,
				Stdin: []byte("{}\n"), Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hook", func(b *testing.B) {
		set := hooks.New([]*hooks.Hook{{Name: "allow", Pre: true, Command: cmd, Dir: dir, Timeout: 10 * time.Second}}, zerolog.Nop())
		call := toolset.HookCall{ToolCallID: "call_1", ToolName: "pay", Arguments: json.RawMessage(`{"amount":5}`), Tier: "auto", Phase: toolset.PhaseClassify}
		for b.Loop() {
			if v := set.PreToolUse(context.Background(), call); v == nil || v.Verdict != "allow" {
				b.Fatalf("verdict %+v", v)
			}
		}
	})
}

// BenchmarkDiffCard1MiB is the time to render a write_file card's diff
// for a 1 MiB file (about 16,000 lines of 64 bytes) with one line in a
// hundred changed, and with everything changed.
func BenchmarkDiffCard1MiB(b *testing.B) {
	var old, some, all strings.Builder
	for i := 0; old.Len() < 1<<20-64; i++ {
		line := fmt.Sprintf("%-62d\n", i)
		old.WriteString(line)
		all.WriteString(strings.Repeat("x", 62) + "\n")
		if i%100 == 0 {
			line = fmt.Sprintf("%-62s\n", "changed")
		}
		some.WriteString(line)
	}
	for name, next := range map[string]string{"one_percent": some.String(), "everything": all.String()} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(old.Len()))
			for b.Loop() {
				if files.Diff("notes.md", old.String(), next) == "" {
					b.Fatal("no diff")
				}
			}
		})
	}
}
