package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Defaults of the minimal environment when the server's own is unset.
const (
	defaultPath   = "/usr/local/bin:/usr/bin:/bin"
	defaultHome   = "/"
	defaultTmpdir = "/tmp"
)

// waitDelay is how long Run waits for the output pipes to close after the
// command exited or was killed (a grandchild may still hold them).
const waitDelay = 2 * time.Second

// request is what a command reads on stdin.
type request struct {
	Tool   string          `json:"tool"`
	CallID string          `json:"call_id"`
	Input  json.RawMessage `json:"input"`
}

// Run executes one call of the tool: the command runs in the tool's folder,
// as the leader of a new process group, with only PATH, HOME, TMPDIR and
// the variables named in Env in its environment. Its stdin is a regular
// file that holds the whole request,
// {"tool": NAME, "call_id": ID, "input": ARGUMENTS} plus a newline, before
// the command starts, so the command never sees a partial request, even
// when the server dies.
//
// On exit status 0 the result is stdout: its JSON if it parses (compacted),
// else the trimmed text as a JSON string. A non-zero exit is an error with
// the exit status and the tail of stderr. When the timeout passes or ctx is
// done the whole process group is killed; the error then says "timed out
// after …" or wraps ctx.Err(). More than 1 MiB of stdout is an error too.
// Whatever the command leaves running in its process group is killed when
// it exits. On Linux the command itself is killed (SIGKILL) when the server
// process dies; what it started may outlive it then (docs/tools.md).
func (t *Tool) Run(ctx context.Context, callID string, args json.RawMessage) (json.RawMessage, error) {
	if len(t.Command) == 0 || t.Command[0] == "" {
		return nil, fmt.Errorf("tool %q: no command", t.Name)
	}
	input := args
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	payload, err := json.Marshal(request{Tool: t.Name, CallID: callID, Input: input})
	if err != nil {
		return nil, fmt.Errorf("tool %q: arguments are not valid JSON: %v", t.Name, err)
	}
	stdin, closeStdin, err := requestFile(append(payload, '\n'))
	if err != nil {
		return nil, fmt.Errorf("tool %q: cannot write the request: %v", t.Name, err)
	}
	defer closeStdin()

	timeout := t.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	cmd := t.command(runCtx, stdin)
	stdout := &limitedBuffer{limit: maxOutput, onOverflow: cancel}
	stderr := &tailBuffer{limit: maxStderrTail}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	err = runCommand(cmd)
	switch {
	case stdout.overflowed():
		return nil, fmt.Errorf("tool %q: output too large (over %d bytes)", t.Name, maxOutput)
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		// Exit status 0; ErrWaitDelay means something it started kept the
		// pipes open after it exited.
		return parseOutput(stdout.Bytes()), nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("tool %q: %w", t.Name, ctx.Err())
	case errors.Is(context.Cause(runCtx), errTimeout):
		return nil, fmt.Errorf("tool %q: timed out after %s", t.Name, timeout)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil, t.exitError(exit, stderr.String())
	}
	return nil, fmt.Errorf("tool %q: %v", t.Name, err)
}

// command returns the tool's command, not started, reading stdin, in its
// own process group that is killed when ctx is done.
func (t *Tool) command(ctx context.Context, stdin *os.File) *exec.Cmd {
	prog := t.Command[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(t.Dir, prog)
	}
	cmd := exec.CommandContext(ctx, prog, t.Command[1:]...)
	cmd.Dir = t.Dir
	cmd.Env = t.environ()
	cmd.Stdin = stdin
	setSysProcAttr(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// runCommand starts cmd, waits for it, and then kills whatever it left
// running in its process group.
//
// The goroutine stays on the thread that started the command until the
// command has been waited for: on Linux the parent-death signal is sent
// when the thread that started a process ends, not the whole server
// (go.dev/issue/27505), and the runtime ends a thread when a goroutine
// locked to it returns. While this goroutine holds the thread, no other
// goroutine can run on it, so only the death of the server kills the
// command. The thread returns to the runtime after the command was reaped.
func runCommand(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = killProcessGroup(cmd) // leftovers of a command that exited
	}
	return err
}

var errTimeout = errors.New("tool timeout")

// exitError describes a non-zero exit with the tail of stderr.
func (t *Tool) exitError(exit *exec.ExitError, tail string) error {
	tail = strings.TrimSpace(tail)
	if tail == "" {
		return fmt.Errorf("tool %q failed (%s)", t.Name, exit)
	}
	return fmt.Errorf("tool %q failed (%s): %s", t.Name, exit, tail)
}

// parseOutput turns stdout into a result: compacted JSON if it is JSON,
// else the trimmed text as a JSON string.
func parseOutput(out []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(out)
	var buf bytes.Buffer
	if len(trimmed) > 0 && json.Compact(&buf, trimmed) == nil {
		return buf.Bytes()
	}
	text, _ := json.Marshal(strings.ToValidUTF8(string(trimmed), "\uFFFD"))
	return text
}

// environ is the command's whole environment: PATH, HOME and TMPDIR from
// the server (or defaults) and the variables named in Env that are set.
func (t *Tool) environ() []string {
	env := []string{
		"PATH=" + getenvOr("PATH", defaultPath),
		"HOME=" + getenvOr("HOME", defaultHome),
		"TMPDIR=" + getenvOr("TMPDIR", defaultTmpdir),
	}
	for _, name := range t.Env {
		switch name {
		case "PATH", "HOME", "TMPDIR":
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

func getenvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// limitedBuffer keeps up to limit bytes and calls onOverflow once when
// more arrive. It is written by exec's copying goroutine and read after
// Wait, and guarded anyway.
type limitedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	limit      int
	over       bool
	onOverflow func()
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over {
		return len(p), nil
	}
	if b.buf.Len()+len(p) > b.limit {
		b.over = true
		if b.onOverflow != nil {
			b.onOverflow()
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) overflowed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

// tailBuffer keeps only the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	cut   bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
		b.cut = true
	}
	return len(p), nil
}

// String returns the tail, starting on a rune boundary, marked "…" when
// earlier output was dropped.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail, cut := b.buf, b.cut
	if len(tail) > b.limit {
		tail, cut = tail[len(tail)-b.limit:], true
	}
	for len(tail) > 0 && !isRuneStart(tail[0]) {
		tail = tail[1:]
	}
	s := strings.ToValidUTF8(string(tail), "\uFFFD")
	if cut {
		return "…" + strings.TrimLeft(s, " \t\r\n")
	}
	return s
}
