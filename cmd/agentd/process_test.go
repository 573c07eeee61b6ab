package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/replicas"
)

// agentdBinary builds the real binary once per test process (shared with
// internal/replicas' tests; TestMain removes it).
func agentdBinary(t *testing.T) string {
	t.Helper()
	return replicas.Binary(t)
}

// startProcess starts the real binary as a separate process and returns its base URL.
func startProcess(t *testing.T, bin, projectDir, dataDir string, env ...string) (string, *exec.Cmd) {
	t.Helper()
	base, cmd, _ := startProcessLogged(t, bin, projectDir, dataDir, env...)
	return base, cmd
}

// startProcessLogged is startProcess that also returns the process's log
// (its stderr) so far.
func startProcessLogged(t *testing.T, bin, projectDir, dataDir string, env ...string) (string, *exec.Cmd, func() string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--project", projectDir, "--addr", "127.0.0.1:0", "--data", dataDir)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	logw := &lockedWriter{w: &stderr}
	cmd.Stderr = logw
	log := func() string {
		logw.mu.Lock()
		defer logw.mu.Unlock()
		return stderr.String()
	}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("server process did not start: %v\n%s", err, log())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "agentd listening on ")), cmd, log
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Acceptance 5: kill -9 of a real server process while a call is parked;
// restart; the call is still pending with the same deadline; approving it
// runs it once; a stream reconnected with Last-Event-ID sees exactly the
// missed events.
func TestKill9WhileParked(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := writeProject(t, projectOpts{})
	data := t.TempDir()
	env := "AGENTD_TEST_LOG=" + execLog

	base, proc := startProcess(t, bin, dir, data, env)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay the bill")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	_, before := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	lastSeen := st.waitFor("run_waiting", nil).ID
	preCrash := append([]sseEvent(nil), st.seen...)

	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()

	base2, _ := startProcess(t, bin, dir, data, env)
	status, after := call(t, http.MethodGet, base2+"/v1/tool-calls/"+callID, "", "")
	if status != 200 || after["status"] != "requires_confirmation" {
		t.Fatalf("after restart: %d %v", status, after)
	}
	if after["requires_approval_at"] != before["requires_approval_at"] || after["arguments_sha256"] != before["arguments_sha256"] {
		t.Fatalf("deadline or digest changed: before %v after %v", before["requires_approval_at"], after["requires_approval_at"])
	}
	status, dec := call(t, http.MethodPost, base2+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve"}`)
	if status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve after restart: %d %v", status, dec)
	}

	// Reconnect from the last event seen before the crash: exactly the
	// missed events follow, starting right after it, up to run_finished.
	st2 := openStream(t, base2, "", conv, lastSeen)
	fin := st2.waitFor("run_finished", nil)
	if fin.Data["status"] != "completed" {
		t.Fatalf("run_finished %s", fin.Raw)
	}
	if st2.seen[0].ID != lastSeen+1 {
		t.Fatalf("first replayed id %d, want %d (%s)", st2.seen[0].ID, lastSeen+1, st2.summary())
	}
	for i := 1; i < len(st2.seen); i++ {
		if st2.seen[i].ID != st2.seen[i-1].ID+1 {
			t.Fatalf("gap or duplicate: %s", st2.summary())
		}
	}
	if st2.seen[0].Type != "confirmation_resolved" || st2.seen[0].Data["tool_call_id"] != callID {
		t.Fatalf("first missed event %s", st2.seen[0].Raw)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}

	// The whole log from the start: the pre-crash part is byte-identical.
	st3 := openStream(t, base2, "", conv, 0)
	for range preCrash {
		st3.next()
	}
	for i, ev := range preCrash {
		if st3.seen[i].ID != ev.ID || st3.seen[i].Raw != ev.Raw {
			t.Fatalf("event %d differs after restart:\n%s\n%s", ev.ID, ev.Raw, st3.seen[i].Raw)
		}
	}
}

