package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// receiver is the downstream API of the durable tool's connection: it
// counts the requests it gets by path and keeps their Idempotency-Keys.
type receiver struct {
	mu   sync.Mutex
	hits map[string]int
	keys map[string][]string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.hits[req.URL.Path]++
	n := r.hits[req.URL.Path]
	r.keys[req.URL.Path] = append(r.keys[req.URL.Path], req.Header.Get("Idempotency-Key"))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"path": req.URL.Path, "hit": n})
}

func (r *receiver) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

const durableRules = `[
 {"when":{"user":"^sync$"},"reply":{"tool_calls":[{"name":"sync_orders"}]}},
 {"when":{"tool_result":"sync_orders"},"reply":{"text":"sync_orders {{status}}: {{result}}{{reason}}"}}
]`

// Issue 21 acceptance 3 on the real binary: a durable command tool makes
// a confirm-tier write without confirmed_write (it gets the preview
// object, nothing is sent), then sends the first write, and blocks before
// the second until a file appears; the server is killed with kill -9
// there. After the restart recovery runs the call again (it is not failed
// "outcome unknown"): its first write is answered from the journal and not
// sent again, the second is sent, and the receiver counts each once.
func TestDurableToolResumesAfterKill9E2E(t *testing.T) {
	bin, helper := agentdBinary(t), ctxcallHelper(t)
	recv := &receiver{hits: map[string]int{}, keys: map[string][]string{}}
	downstream := httptest.NewServer(recv)
	t.Cleanup(downstream.Close)

	dir, execLog := writeProject(t, projectOpts{})
	writeAgent(t, dir, durableRules, nil)
	cdir := filepath.Join(dir, "connections", "orders")
	must(t, os.MkdirAll(cdir, 0o755))
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(`{"base_url": "`+downstream.URL+`/api"}`), 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(`{"endpoints": {
		"POST /first": {"confirm": true, "reason": "Books the order"}, "POST /second": {"confirm": true}}}`), 0o644))
	goFile := filepath.Join(t.TempDir(), "go")
	const (
		preview = `'{"connection":"orders","method":"POST","endpoint":"/first","data":{"order":"A-1"},"intent":"write"}'`
		first   = `'{"connection":"orders","method":"POST","endpoint":"/first","data":{"order":"A-1"},"intent":"confirmed_write"}'`
		second  = `'{"connection":"orders","method":"POST","endpoint":"/second","data":{"order":"A-1"},"intent":"confirmed_write"}'`
	)
	ctxTool(t, dir, "sync_orders", `cat >/dev/null
a=$("$CTXCALL" /request `+preview+` /request `+first+`) || exit 1
echo sync_orders >> "$AGENTD_TEST_LOG"
while [ ! -e "$DURABLE_GO" ]; do sleep 0.05; done
b=$("$CTXCALL" /request `+second+`) || exit 1
printf '{"before":%s,"after":%s}' "$a" "$b"`,
		map[string]any{"confirm": true, "execution": "durable", "timeout_ms": 120000,
			"env": []string{"CTXCALL", "AGENTD_TEST_LOG", "DURABLE_GO"}})

	data := t.TempDir()
	env := []string{"AGENTD_TEST_LOG=" + execLog, "CTXCALL=" + helper, "DURABLE_GO=" + goFile}
	base, proc := startProcess(t, bin, dir, data, env...)
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "sync")
	deadline := time.Now().Add(waitLimit)
	for execCount(t, execLog, "sync_orders") == 0 { // the first write was answered
		if time.Now().After(deadline) {
			t.Fatalf("the tool did not make its first request: %s", st.summary())
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()
	if recv.count("/api/first") != 1 || recv.count("/api/second") != 0 {
		t.Fatalf("before the restart the receiver got %v, want the first write once", recv.hits)
	}

	must(t, os.WriteFile(goFile, nil, 0o644))
	base2, _ := startProcess(t, bin, dir, data, env...)
	st2 := openStream(t, base2, "", conv, 0)
	m := st2.waitFor("message", func(e sseEvent) bool { return strings.HasPrefix(str(e.Data, "content"), "sync_orders ") })
	st2.waitFor("run_finished", nil)
	text, ok := strings.CutPrefix(str(m.Data, "content"), "sync_orders completed: ")
	if !ok {
		t.Fatalf("the call did not complete after the restart: %s", m.Raw)
	}
	if n := execCount(t, execLog, "sync_orders"); n != 2 {
		t.Fatalf("the tool's first part ran %d times, want 2 (the run before the kill and the re-run)", n)
	}
	if recv.count("/api/first") != 1 || recv.count("/api/second") != 1 {
		t.Fatalf("the receiver got %v, want the first write once in total and the second once", recv.hits)
	}
	key := recv.keys["/api/first"][0]
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(key) || recv.keys["/api/second"][0] == key {
		t.Fatalf("Idempotency-Keys %v, want a derived key per child", recv.keys)
	}

	var got struct {
		Before []ctxAnswer `json:"before"`
		After  []ctxAnswer `json:"after"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil || len(got.Before) != 2 || len(got.After) != 1 {
		t.Fatalf("tool result %s: %v", text, err)
	}
	p, _ := got.Before[0].Body["preview"].(map[string]any)
	if got.Before[0].Code != 200 || str(p, "tier") != "confirm" || str(p, "endpoint") != "/first" ||
		!strings.Contains(str(p, "instruction"), "confirmed_write") {
		t.Fatalf("the write without confirmed_write answered %+v, want the preview object", got.Before[0])
	}
	// The re-run's first write got the journaled answer: the receiver's
	// one answer, with the key it was sent with.
	jb, _ := got.Before[1].Body["body"].(map[string]any)
	if got.Before[1].Code != 200 || jb["hit"] != 1.0 || str(got.Before[1].Body, "idempotency_key") != key {
		t.Fatalf("the re-run's first write answered %+v, want the journaled answer (hit 1, key %s)", got.Before[1], key)
	}
	if got.After[0].Code != 200 || got.After[0].Body["status"] != 200.0 {
		t.Fatalf("the second write answered %+v", got.After[0])
	}
}
