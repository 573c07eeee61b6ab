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

	"github.com/agentd-dev/agentd/internal/tracing"
	"go.opentelemetry.io/otel/trace"
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

// Run executes one call of the tool: the command runs in the tool's folder
// (RunProcess) with the whole request,
// {"tool": NAME, "call_id": ID, "input": ARGUMENTS} plus a newline, as its
// stdin. On exit status 0 the result is stdout: its JSON if it parses
// (compacted), else the trimmed text as a JSON string; the errors are
// RunProcess's, naming the tool.
func (t *Tool) Run(ctx context.Context, callID string, args json.RawMessage) (json.RawMessage, error) {
	return t.run(ctx, callID, args, nil)
}

// run is Run with extra variables ("NAME=value") in the command's
// environment: its context endpoint's.
func (t *Tool) run(ctx context.Context, callID string, args json.RawMessage, extra []string) (json.RawMessage, error) {
	input := args
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	payload, err := StdinJSON(request{Tool: t.Name, CallID: callID, Input: input})
	if err != nil {
		return nil, fmt.Errorf("tool %q: arguments are not valid JSON: %v", t.Name, err)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	out, err := RunProcess(ctx, Process{Name: fmt.Sprintf("tool %q", t.Name), Command: t.Command, Dir: t.Dir, Env: t.Env,
		Extra: extra, Stdin: payload, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return parseOutput(out), nil
}

// StdinJSON is v as a command's stdin: compact JSON without HTML escaping
// (an "&" in the arguments arrives as "&", not "\u0026") and a newline.
// Command tools and hooks read it.
func StdinJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Process is one subprocess run the way command tools run (and hooks:
// package hooks uses the same runner).
type Process struct {
	// Name says what runs, in errors: `tool "lookup"`, `hook "audit"`.
	Name string
	// Command is the argv; a relative program path with a slash is
	// relative to Dir.
	Command []string
	Dir     string
	// Env names the server environment variables passed to the command.
	Env []string
	// Extra are more variables, "NAME=value", set as given (a command
	// tool's context endpoint).
	Extra   []string
	Stdin   []byte
	Timeout time.Duration
}

// RunProcess runs p and returns its stdout: the command runs in p.Dir, as
// the leader of a new process group, with only PATH, HOME, TMPDIR and the
// variables named in p.Env in its environment, then p.Extra, and
// TRACEPARENT, the W3C traceparent of the span ctx carries, when it
// carries one. Its stdin is a regular file that holds the whole of p.Stdin
// before the command starts, so the command never sees a partial request,
// even when the server dies.
//
// A non-zero exit is an error with the exit status and the tail of stderr.
// When the timeout passes or ctx is done the whole process group is killed;
// the error then says "timed out after …" or wraps ctx.Err(). More than 1
// MiB of stdout is an error too. Whatever the command leaves running in its
// process group is killed when it exits. On Linux the command itself is
// killed (SIGKILL) when the server process dies; what it started may
// outlive it then (docs/tools.md).
func RunProcess(ctx context.Context, p Process) ([]byte, error) {
	if len(p.Command) == 0 || p.Command[0] == "" {
		return nil, fmt.Errorf("%s: no command", p.Name)
	}
	stdin, closeStdin, err := requestFile(p.Stdin)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot write the request: %v", p.Name, err)
	}
	defer closeStdin()

	runCtx, cancel := context.WithTimeoutCause(ctx, p.Timeout, errTimeout)
	defer cancel()
	cmd := p.command(runCtx, stdin)
	stdout := &limitedBuffer{limit: maxOutput, onOverflow: cancel}
	stderr := &tailBuffer{limit: maxStderrTail}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	err = runCommand(cmd)
	switch {
	case stdout.overflowed():
		return nil, fmt.Errorf("%s: output too large (over %d bytes)", p.Name, maxOutput)
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		// Exit status 0; ErrWaitDelay means something it started kept the
		// pipes open after it exited.
		return stdout.Bytes(), nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", p.Name, ctx.Err())
	case errors.Is(context.Cause(runCtx), errTimeout):
		return nil, fmt.Errorf("%s: timed out after %s", p.Name, p.Timeout)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil, exitError(p.Name, exit, stderr.String())
	}
	return nil, fmt.Errorf("%s: %v", p.Name, err)
}

// command returns the process's command, not started, reading stdin, in
// its own process group that is killed when ctx is done.
func (p Process) command(ctx context.Context, stdin *os.File) *exec.Cmd {
	prog := p.Command[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(p.Dir, prog)
	}
	cmd := exec.CommandContext(ctx, prog, p.Command[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = append(environ(p.Env), p.Extra...)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// The span of the traced call or run (docs/observability.md).
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tracing.Format(sc))
	}
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
func exitError(name string, exit *exec.ExitError, tail string) error {
	tail = strings.TrimSpace(tail)
	if tail == "" {
		return fmt.Errorf("%s failed (%s)", name, exit)
	}
	return fmt.Errorf("%s failed (%s): %s", name, exit, tail)
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

// environ is a command's whole environment: PATH, HOME and TMPDIR from
// the server (or defaults) and the variables named in names that are set.
func environ(names []string) []string {
	env := []string{
		"PATH=" + getenvOr("PATH", defaultPath),
		"HOME=" + getenvOr("HOME", defaultHome),
		"TMPDIR=" + getenvOr("TMPDIR", defaultTmpdir),
	}
	for _, name := range names {
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
