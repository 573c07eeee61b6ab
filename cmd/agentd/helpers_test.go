package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitLimit bounds how long a test waits for something that should happen;
// it is a failure deadline, never a performance assertion.
const waitLimit = 30 * time.Second

// Every request of these tests has a deadline: a broken server fails the
// test instead of hanging it. Streams are bounded per event (next) and for
// their response headers. testClient validates every exchange against the
// API's OpenAPI document (openapi_test.go).
var (
	testClient   = &http.Client{Timeout: waitLimit, Transport: openAPICheck{http.DefaultTransport}}
	streamClient = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: waitLimit}}
)

// testTool is one command tool of a test project.
type testTool struct {
	name, exposure string
	params         string // JSON Schema
	script         string // /bin/sh body; $AGENTD_TEST_LOG is the execution log
	timeoutMS      int
}

var defaultTools = []testTool{
	{name: "record", script: `cat >/dev/null; echo "record" >> "$AGENTD_TEST_LOG"; printf '{"ok":true}'`},
	{name: "pay", exposure: "requires-confirmation",
		params: `{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"],"additionalProperties":false}`,
		script: `input=$(cat); echo "pay" >> "$AGENTD_TEST_LOG"; printf '{"paid":true,"request":%s}' "$input"`},
	{name: "garbage", script: `cat >/dev/null; printf 'this is {{{ not json'`},
	{name: "hang", script: `cat >/dev/null; sleep 1000`, timeoutMS: 300},
	{name: "fail", script: `cat >/dev/null; echo "boom: disk on fire" >&2; exit 3`},
	{name: "big", script: `cat >/dev/null; printf '"'; i=0; while [ $i -lt 400 ]; do printf 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'; i=$((i+1)); done; printf '"'`},
}

const defaultRules = `[
 {"when":{"user":"(?i)^pay"},"reply":{"text":"Paying now.","tool_calls":[{"name":"pay","arguments":{"amount":5}}]}},
 {"when":{"user":"(?i)^both"},"reply":{"tool_calls":[{"name":"record","arguments":{}},{"name":"pay","arguments":{"amount":7}}]}},
 {"when":{"user":"(?i)^bad args"},"reply":{"tool_calls":[{"name":"pay","arguments":{"amount":"lots"}}]}},
 {"when":{"user":"(?i)^garbage"},"reply":{"tool_calls":[{"name":"garbage","arguments":{}}]}},
 {"when":{"user":"(?i)^hang"},"reply":{"tool_calls":[{"name":"hang","arguments":{}}]}},
 {"when":{"user":"(?i)^fail"},"reply":{"tool_calls":[{"name":"fail","arguments":{}}]}},
 {"when":{"user":"(?i)^big"},"reply":{"tool_calls":[{"name":"big","arguments":{}}]}},
 {"when":{"user":"(?i)^unknown"},"reply":{"tool_calls":[{"name":"nope","arguments":{}}]}},
 {"when":{"tool_result":"pay","status":"completed"},"reply":{"text":"paid: {{result}}"}},
 {"when":{"tool_result":"pay","status":"denied"},"reply":{"text":"not paid, reason: {{reason}}"}},
 {"when":{"tool_result":"pay","status":"expired"},"reply":{"text":"status {{status}}: {{reason}}"}},
 {"when":{"tool_result":"pay"},"reply":{"text":"pay {{status}}: {{reason}}"}},
 {"when":{"tool_result":"record"},"reply":{"text":"recorded"}},
 {"when":{"tool_result":"garbage"},"reply":{"text":"garbage {{status}}: {{result}}"}},
 {"when":{"tool_result":"hang"},"reply":{"text":"hang {{status}}: {{reason}}"}},
 {"when":{"tool_result":"fail"},"reply":{"text":"fail {{status}}: {{reason}}"}},
 {"when":{"tool_result":"big"},"reply":{"text":"big {{status}}"}},
 {"when":{"tool_result":"nope"},"reply":{"text":"nope {{status}}: {{reason}}"}}
]`

type projectOpts struct {
	approvalTimeout string
	keys            map[string][3]string // key -> tenant, role, project ("" = p1)
}

