package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveWithLog runs the server and returns its base URL and its log.
func serveWithLog(t *testing.T, args ...string) (string, *syncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"serve"}, args...), os.Getenv, pw, logs)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("server did not start: %v\n%s", err, logs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("server: %v", err)
				}
			case <-time.After(waitLimit):
				t.Error("server did not stop")
			}
		})
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "agentd listening on ")), logs, stop
}

// Keys never reach the log, neither from the header nor from ?access_token=.
func TestSecretsStayOutOfLogs(t *testing.T) {
	key := "sk-very-secret-key-123456"
	dir, _ := writeProject(t, projectOpts{keys: map[string][3]string{key: {"t1", "client", ""}}})
	base, logs, stop := serveWithLog(t, "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir())
	conv, st := newConversation(t, base, key)
	st.close()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/conversations/"+conv+"/events?access_token="+key+"&last_event_id=0", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	resp, err := testClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream with access_token: %s", resp.Status)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // until the client deadline ends it
	resp.Body.Close()
	stop()
	out := logs.String()
	if !strings.Contains(out, `"path":"/v1/conversations/`+conv+`/events"`) {
		t.Fatalf("the stream request was not logged:\n%s", out)
	}
	if strings.Contains(out, key) || strings.Contains(out, "access_token") {
		t.Fatalf("the key leaked into the log:\n%s", out)
	}
	if strings.Contains(out, "DEV MODE") {
		t.Fatal("dev-mode warning with keys configured")
	}
}

// Dev mode: no keys → loopback only, and a loud warning; load errors name the file.
func TestServeRefusals(t *testing.T) {
	dir, _ := writeProject(t, projectOpts{})
	err := run(context.Background(), []string{"serve", "--project", dir, "--addr", "0.0.0.0:0", "--data", t.TempDir()}, os.Getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "without API keys") {
		t.Fatalf("non-loopback without keys: %v", err)
	}

	_, logs, stop := serveWithLog(t, "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir())
	stop()
	if !strings.Contains(logs.String(), "DEV MODE") {
		t.Fatalf("no dev-mode warning:\n%s", logs.String())
	}

	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(`{"name":"x","model":{"provider":"script","script":{"rules":[]}},"approval_timeout":"soon"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"serve", "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir()}, os.Getenv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "agent.json") || !strings.Contains(err.Error(), "approval_timeout") {
		t.Fatalf("bad agent.json: %v", err)
	}
}

// With no --project the embedded demo runs: its tools are listed with their tiers.
func TestServeEmbeddedDemo(t *testing.T) {
	base, _, stop := serveWithLog(t, "--addr", "127.0.0.1:0", "--data", t.TempDir())
	defer stop()
	status, body := call(t, http.MethodGet, base+"/v1/tools", "", "")
	if status != 200 {
		t.Fatalf("tools: %d", status)
	}
	tiers := map[string]string{}
	list, _ := body["tools"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		tiers[str(m, "name")] = str(m, "tier")
	}
	want := map[string]string{"lookup_order": "auto", "refund_payment": "confirm", "rotate_keys": "auto"}
	for n, tier := range want {
		if tiers[n] != tier {
			t.Errorf("tool %s tier %q, want %q (all: %v)", n, tiers[n], tier, tiers)
		}
	}
	if _, ok := tiers["wipe_database"]; ok {
		t.Error("wipe_database (llm_callable: false) is listed for the model")
	}
	if s, _ := call(t, http.MethodGet, base+"/readyz", "", ""); s != 200 {
		t.Fatalf("readyz %d", s)
	}
}
