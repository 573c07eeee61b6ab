package pgtest

import (
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// Server is a PostgreSQL server of one test's own, made by initdb in a
// temp dir and run by pg_ctl (as scripts/postgres.sh starts the shared
// one), for tests that stop or restart the server under agentd without
// disturbing the others.
type Server struct {
	// URL names the server's postgres database as the superuser, on the
	// server's unix socket.
	URL string
	bin string
	dir string
	// settings are the server's -c options.
	settings string
}

// NewServer starts a server that is stopped and removed when t ends, with
// fsync and synchronous_commit off (a test server is thrown away, never
// recovered) unless settings ("name=value", passed as -c options after
// those) say otherwise: "fsync=on", "synchronous_commit=on" for a durable
// one, as a benchmark against SQLite's synchronous=FULL needs. It
// skips t when PostgreSQL's programs (initdb, pg_ctl) are not found,
// unless AGENTD_POSTGRES_REQUIRED=1: then it fails. Under root the server
// runs as the user agentd-pg (PostgreSQL refuses root), which
// scripts/postgres.sh creates.
func NewServer(t testing.TB, settings ...string) *Server {
	t.Helper()
	s, err := startServer(append([]string{"max_connections=100"}, settings...)...)
	if errors.Is(err, errNoPrograms) {
		msg := err.Error() + ": this test starts a PostgreSQL server of its own"
		if os.Getenv("AGENTD_POSTGRES_REQUIRED") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.remove)
	return s
}

// errNoPrograms is startServer's error where PostgreSQL is not installed.
var errNoPrograms = errors.New("initdb and pg_ctl not found (PATH, pg_config --bindir, /usr/lib/postgresql/*/bin)")

// startServer makes a server with initdb in a temp dir and starts it,
// listening on a unix socket in that dir only, with fsync and
// synchronous_commit off and the settings given ("name=value") after
// those. The caller removes it (remove).
func startServer(settings ...string) (*Server, error) {
	bin := pgBin()
	if bin == "" {
		return nil, errNoPrograms
	}
	dir, err := os.MkdirTemp("", "agentd-pgsrv-") // not t.TempDir: agentd-pg must reach it
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, settings: "-c listen_addresses='' -k " + dir + " -c fsync=off -c synchronous_commit=off"}
	for _, kv := range settings {
		s.settings += " -c " + kv
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("agentd-pg")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root needs the user agentd-pg (scripts/postgres.sh creates it): %v", err)
		}
		if out, err := osexec.Command("chown", u.Uid+":"+u.Gid, dir).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown %s: %v %s", dir, err, out)
		}
	}
	if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.remove()
		return nil, err
	}
	s.URL = "postgres:///postgres?host=" + dir + "&user=postgres&sslmode=disable"
	return s, nil
}

// remove stops the server at once and removes its folder.
func (s *Server) remove() {
	_ = s.pgCtl("-m", "immediate", "stop")
	os.RemoveAll(s.dir)
}

// Restart restarts the server with pg_ctl restart -m fast: every
// connection is closed, transactions in progress are rolled back, and the
// server is back, on the same socket, when Restart returns.
func (s *Server) Restart() error { return s.pgCtl("-m", "fast", "restart") }

// Stop stops the server (pg_ctl stop -m fast); Start starts it again.
func (s *Server) Stop() error { return s.pgCtl("-m", "fast", "stop") }

// Start starts a stopped server on the same socket.
func (s *Server) Start() error {
	return s.pgCtl("-o", s.settings, "start")
}

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// pgCtl runs pg_ctl on the server's data folder, waiting for it (-w). The
// server it starts writes to the log file (-l), never to pg_ctl's output,
// which would stay open as long as the server runs.
func (s *Server) pgCtl(args ...string) error {
	return s.run("pg_ctl", append([]string{"-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-w", "-s"}, args...)...)
}

// run runs one of PostgreSQL's programs as the server's owner.
func (s *Server) run(prog string, args ...string) error {
	argv := s.command(prog, args...)
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: %s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// command is the argv that runs one of PostgreSQL's programs as the
// server's owner: under root, the user agentd-pg, through runuser.
func (s *Server) command(prog string, args ...string) []string {
	name := filepath.Join(s.bin, prog)
	if os.Geteuid() == 0 {
		return append([]string{"runuser", "-u", "agentd-pg", "--", name}, args...)
	}
	return append([]string{name}, args...)
}

// pgBin returns the folder of initdb and pg_ctl, or "".
func pgBin() string {
	if p, err := osexec.LookPath("initdb"); err == nil {
		if _, err := osexec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p)
		}
	}
	if out, err := osexec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); isFile(filepath.Join(d, "initdb")) {
			return d
		}
	}
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(ds) - 1; i >= 0; i-- { // the newest first
		if isFile(filepath.Join(ds[i], "initdb")) && isFile(filepath.Join(ds[i], "pg_ctl")) {
			return ds[i]
		}
	}
	return ""
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }
