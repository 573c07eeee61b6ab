// Package webhooktest is what tests of webhook deliveries share: a real HTTP
// receiver on loopback that records every request and answers as told, and
// the check of a body against its event's JSON Schema (webhook.Schemas).
package webhooktest

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/agentd-dev/agentd/internal/jstest"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/webhook"
	"github.com/santhosh-tekuri/jsonschema/v6"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Request is one request a Receiver got.
type Request struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// ID is the request's webhook-id.
func (r Request) ID() string { return r.Header.Get(webhook.HeaderID) }

// EventName is the body's event_context.event_name.
func (r Request) EventName() string {
	var b struct {
		EventContext struct {
			EventName string `json:"event_name"`
		} `json:"event_context"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.EventContext.EventName
}

// Receiver is a webhook receiver on loopback.
type Receiver struct {
	URL string
	srv *httptest.Server
	// Respond answers the n-th request (0-based); nil answers 204.
	Respond func(n int, w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []Request
	got  chan struct{}
}

// NewReceiver starts a receiver that t closes.
func NewReceiver(t testing.TB) *Receiver {
	rc := &Receiver{got: make(chan struct{}, 1)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rc.mu.Lock()
		n := len(rc.reqs)
		rc.reqs = append(rc.reqs, Request{At: time.Now(), Header: r.Header.Clone(), Body: body})
		respond := rc.Respond
		rc.mu.Unlock()
		select {
		case rc.got <- struct{}{}:
		default:
		}
		if respond != nil {
			respond(n, w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	rc.URL = rc.srv.URL + "/hooks"
	t.Cleanup(rc.srv.Close)
	return rc
}

// Close closes the receiver (later deliveries are refused connections).
func (rc *Receiver) Close() { rc.srv.CloseClientConnections(); rc.srv.Close() }

// Requests returns what the receiver got so far.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.reqs...)
}

// WaitFor waits until match holds for the requests so far, failing t
// after limit.
func (rc *Receiver) WaitFor(t testing.TB, limit time.Duration, what string, match func([]Request) bool) []Request {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if reqs := rc.Requests(); match(reqs) {
			return reqs
		}
		select {
		case <-rc.got:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("receiver: %s: not within %s; got %d requests", what, limit, len(rc.Requests()))
		}
	}
}

// WithEvent returns the requests of the event named name.
func WithEvent(reqs []Request, name string) []Request {
	var out []Request
	for _, r := range reqs {
		if r.EventName() == name {
			out = append(out, r)
		}
	}
	return out
}

// Verify checks r's signature with secret using the Standard Webhooks
// reference library (timestamp tolerance included).
func Verify(secret string, r Request) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(r.Body, r.Header)
}

var (
	compileOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	compileErr  error
)

// Validate fails t unless body is valid under the JSON Schema of its
// event_name.
func Validate(t testing.TB, body []byte) {
	t.Helper()
	compileOnce.Do(compile)
	if compileErr != nil {
		t.Fatal(compileErr)
	}
	name := Request{Body: body}.EventName()
	s := schemas[name]
	if s == nil {
		t.Fatalf("body with unknown event_name %q: %s", name, body)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%s body does not match its schema: %v\n%s", name, err, body)
	}
}

func compile() {
	schemas = map[string]*jsonschema.Schema{}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	files, _ := fs.Glob(webhook.Schemas, "schemas/*.json")
	for _, f := range files {
		raw, _ := webhook.Schemas.ReadFile(f)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			compileErr = err
			return
		}
		if err := c.AddResource(f, doc); err != nil {
			compileErr = err
			return
		}
		s, err := c.Compile(f)
		if err != nil {
			compileErr = err
			return
		}
		name := strings.TrimSuffix(strings.TrimPrefix(f, "schemas/"), ".json")
		schemas[name] = s
	}
}

// VerifyWithNode verifies each request's signature with secret using the
// official standardwebhooks npm package (webhook/testdata/js/verify.mjs)
// and returns one result per request: "ok" or "fail: <reason>". It skips
// (or, under scripts/test.sh, fails) when Node or the package is missing.
func VerifyWithNode(t testing.TB, secret string, reqs []Request) []string {
	t.Helper()
	node := jstest.Node(t)
	dir := jstest.Packages(t, "webhook/testdata/js")
	var in bytes.Buffer
	for _, r := range reqs {
		line, _ := json.Marshal(map[string]string{"secret": secret, "id": r.Header.Get(webhook.HeaderID),
			"timestamp": r.Header.Get(webhook.HeaderTimestamp), "signature": r.Header.Get(webhook.HeaderSignature), "body": string(r.Body)})
		in.Write(append(line, '\n'))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "verify.mjs")
	cmd.Dir, cmd.Stdin = dir, &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify.mjs: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