// writeProject writes a test project and returns its folder and the path
// of the execution log its tools append to.
func writeProject(t *testing.T, o projectOpts) (dir, execLog string) {
	t.Helper()
	dir = t.TempDir()
	execLog = filepath.Join(dir, "exec.log")
	if o.approvalTimeout == "" {
		o.approvalTimeout = "15m"
	}
	agent := fmt.Sprintf(`{"name":"test","system_prompt":"You are a test agent.","model":{"provider":"script","script":{"rules":%s}},"approval_timeout":%q,"max_turns":10}`,
		defaultRules, o.approvalTimeout)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	for _, tt := range defaultTools {
		td := filepath.Join(dir, "tools", tt.name)
		must(t, os.MkdirAll(td, 0o755))
		must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755))
		def := map[string]any{"name": tt.name, "description": "test tool " + tt.name, "command": []string{"/bin/sh", "./run.sh"},
			"env": []string{"AGENTD_TEST_LOG"}}
		if tt.params != "" {
			def["parameters"] = json.RawMessage(tt.params)
		}
		if tt.exposure != "" {
			def["exposure"] = map[string]string{"kind": tt.exposure}
		}
		if tt.timeoutMS > 0 {
			def["timeout_ms"] = tt.timeoutMS
		}
		b, _ := json.Marshal(def)
		must(t, os.WriteFile(filepath.Join(td, "tool.json"), b, 0o644))
	}
	if len(o.keys) > 0 {
		var keys []map[string]string
		i := 0
		for key, tr := range o.keys {
			sum := sha256.Sum256([]byte(key))
			proj := tr[2]
			if proj == "" {
				proj = "p1"
			}
			keys = append(keys, map[string]string{"id": fmt.Sprintf("key%d", i), "sha256": hex.EncodeToString(sum[:]),
				"tenant_id": tr[0], "project_id": proj, "role": tr[1]})
			i++
		}
		b, _ := json.Marshal(map[string]any{"api_keys": keys})
		must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	}
	return dir, execLog
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startServer runs the real run() on a loopback port and returns its base
// URL; env is set for the test (tools inherit the server's filtered environment).
func startServer(t *testing.T, projectDir, dataDir string, env map[string]string) (base string, stop func()) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	base, _, stop = serveWithLog(t, "--project", projectDir, "--addr", "127.0.0.1:0", "--data", dataDir)
	t.Cleanup(stop)
	return base, stop
}

// call does one JSON request and returns the status and the decoded body.
func call(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	status, raw := callRaw(t, method, url, key, body)
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: response is not JSON: %q", method, url, raw)
		}
	}
	return status, m
}

func callRaw(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := testClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, raw
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// sseEvent is one parsed event of the stream.
type sseEvent struct {
	ID   int64
	Type string
	Data map[string]any
	Raw  string
}

// eventStream reads a conversation's SSE stream with its own small parser,
// independent of the server's writer.
type eventStream struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent
	seen   []sseEvent
}

func openStream(t *testing.T, base, key, conv string, lastEventID int64) *eventStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/conversations/"+conv+"/events", nil)
	must(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := streamClient.Do(req)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %s %s", resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream content type %q", ct)
	}
	s := &eventStream{t: t, resp: resp, events: make(chan sseEvent, 4096)}
	go s.read()
	t.Cleanup(s.close)
	return s
}

func (s *eventStream) close() { s.resp.Body.Close() }

func (s *eventStream) read() {
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var ev sseEvent
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" {
				ev.Raw = data.String()
				if err := json.Unmarshal([]byte(ev.Raw), &ev.Data); err != nil {
					s.t.Errorf("event %d (%s): data is not JSON: %v: %s", ev.ID, ev.Type, err, ev.Raw)
				}
				s.events <- ev
			}
			ev, data = sseEvent{}, strings.Builder{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				s.t.Errorf("event id %q: %v", line[4:], err)
			}
			ev.ID = id
		case strings.HasPrefix(line, "event: "):
			ev.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			data.WriteString(line[6:])
		}
	}
}

// next returns the next event, failing the test if none comes in time.
func (s *eventStream) next() sseEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("stream ended; saw %s", s.summary())
		}
		s.seen = append(s.seen, ev)
		return ev
	case <-time.After(waitLimit):
		s.t.Fatalf("no event in time; saw %s", s.summary())
	}
	return sseEvent{}
}

// waitFor reads events until one matches.
func (s *eventStream) waitFor(typ string, match func(sseEvent) bool) sseEvent {
	s.t.Helper()
	for {
		ev := s.next()
		if ev.Type == typ && (match == nil || match(ev)) {
			return ev
		}
	}
}

func (s *eventStream) summary() string {
	var b strings.Builder
	for _, ev := range s.seen {
		fmt.Fprintf(&b, "%d:%s ", ev.ID, ev.Type)
	}
	return b.String()
}

func str(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

// execCount counts lines of name in the execution log.
func execCount(t *testing.T, execLog, name string) int {
	t.Helper()
	b, err := os.ReadFile(execLog)
	if os.IsNotExist(err) {
		return 0
	}
	must(t, err)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == name {
			n++
		}
	}
	return n
}

// newConversation creates a conversation and opens its stream.
func newConversation(t *testing.T, base, key string) (string, *eventStream) {
	t.Helper()
	status, conv := call(t, http.MethodPost, base+"/v1/conversations", key, `{}`)
	if status != http.StatusCreated {
		t.Fatalf("create conversation: %d %v", status, conv)
	}
	id := str(conv, "id")
	return id, openStream(t, base, key, id, 0)
}

func send(t *testing.T, base, key, conv, content string) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"content": content})
	status, m := call(t, http.MethodPost, base+"/v1/conversations/"+conv+"/messages", key, string(b))
	if status != http.StatusAccepted {
		t.Fatalf("send: %d %v", status, m)
	}
	return m
}
