// Package replicas runs several real agentd processes (the binary built
// from cmd/agentd) on one PostgreSQL database, each on a loopback port of
// its own, for the multi-replica tests of cmd/agentd and the benchmarks of
// bench (docs/scale-out.md). Only test files import it (TestImportRules).
package replicas

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the agentd binary once per test process and returns its
// path.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build agentd: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "agentd-replicas-")
		if err != nil {
			buildErr = err
			return
		}
		out := filepath.Join(dir, "agentd")
		cmd := exec.Command(goBin, "build", "-o", out, "github.com/agentd-dev/agentd/cmd/agentd")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build agentd: %v\n%s", err, b)
			return
		}
		binPath = out
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binPath
}

// RemoveBinary deletes the binary Binary built, if any; call it from
// TestMain after m.Run.
func RemoveBinary() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}

// Options says what replicas Start runs.
type Options struct {
	// N is the number of replicas (default 3).
	N int
	// Project is the project folder every replica serves (required).
	Project string
	// DatabaseURL is the PostgreSQL database they share (required by
	// Start); empty, a replica Add starts keeps a SQLite file in its data
	// folder.
	DatabaseURL string
	// Env is added to each process's environment (KEY=value).
	Env []string
	// Args are added to each `agentd serve` command line.
	Args []string
}

// Replica is one running agentd process.
type Replica struct {
	// Name is "A", "B", "C", … in start order.
	Name string
	// Base is its URL, http://127.0.0.1:port.
	Base string
	cmd  *exec.Cmd
	logs *lockedBuffer
	once sync.Once
}

// Start starts o.N replicas on o.DatabaseURL, one after the other (the
// first applies the migrations), each with a data folder of its own, and
// returns them once each listens. They are killed when tb ends.
func Start(tb testing.TB, o Options) []*Replica {
	tb.Helper()
	if o.Project == "" || o.DatabaseURL == "" {
		tb.Fatal("replicas.Start: Project and DatabaseURL are required")
	}
	if o.N <= 0 {
		o.N = 3
	}
	rs := make([]*Replica, o.N)
	for i := range rs {
		rs[i] = Add(tb, string(rune('A'+i)), o)
	}
	return rs
}

// Add starts one more replica named name with o (o.N is not used), as
// Start does, and returns it once it listens: its engine has recovered
// what it found in the store by then.
func Add(tb testing.TB, name string, o Options) *Replica {
	tb.Helper()
	bin := Binary(tb)
	args := append([]string{"serve", "--project", o.Project, "--addr", "127.0.0.1:0", "--data", tb.TempDir(), "--database", o.DatabaseURL}, o.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	r := &Replica{Name: name, cmd: cmd, logs: &lockedBuffer{}}
	cmd.Stderr = r.logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Kill)
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		s, _ := br.ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, br)
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "agentd listening on ") {
			tb.Fatalf("replica %s did not start: %q\n%s", name, s, r.Logs())
		}
		r.Base = strings.TrimSpace(strings.TrimPrefix(s, "agentd listening on "))
	case <-time.After(60 * time.Second):
		tb.Fatalf("replica %s did not start within a minute\n%s", name, r.Logs())
	}
	return r
}

// Kill ends the replica with SIGKILL (its process group: the tools it
// started too) and waits for it. It is idempotent.
func (r *Replica) Kill() {
	r.once.Do(func() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		_ = r.cmd.Wait()
	})
}

// Logs returns what the replica wrote to stderr so far (its JSON log).
func (r *Replica) Logs() string { return r.logs.String() }

// lockedBuffer is a strings.Builder safe for the process's writes and a
// test's reads at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
