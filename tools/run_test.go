//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/process"
)

// scriptTool writes script as an executable run.sh into a fresh folder and
// returns a Tool that runs it.
func scriptTool(t *testing.T, script string) *Tool {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Tool{Name: "probe", Command: []string{"./run.sh"}, Dir: dir, Timeout: 10 * time.Second}
}

func TestRunResult(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"json object compacted", `printf '{ "ok": true,\n  "n": [1, 2] }\n'`, `{"ok":true,"n":[1,2]}`},
		{"json number", `echo 42`, `42`},
		{"plain text becomes a string", `printf '  refunded A-1001  \n'`, `"refunded A-1001"`},
		{"garbage is a string", `printf '{"broken": '`, `"{\"broken\":"`},
		{"two values are text", `echo '{} {}'`, `"{} {}"`},
		{"empty output", `true`, `""`},
		{"invalid utf-8 is replaced", `printf 'a\377b'`, "\"a\ufffdb\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := scriptTool(t, tt.script)
			got, err := tool.Run(context.Background(), "call_1", json.RawMessage(`{}`))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("result = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRunStdinPayload(t *testing.T) {
	tool := scriptTool(t, `cat > "$TMPDIR/stdin.txt"; echo done`)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if _, err := tool.Run(context.Background(), "call_7", json.RawMessage(`{"order_id": "A-1", "amount": 42.5}`)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(tmp, "stdin.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tool":"probe","call_id":"call_7","input":{"order_id":"A-1","amount":42.5}}` + "\n"
	if string(got) != want {
		t.Errorf("stdin = %q, want %q", got, want)
	}

	// Empty arguments are sent as {}.
	if _, err := tool.Run(context.Background(), "call_8", nil); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(tmp, "stdin.txt"))
	if want := `{"tool":"probe","call_id":"call_8","input":{}}` + "\n"; string(got) != want {
		t.Errorf("stdin = %q, want %q", got, want)
	}

	// &, < and > arrive as themselves, not HTML-escaped (\u0026): a
	// command matching "R&D" sees "R&D".
	if _, err := tool.Run(context.Background(), "call_9", json.RawMessage(`{"team": "R&D <ops>"}`)); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(tmp, "stdin.txt"))
	if want := `{"tool":"probe","call_id":"call_9","input":{"team":"R&D <ops>"}}` + "\n"; string(got) != want {
		t.Errorf("stdin = %q, want %q", got, want)
	}
}

// stdin is a regular file that holds the whole request before the command
// starts, so a command may stat it, seek in it, or read it late.
func TestRunStdinIsRegularFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/dev/stdin is a link to the open file only on Linux")
	}
	// On Linux the request is in memory: it needs no writable TMPDIR.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	tool := scriptTool(t, `sleep 0.2
if [ -f /dev/stdin ]; then kind=regular; else kind=other; fi
printf '{"kind":"%s","size":%d,"again":%d}' "$kind" "$(wc -c < /dev/stdin)" "$(wc -c < /dev/stdin)"`)
	args := json.RawMessage(`{"blob":"` + strings.Repeat("y", 300<<10) + `"}`)
	got, err := tool.Run(context.Background(), "call_9", args)
	if err != nil {
		t.Fatal(err)
	}
	size := len(`{"tool":"probe","call_id":"call_9","input":}`) + len(args) + 1
	want := `{"kind":"regular","size":` + strconv.Itoa(size) + `,"again":` + strconv.Itoa(size) + `}`
	if string(got) != want {
		t.Errorf("stdin as the command sees it = %s, want %s", got, want)
	}
}

func TestRunRunsInToolFolder(t *testing.T) {
	tool := scriptTool(t, `pwd`)
	got, err := tool.Run(context.Background(), "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(tool.Dir)
	// TempDir may sit behind a symlink; compare resolved paths.
	var gotDir string
	_ = json.Unmarshal(got, &gotDir)
	a, _ := filepath.EvalSymlinks(gotDir)
	b, _ := filepath.EvalSymlinks(tool.Dir)
	if a != b {
		t.Errorf("working directory = %s, want %s", got, want)
	}
}

func TestRunEnvironmentIsMinimal(t *testing.T) {
	tool := scriptTool(t, `env`)
	t.Setenv("AGENTD_TEST_SECRET", "hunter2")
	t.Setenv("AGENTD_TEST_PASSED", "visible")
	t.Setenv("HOME", "/home/agentd-test")
	tmpdir := t.TempDir() // it must exist where the request is a temporary file
	t.Setenv("TMPDIR", tmpdir)
	tool.Env = []string{"AGENTD_TEST_PASSED", "AGENTD_TEST_UNSET"}

	got, err := tool.Run(context.Background(), "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatalf("result %s: %v", got, err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		name, value, _ := strings.Cut(line, "=")
		vars[name] = value
	}
	// sh itself may add PWD, SHLVL and _; nothing else may appear.
	for _, shell := range []string{"PWD", "SHLVL", "_", "OLDPWD"} {
		delete(vars, shell)
	}
	want := map[string]string{
		"PATH":               os.Getenv("PATH"),
		"HOME":               "/home/agentd-test",
		"TMPDIR":             tmpdir,
		"AGENTD_TEST_PASSED": "visible",
	}
	if len(vars) != len(want) {
		t.Errorf("environment = %v, want exactly %v", vars, want)
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s = %q, want %q", k, vars[k], v)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Error("the tool saw a server secret")
	}
}

func TestRunEnvironmentDefaults(t *testing.T) {
	t.Setenv("PATH", "")
	t.Setenv("HOME", "")
	t.Setenv("TMPDIR", "")
	tool := scriptTool(t, `printf '{"path":"%s","home":"%s","tmp":"%s"}' "$PATH" "$HOME" "$TMPDIR"`)
	got, err := tool.Run(context.Background(), "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"path":"` + process.DefaultPath + `","home":"` + process.DefaultHome + `","tmp":"` + process.DefaultTmpdir + `"}`
	if string(got) != want {
		t.Errorf("result = %s, want %s", got, want)
	}
}

func TestRunNonZeroExit(t *testing.T) {
	tool := scriptTool(t, `echo "starting" >&2; echo "card declined: insufficient funds" >&2; echo '{"partial":1}'; exit 3`)
	_, err := tool.Run(context.Background(), "c", nil)
	if err == nil {
		t.Fatal("Run succeeded, want an error")
	}
	msg := err.Error()
	for _, want := range []string{"exit status 3", "card declined: insufficient funds", `tool "probe"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

func TestRunStderrTail(t *testing.T) {
	// 10 KiB of noise, then the line that matters.
	tool := scriptTool(t, `i=0; while [ $i -lt 200 ]; do echo "noise line number $i padding padding" >&2; i=$((i+1)); done; echo "FINAL: disk full" >&2; exit 1`)
	_, err := tool.Run(context.Background(), "c", nil)
	if err == nil {
		t.Fatal("Run succeeded, want an error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "FINAL: disk full") {
		t.Errorf("error lacks the end of stderr: %q", msg)
	}
	if strings.Contains(msg, "noise line number 0 ") {
		t.Errorf("error kept the start of stderr: %q", msg)
	}
	if len(msg) > process.MaxStderrTail+200 {
		t.Errorf("error is %d bytes, want the tail bounded to about %d", len(msg), process.MaxStderrTail)
	}
	if !strings.Contains(msg, "…") {
		t.Errorf("a cut tail is not marked: %q", msg)
	}
}

func TestRunOutputTooLarge(t *testing.T) {
	tool := scriptTool(t, `while :; do echo "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; done`)
	start := time.Now()
	_, err := tool.Run(context.Background(), "c", nil)
	if err == nil || !strings.Contains(err.Error(), "output too large") {
		t.Fatalf("err = %v, want output too large", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s: an endless writer must be killed when it passes the limit", time.Since(start))
	}
}

func TestRunTimeoutKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	tool := scriptTool(t, `sleep 1000 &
echo $! > "`+pidFile+`"
wait`)
	tool.Timeout = 300 * time.Millisecond

	start := time.Now()
	_, err := tool.Run(context.Background(), "c", nil)
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Fatalf("err = %v, want timed out after 300ms", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run returned after %s", d)
	}
	assertProcessGone(t, pidFile)
}

func TestRunContextCancelKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	tool := scriptTool(t, `sleep 1000 &
echo $! > "`+pidFile+`"
wait`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitForFile(t, pidFile)
		cancel()
	}()
	_, err := tool.Run(ctx, "c", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertProcessGone(t, pidFile)
}

func TestRunGrandchildHoldingPipesDoesNotHang(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	// The background sleep inherits stdout and stderr and outlives run.sh.
	tool := scriptTool(t, `sleep 1000 &
echo $! > "`+pidFile+`"
echo '{"done":true}'`)
	start := time.Now()
	got, err := tool.Run(context.Background(), "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"done":true}` {
		t.Errorf("result = %s", got)
	}
	if d := time.Since(start); d > process.WaitDelay+3*time.Second {
		t.Errorf("Run returned after %s", d)
	}
	assertProcessGone(t, pidFile)
}

func TestRunMissingProgram(t *testing.T) {
	tool := &Tool{Name: "ghost", Command: []string{"./nope.sh"}, Dir: t.TempDir()}
	_, err := tool.Run(context.Background(), "c", nil)
	if err == nil || !strings.Contains(err.Error(), `tool "ghost"`) {
		t.Fatalf("err = %v, want an error naming the tool", err)
	}
}

func TestRunBarePathLookup(t *testing.T) {
	tool := &Tool{Name: "echoer", Command: []string{"sh", "-c", "cat"}, Dir: t.TempDir()}
	got, err := tool.Run(context.Background(), "c", json.RawMessage(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tool":"echoer","call_id":"c","input":{"a":1}}`; string(got) != want {
		t.Errorf("result = %s, want %s", got, want)
	}
}

func waitForFile(t *testing.T, path string) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s never appeared", path)
}

// assertProcessGone fails unless the pid written in pidFile is dead (gone,
// or a zombie waiting to be reaped) within a few seconds.
func assertProcessGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the child never wrote its pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	if runtime.GOOS != "linux" {
		t.Skip("process state is read from /proc")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return // gone
		}
		// The state follows the parenthesised command name.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return // dead, not yet reaped
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still running: %s", pid, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