// Acceptance 5, second half of SPEC §8: a call that was executing when the
// process died is reported failed with "outcome unknown", not run again.
func TestKill9WhileExecuting(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := writeProject(t, projectOpts{})
	// Make the pay tool slow so the server dies while it runs; it writes
	// its pid first, and then becomes the sleep.
	pidFile := filepath.Join(dir, "pay.pid")
	must(t, os.WriteFile(filepath.Join(dir, "tools", "pay", "run.sh"),
		[]byte("#!/bin/sh\ncat >/dev/null; echo $$ > '"+pidFile+"'; echo pay >> \"$AGENTD_TEST_LOG\"; exec sleep 1000\n"), 0o755))
	data := t.TempDir()
	env := "AGENTD_TEST_LOG=" + execLog
	base, proc := startProcess(t, bin, dir, data, env)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay")
	id := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	call(t, http.MethodPost, base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
	st.waitFor("tool_call_started", nil)
	for execCount(t, execLog, "pay") == 0 {
		time.Sleep(10 * time.Millisecond) // wait for the process to really start
	}
	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	// The tool runs in its own process group, so the kill above did not
	// reach it: it must die because the server did.
	assertProcessGone(t, pidFile)

	base2, _ := startProcess(t, bin, dir, data, env)
	st2 := openStream(t, base2, "", conv, 0)
	res := st2.waitFor("tool_call_result", nil)
	if res.Data["status"] != "failed" || !strings.Contains(str(res.Data, "error"), "outcome is unknown") {
		t.Fatalf("result after restart: %s", res.Raw)
	}
	msg := st2.waitFor("message", nil)
	if !strings.Contains(str(msg.Data, "content"), "failed") {
		t.Fatalf("model saw %q", msg.Data["content"])
	}
	st2.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay started %d times, want 1", n)
	}
}

// assertProcessGone fails unless the process whose pid is in pidFile is
// dead (gone, or a zombie not yet reaped) before waitLimit; a process still
// running then is killed, so that it does not outlive the test. Elsewhere
// than on Linux it only kills the process.
func assertProcessGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	if runtime.GOOS != "linux" {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Log("not checked: the parent-death signal is Linux only")
		return
	}
	deadline := time.Now().Add(waitLimit)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return // gone
		}
		// The state follows the parenthesised command name.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("tool process %d outlived the server: %s", pid, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Acceptance 6: a subscriber that stops reading does not delay another
// subscriber of the same conversation or the loop; it is cut off and
// catches up exactly on reconnect.
func TestSlowSubscriber(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	// A tool whose result is 200 KB, to fill socket buffers fast.
	must(t, os.WriteFile(filepath.Join(dir, "tools", "big", "run.sh"), []byte("#!/bin/sh\ncat >/dev/null; printf '\"'; i=0; while [ $i -lt 4000 ]; do printf 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'; i=$((i+1)); done; printf '\"'\n"), 0o755))
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, fast := newConversation(t, base, "")

	// The slow subscriber: a raw connection with a tiny receive buffer that never reads.
	// The buffer is set before connecting, so the window scale stays small
	// and reading it back later is quick.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	slow, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	must(t, err)
	defer slow.Close()
	_, err = fmt.Fprintf(slow, "GET /v1/conversations/%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", conv, strings.TrimPrefix(base, "http://"))
	must(t, err)

	const runs = 40
	for i := range runs {
		send(t, base, "", conv, "big")
		fin := fast.waitFor("run_finished", nil)
		if fin.Data["status"] != "completed" {
			t.Fatalf("run %d: %s", i, fin.Raw)
		}
	}
	for i := 1; i < len(fast.seen); i++ {
		if fast.seen[i].ID != fast.seen[i-1].ID+1 {
			t.Fatalf("fast subscriber has a gap: %s", fast.summary())
		}
	}
	lastID := fast.seen[len(fast.seen)-1].ID

	// Now read what the slow subscriber got: the server cut it off before
	// the end. (A normal buffer again, or a 4 KiB window makes reading slow.)
	must(t, slow.(*net.TCPConn).SetReadBuffer(4<<20))
	br := bufio.NewReader(slow)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	s := &eventStream{t: t, resp: resp, events: make(chan sseEvent, 100000)}
	s.read() // until the server closed it
	var got []sseEvent
	for ev := range s.events {
		got = append(got, ev)
	}
	if len(got) == 0 {
		t.Fatal("slow subscriber got nothing at all")
	}
	slowLast := got[len(got)-1].ID

	if slowLast >= lastID {
		t.Fatalf("slow subscriber was not cut off (got up to %d of %d)", slowLast, lastID)
	}
	// It catches up exactly on reconnect.
	re := openStream(t, base, "", conv, slowLast)
	for want := slowLast + 1; want <= lastID; want++ {
		if ev := re.next(); ev.ID != want {
			t.Fatalf("catch-up got id %d, want %d", ev.ID, want)
		}
	}
}
