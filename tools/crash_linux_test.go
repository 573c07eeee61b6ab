//go:build linux

package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper process stands in for the server: it runs one call of the
// tool in $AGENTD_HELPER_DIR with the arguments in its args.json, and is
// then killed with SIGKILL by the test.
const helperEnv = "AGENTD_HELPER_DIR"

func TestHelperRunTool(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the helper process of the crash tests")
	}
	args, err := os.ReadFile(filepath.Join(dir, "args.json"))
	if err != nil {
		t.Fatal(err)
	}
	tool := &Tool{Name: "probe", Command: []string{"./run.sh"}, Dir: dir, Timeout: time.Minute}
	_, err = tool.Run(context.Background(), "call_crash", args)
	t.Fatalf("Run returned before the helper was killed: %v", err)
}

// runInHelper starts a helper process that runs script as a tool with args
// and returns the helper and the tool's folder.
func runInHelper(t *testing.T, script string, args json.RawMessage) (*exec.Cmd, string) {
	t.Helper()
	tool := scriptTool(t, script)
	if err := os.WriteFile(filepath.Join(tool.Dir, "args.json"), args, 0o644); err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperRunTool$", "-test.count=1")
	helper.Env = append(os.Environ(), helperEnv+"="+tool.Dir)
	var out bytes.Buffer
	helper.Stdout, helper.Stderr = &out, &out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		if t.Failed() {
			t.Logf("helper output:\n%s", out.String())
		}
	})
	return helper, tool.Dir
}

// killHelper kills the helper with SIGKILL and reaps it.
func killHelper(t *testing.T, helper *exec.Cmd) {
	t.Helper()
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
}

// killPidFileOnCleanup makes sure a process the test could not get rid of
// does not outlive it.
func killPidFileOnCleanup(t *testing.T, pidFile string) {
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// A SIGKILL of the server takes the running command with it.
func TestRunCommandDiesWithServer(t *testing.T) {
	helper, dir := runInHelper(t, `echo $$ > tool.pid
exec sleep 1000`, json.RawMessage(`{}`))
	pidFile := filepath.Join(dir, "tool.pid")
	killPidFileOnCleanup(t, pidFile)
	waitForFile(t, pidFile)

	killHelper(t, helper)
	assertProcessGone(t, pidFile)
}

// The command gets the whole request even when the server died before the
// command read a byte of it: a process the command started reads stdin
// only after the server is gone, and gets all of it.
func TestRunRequestIsWholeAfterServerDies(t *testing.T) {
	blob := strings.Repeat("x", 512<<10) // far more than a pipe buffer holds
	args, _ := json.Marshal(map[string]string{"blob": blob})
	helper, dir := runInHelper(t, `exec 3<&0
( while [ ! -e go ]; do sleep 0.02; done; cat <&3 > got.tmp; mv got.tmp got ) &
echo $! > reader.pid
echo $$ > tool.pid
exec sleep 1000`, args)
	killPidFileOnCleanup(t, filepath.Join(dir, "reader.pid"))
	killPidFileOnCleanup(t, filepath.Join(dir, "tool.pid"))
	waitForFile(t, filepath.Join(dir, "reader.pid"))
	waitForFile(t, filepath.Join(dir, "tool.pid"))

	killHelper(t, helper)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := waitForContent(t, filepath.Join(dir, "got"))
	want := `{"tool":"probe","call_id":"call_crash","input":{"blob":"` + blob + `"}}` + "\n"
	if len(got) != len(want) || string(got) != want {
		t.Errorf("the command read %d bytes of stdin after the server died, want the whole %d-byte request", len(got), len(want))
	}
}

// waitForContent returns the content of path once it exists, failing the
// test if it does not appear within a hang guard.
func waitForContent(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
