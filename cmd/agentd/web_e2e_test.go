package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/demo/billing"
	"github.com/agentd-dev/agentd/internal/jstest"
	"github.com/agentd-dev/agentd/web"
)

// The web chat in a real browser: Playwright (web/testdata/js, from npm)
// drives Debian's chromium against the real server on loopback. The Go side
// builds the project, parks the calls the embedding pages decide, runs
// web/testdata/js/browser.test.mjs, and then checks what the server and the
// downstream API saw.

const (
	webClientKey = "web-client-key-1"
	webOtherKey  = "web-client-key-2"
	// xssPayload is model text and tool arguments that would run script if
	// the page ever put them into HTML.
	xssPayload = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`
)

// webRules drive the script model for the browser tests.
var webRules = `[
 {"when":{"user":"(?i)^pay"},"reply":{"text":"Paying 5 EUR now. This needs your approval.","tool_calls":[{"name":"pay","arguments":{"amount":5}}]}},
 {"when":{"user":"(?i)^xss"},"reply":{"text":` + jsonString(xssPayload+` and a <b>bold</b> claim`) + `,"tool_calls":[{"name":"note","arguments":{"text":` + jsonString(xssPayload) + `}}]}},
 {"when":{"user":"(?i)^memo"},"reply":{"text":"I'll change the memo of invoice INV-2002.","tool_calls":[{"name":"billing__updateInvoice","arguments":{"path":{"id":"INV-2002"},"body":{"memo":"Paid by bank transfer","amount":100}}}]}},
 {"when":{"user":"(?i)^slow"},"reply":{"text":"Replacing invoice INV-2001.","tool_calls":[{"name":"request","arguments":{"connection":"billing","method":"PUT","endpoint":"/invoices/INV-2001","data":{"memo":"replaced"},"intent":"write"}}]}},
 {"when":{"user":"(?i)^fix the notes"},"reply":{"text":"Moving the meeting to Tuesday.","tool_calls":[{"name":"edit_file","arguments":{"path":"notes.md","old_text":"Monday","new_text":"Tuesday"}}]}},
 {"when":{"user":"(?i)^write the report"},"reply":{"text":"Writing the report.","tool_calls":[{"name":"write_file","arguments":{"path":"report.md","content":` + jsonString(longReport) + `}}]}},
 {"when":{"tool_result":"edit_file"},"reply":{"text":"edit_file {{status}}"}},
 {"when":{"tool_result":"write_file"},"reply":{"text":"write_file {{status}}"}},
 {"when":{"tool_result":"pay","status":"completed"},"reply":{"text":"paid: {{result}}"}},
 {"when":{"tool_result":"pay","status":"denied"},"reply":{"text":"not paid, you said: {{reason}}"}},
 {"when":{"tool_result":"pay"},"reply":{"text":"pay {{status}}: {{reason}}"}},
 {"when":{"tool_result":"note","status":"completed"},"reply":{"text":"noted: {{result}}"}},
 {"when":{"tool_result":"note"},"reply":{"text":"note {{status}}"}},
 {"when":{"tool_result":"billing__updateInvoice"},"reply":{"text":"updateInvoice {{status}}: {{reason}}{{result}}"}},
 {"when":{"tool_result":"request","status":"expired"},"reply":{"text":"The approval expired; I did not replace the invoice."}},
 {"when":{"tool_result":"request"},"reply":{"text":"request {{status}}: {{reason}}"}}
]`

// longReport is a new file whose diff is taller than the card's diff box.
var longReport = func() string {
	var b strings.Builder
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&b, "report line %d\n", i)
	}
	return b.String()
}()

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// webPolicy is the demo's billing policy plus a PUT whose approval expires
// after 4 seconds (the card left alone).
const webPolicy = `{
  "endpoints": {
    "GET /invoices": {},
    "GET /invoices/{id}": {},
    "POST /refunds": { "confirm": true, "reason": "Moves money back to the customer" },
    "PATCH /invoices/{id}": { "confirm": true, "allow_edit": true, "reason": "Changes an invoice the customer sees" },
    "PUT /invoices/{id}": { "confirm": true, "approval_timeout": "4s", "reason": "Replaces a whole invoice" }
  },
  "defaults": { "read": "auto", "write": "confirm" }
}`

// webFixture is the server, the downstream billing API and two pages of
// other origins: one listed in cors_origins, one not.
type webFixture struct {
	base, execLog  string
	workspace      string
	proxy          *cutProxy
	api            *billing.API
	allowed, other *httptest.Server
}

func newWebFixture(t *testing.T) *webFixture {
	t.Helper()
	f := &webFixture{api: billing.New()}
	downstream := httptest.NewServer(f.api.Handler())
	t.Cleanup(downstream.Close)
	pages := http.NewServeMux()
	pages.HandleFunc("/embed.html", f.embedPage)
	pages.HandleFunc("/copy/", func(w http.ResponseWriter, r *http.Request) {
		// A site may serve its own copy of the module and stylesheet.
		b, ok := web.Asset(strings.TrimPrefix(r.URL.Path, "/copy"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".css") {
			w.Header().Set("Content-Type", "text/css")
		} else {
			w.Header().Set("Content-Type", "text/javascript")
		}
		_, _ = w.Write(b)
	})
	f.allowed = httptest.NewServer(pages)
	f.other = httptest.NewServer(pages)
	t.Cleanup(f.allowed.Close)
	t.Cleanup(f.other.Close)

	dir, execLog := writeProject(t, projectOpts{})
	f.execLog = execLog
	note := filepath.Join(dir, "tools", "note")
	must(t, os.MkdirAll(note, 0o755))
	must(t, os.WriteFile(filepath.Join(note, "run.sh"), []byte("#!/bin/sh\ninput=$(cat); echo note >> \"$AGENTD_TEST_LOG\"; printf '{\"noted\":%s}' \"$input\"\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(note, "tool.json"), []byte(`{"name":"note","description":"Write a note.","command":["/bin/sh","./run.sh"],
 "env":["AGENTD_TEST_LOG"],"exposure":{"kind":"requires-confirmation"},
 "parameters":{"type":"object","properties":{"text":{"type":"string","maxLength":500}},"required":["text"],"additionalProperties":false}}`), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "ws"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "ws", "notes.md"), []byte("# Notes\nMeeting on Monday\n"), 0o644))
	f.workspace = filepath.Join(dir, "ws")
	agent := fmt.Sprintf(`{"name":"web","model":{"provider":"script","script":{"rules":%s}},"max_turns":10,"workspace":"ws"}`, webRules)
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agent), 0o644))
	cdir := filepath.Join(dir, "connections", "billing")
	must(t, os.MkdirAll(cdir, 0o755))
	doc, err := fsRead("connections/billing/openapi.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(cdir, "openapi.json"), doc, 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(webPolicy), 0o644))
	must(t, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(fmt.Sprintf(
		`{"base_url": %q, "auth": {"type": "bearer", "token_env": "BILLING_TOKEN"}, "openapi": "openapi.json"}`, downstream.URL+"/api")), 0o644))
	keys := []map[string]string{
		{"id": "alice", "sha256": sha256Hex(webClientKey), "tenant_id": "t1", "project_id": "p1", "role": "client"},
		{"id": "bob", "sha256": sha256Hex(webOtherKey), "tenant_id": "t1", "project_id": "p1", "role": "client"},
	}
	b, _ := json.Marshal(map[string]any{"api_keys": keys, "cors_origins": []string{f.allowed.URL}})
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	f.base, _ = startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog, "BILLING_TOKEN": billingToken})
	target, err := url.Parse(f.base)
	must(t, err)
	f.proxy = &cutProxy{rp: httputil.NewSingleHostReverseProxy(target), base: f.base}
	ps := httptest.NewServer(f.proxy)
	t.Cleanup(ps.Close)
	f.proxy.url = ps.URL
	return f
}

// cutProxy stands between a page and the server and ends the first stream
// it carries right after its first confirmation_required, as a network
// would; the browser's EventSource then reconnects by itself, with
// Last-Event-ID. It records that header of every stream request.
type cutProxy struct {
	rp        *httputil.ReverseProxy
	base, url string
	mu        sync.Mutex
	streams   []string // Last-Event-ID of each stream request
	cutAfter  int64    // the id of the last event the cut stream passed
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.streams = append(p.streams, r.Header.Get("Last-Event-ID"))
	first := len(p.streams) == 1
	p.mu.Unlock()
	if !first {
		p.rp.ServeHTTP(w, r)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, p.base+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var id int64
	typ := ""
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintf(w, "%s\n", line)
		_ = rc.Flush()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			typ = line[7:]
		case line == "" && typ == "confirmation_required":
			p.mu.Lock()
			p.cutAfter = id
			p.mu.Unlock()
			return // the stream ends here, cleanly
		case line == "":
			typ = ""
		}
	}
}

// embedPage is another site's page with an <agentd-confirmation> for the
// call ?call= and, with ?chat=, an <agentd-chat> of that conversation.
// ?copy=1 loads the site's own copy of the module instead of agentd's.
func (f *webFixture) embedPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	src := f.base + "/agentd.js"
	if q.Get("copy") == "1" {
		src = "/copy/agentd.js"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Shop back office</title>\n")
	fmt.Fprintf(&b, "<script type=\"module\" src=%q></script></head>\n<body><h1>Shop back office</h1>\n", src)
	fmt.Fprintf(&b, "<agentd-confirmation server=%q key=%q tool-call=%q></agentd-confirmation>\n", f.base, q.Get("key"), q.Get("call"))
	if c := q.Get("chat"); c != "" {
		fmt.Fprintf(&b, "<agentd-chat server=%q key=%q conversation=%q></agentd-chat>\n", f.base, q.Get("key"), c)
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// park sends "pay" in a new conversation of key and returns the
// conversation and the parked call.
func (f *webFixture) park(t *testing.T, key string) (conv, callID string) {
	t.Helper()
	conv, st := newConversation(t, f.base, key)
	send(t, f.base, key, conv, "pay 5")
	return conv, str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
}

func (f *webFixture) callStatus(t *testing.T, id string) string {
	t.Helper()
	status, m := call(t, http.MethodGet, f.base+"/v1/tool-calls/"+id, webClientKey, "")
	if status != http.StatusOK {
		t.Fatalf("GET tool call %s: %d %v", id, status, m)
	}
	return str(m, "status")
}

// TestWebChatInBrowser is acceptance 1–4 of the web chat (docs/web.md).
func TestWebChatInBrowser(t *testing.T) {
	node := jstest.Node(t)
	pkgs := jstest.Packages(t, "web/testdata/js")
	chromium := jstest.Chromium(t)
	f := newWebFixture(t)
	embedConv, embedCall := f.park(t, webClientKey)
	_, refusedCall := f.park(t, webClientKey)
	paidBefore := execCount(t, f.execLog, "pay")

	shots := os.Getenv("AGENTD_WEB_SCREENSHOTS") // e.g. docs/img to refresh the committed ones
	if shots == "" {
		shots = t.TempDir()
	} else if !filepath.IsAbs(shots) {
		shots = filepath.Join(jstest.Root(t), shots)
	}
	timings := filepath.Join(t.TempDir(), "timings.json")
	cfg, _ := json.Marshal(map[string]string{
		"base": f.base, "key": webClientKey, "chromium": chromium, "screenshots": shots, "timings": timings,
		"allowedOrigin": f.allowed.URL, "otherOrigin": f.other.URL,
		"proxy":             f.proxy.url,
		"embedConversation": embedConv, "embedCall": embedCall, "refusedCall": refusedCall,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=1", "browser.test.mjs")
	cmd.Dir = pkgs
	cmd.Env = append(os.Environ(), "AGENTD_WEB_TEST="+string(cfg))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browser tests: %v\n%s", err, out)
	}
	t.Logf("browser tests:\n%s", lastLines(string(out), 40))

	// Approve ran each approved call once: the chat's pay and the embedded card's.
	if n := execCount(t, f.execLog, "pay"); n != paidBefore+2 {
		t.Errorf("pay ran %d times after the browser tests, want %d", n-paidBefore, 2)
	}
	if n := execCount(t, f.execLog, "note"); n != 1 {
		t.Errorf("note ran %d times, want 1", n)
	}
	if st := f.callStatus(t, embedCall); st != "completed" {
		t.Errorf("the call approved from the allowed origin is %s, want completed", st)
	}
	if st := f.callStatus(t, refusedCall); st != "requires_confirmation" {
		t.Errorf("the call shown on a page of an unlisted origin is %s, want still requires_confirmation", st)
	}
	// The edit: exactly one PATCH reached billing, with the edited body.
	var patches []billing.Request
	for _, r := range f.api.Requests() {
		if r.Method == http.MethodPatch || r.Method == http.MethodPut {
			patches = append(patches, r)
		}
	}
	if len(patches) != 1 || patches[0].Path != "/api/invoices/INV-2002" {
		t.Fatalf("downstream writes %+v, want one PATCH of INV-2002", patches)
	}
	jsonEqual(t, "edited body", patches[0].Body, `{"memo":"Paid in cash","amount":90}`)
	// The cut stream was resumed by the browser itself, after the last event
	// it had received.
	f.proxy.mu.Lock()
	streams, cut := f.proxy.streams, f.proxy.cutAfter
	f.proxy.mu.Unlock()
	if len(streams) < 2 || streams[0] != "" || streams[1] != strconv.FormatInt(cut, 10) {
		t.Errorf("stream requests through the cutting proxy had Last-Event-ID %q, want \"\" then %d", streams, cut)
	}
	// The file edit approved on its diff card was written.
	if b, err := os.ReadFile(filepath.Join(f.workspace, "notes.md")); err != nil || string(b) != "# Notes\nMeeting on Tuesday\n" {
		t.Errorf("notes.md after the approved edit: %q %v", b, err)
	}
	// The long write was denied on its card: nothing was written.
	if _, err := os.Stat(filepath.Join(f.workspace, "report.md")); !os.IsNotExist(err) {
		t.Errorf("report.md exists after its card was denied: %v", err)
	}
	if b, err := os.ReadFile(timings); err == nil {
		t.Logf("timings: %s", b)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
