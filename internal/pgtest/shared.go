package pgtest

import (
	"fmt"
	"os"
	osexec "os/exec"
	"sync"
	"syscall"
	"testing"
)

// shared is the test process's own throwaway server, started by the first
// test that needs one when AGENTD_TEST_POSTGRES_URL is not set.
var shared struct {
	once sync.Once
	url  string
	err  error // why there is none
	// reaper's stdin: it stays open until the test process ends, however
	// it ends; then the reaper stops the server and removes its folder.
	reaper *os.File
}

// serverURL is the URL of the tests' server: AGENTD_TEST_POSTGRES_URL when
// it is set, else the test process's own server, started on first use (or
// the reason none could be).
func serverURL() (string, error) {
	if u := os.Getenv("AGENTD_TEST_POSTGRES_URL"); u != "" {
		return u, nil
	}
	shared.once.Do(func() { shared.url, shared.err = startShared() })
	return shared.url, shared.err
}

// startShared starts the test process's server (as scripts/postgres.sh
// starts one: fsync off, a unix socket in its temp dir only) and the
// reaper that stops and removes it when the test process ends.
func startShared() (string, error) {
	s, err := startServer("max_connections=300", "full_page_writes=off")
	if err != nil {
		return "", err
	}
	if err := startReaper(s); err != nil {
		s.remove()
		return "", err
	}
	return s.URL, nil
}

// startReaper starts a shell that waits for its stdin to end, then stops
// s at once and removes its folder. Its stdin is a pipe whose only writer
// is this process, never closed: the kernel closes it when the process
// ends, normally or killed. The reaper is in a process group of its own,
// so a Ctrl-C to the tests does not end it first, and writes to no pipe
// of go test's, which would wait for it.
func startReaper(s *Server) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	stop := s.command("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "-s", "stop")
	cmd := osexec.Command("/bin/sh", append([]string{"-c", `cat >/dev/null; cd /; "$@" >/dev/null 2>&1; rm -rf "$0"`, s.dir}, stop...)...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("pgtest: start the server's reaper: %v", err)
	}
	shared.reaper = w
	// It ends after this process (init reaps it then): no goroutine waits
	// for it, so a package's goroutine-leak check sees none of pgtest's.
	_ = cmd.Process.Release()
	return nil
}

// Main is the TestMain of a package whose tests are all about PostgreSQL
// (func TestMain(m *testing.M) { pgtest.Main(m) }): it runs them on
// AGENTD_TEST_POSTGRES_URL or on a server of the test process's own. When
// there can be none — PostgreSQL is not installed, or its server does not
// start — it runs no test and says why, so that `go test ./...` shows the
// package as "ok … [no tests to run]", not as a plain ok; with
// AGENTD_POSTGRES_REQUIRED=1 the package fails instead.
func Main(m *testing.M) {
	if _, err := serverURL(); err != nil {
		fmt.Printf("pgtest: no PostgreSQL for the tests, so none of them ran: %v\n", err)
		if os.Getenv("AGENTD_POSTGRES_REQUIRED") == "1" {
			os.Exit(1)
		}
		// go test's own words for a package that ran nothing: it adds
		// "[no tests to run]" to the package's summary line.
		fmt.Println("testing: warning: no tests to run")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
