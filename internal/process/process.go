// Package process runs a project's programs — command tools and hooks —
// one way (Run): in their own folder and process group, with a minimal
// environment, the whole request in a sealed stdin file before exec,
// bounded output, a timeout, and killed with the server on Linux
// (docs/tools.md). Packages tools and hooks both run through it.
package process

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
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of the minimal environment when the server's own is unset.
const (
	DefaultPath   = "/usr/local/bin:/usr/bin:/bin"
	DefaultHome   = "/"
	DefaultTmpdir = "/tmp"
)

// Limits of a run (docs/tools.md).
const (
	// WaitDelay is how long Run waits for the output pipes to close after
	// the command exited or was killed (a grandchild may still hold them).
	WaitDelay = 2 * time.Second
	// MaxOutput bounds what a command may print on stdout.
	MaxOutput = agentd.MaxToolResultBytes
	// MaxStderrTail is how much of the end of stderr a failure reports.
	MaxStderrTail = 2 << 10
)

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

// Spec is one subprocess to run: a command tool's call or a hook's.
type Spec struct {
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

// Run runs p and returns its stdout: the command runs in p.Dir, as
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
func Run(ctx context.Context, p Spec) ([]byte, error) {
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
	stdout := &limitedBuffer{limit: MaxOutput, onOverflow: cancel}
	stderr := &tailBuffer{limit: MaxStderrTail}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	err = runCommand(cmd)
	switch {
	case stdout.overflowed():
		return nil, fmt.Errorf("%s: output too large (over %d bytes)", p.Name, MaxOutput)
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
func (p Spec) command(ctx context.Context, stdin *os.File) *exec.Cmd {
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
	cmd.WaitDelay = WaitDelay
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

var errTimeout = errors.New("process timeout")

// exitError describes a non-zero exit with the tail of stderr.
func exitError(name string, exit *exec.ExitError, tail string) error {
	tail = strings.TrimSpace(tail)
	if tail == "" {
		return fmt.Errorf("%s failed (%s)", name, exit)
	}
	return fmt.Errorf("%s failed (%s): %s", name, exit, tail)
}

// environ is a command's whole environment: PATH, HOME and TMPDIR from
// the server (or defaults) and the variables named in names that are set.
func environ(names []string) []string {
	env := []string{
		"PATH=" + getenvOr("PATH", DefaultPath),
		"HOME=" + getenvOr("HOME", DefaultHome),
		"TMPDIR=" + getenvOr("TMPDIR", DefaultTmpdir),
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
