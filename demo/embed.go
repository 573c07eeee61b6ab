// Package demo embeds the demo project that `agentd serve` runs when no
// --project is given: a script model (no network, no API key) and four
// command tools — lookup_order (open), refund_payment
// (requires-confirmation), rotate_keys (operator-gated, a label only) and
// wipe_database (llm_callable: false, so the model's call is refused) —
// and the "billing" connection (connections/billing: connection.json,
// policy.json, openapi.json) to the demo billing API of package
// demo/billing, which `agentd serve` starts with the demo; a hook
// (hooks/block-channel) that denies the announcements channel, a workspace
// with notes.md for the file tools (kept across restarts), and a
// researcher subagent.
package demo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed agent.json script.json tools connections hooks workspace
var files embed.FS

// FS returns the demo project's files.
func FS() fs.FS { return files }

// WriteTo writes the demo project into dir, replacing files of an earlier
// copy, so that its command tools can run from disk. Shell scripts are made
// executable.
func WriteTo(dir string) error {
	return fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(p, "workspace/") {
			if _, err := os.Stat(dst); err == nil {
				return nil // the workspace keeps what the demo's agent wrote there
			}
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(dst, b, mode); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		return os.Chmod(dst, mode)
	})
}
