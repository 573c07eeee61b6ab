package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// waitLimit bounds every wait of these tests: a failure deadline, never a
// performance assertion.
const waitLimit = 20 * time.Second

// testKey is one API key of a test server: the key itself and its config.
type testKey struct {
	key                       string
	id, tenant, project, role string
}

// apiKey is k as configured: only the key's SHA-256.
func (k testKey) apiKey() agentd.APIKey {
	sum := sha256.Sum256([]byte(k.key))
	return agentd.APIKey{ID: k.id, SHA256: hex.EncodeToString(sum[:]), TenantID: k.tenant, ProjectID: k.project, Role: k.role}
}

// roleKeys are one key of each role in tenant t1, and an admin key of t2.
var roleKeys = []testKey{
	{key: "k-alice", id: "alice", tenant: "t1", project: "p1", role: agentd.RoleClient},
	{key: "k-bob", id: "bob", tenant: "t1", project: "p1", role: agentd.RoleClient},
	{key: "k-robot", id: "robot", tenant: "t1", project: "p1", role: agentd.RoleDelegate},
	{key: "k-op", id: "op", tenant: "t1", project: "p1", role: agentd.RoleOperator},
	{key: "k-admin", id: "admin", tenant: "t1", project: "p1", role: agentd.RoleAdmin},
	{key: "k-other", id: "other", tenant: "t2", project: "p1", role: agentd.RoleAdmin},
}

type server struct {
	t   *testing.T
	url string
	// engine is the fake engine of newServer (nil for newFakeServer).
	engine *fakeEngine
}

// newServer starts the API on loopback over the fake engine and an
// in-memory store, with keys (none: dev mode) and the other settings of cfg.
func newServer(t *testing.T, keys []testKey, cfg api.Config) *server {
	t.Helper()
	store := newFakeStore()
	engine := newFakeEngine(store)
	s := serve(t, engine, store, keys, cfg)
	s.engine = engine
	return s
}

var client = &http.Client{Timeout: waitLimit}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   string
}

// errorCode returns the code of an error body ("" if it is not one).
func (r response) errorCode() string {
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(r.body), &b)
	return b.Error.Code
}

// do sends one request; header holds extra headers ("Host" sets the Host).
func (s *server) do(method, path, key, body string, header map[string]string) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// want fails the test unless r has the status (and, if code is set, that error code).
func want(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.errorCode() != code) {
		t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
}

// createConversation creates a conversation with key and returns its id.
func (s *server) createConversation(key string) string {
	s.t.Helper()
	r := s.do("POST", "/v1/conversations", key, "", nil)
	want(s.t, "create conversation", r, http.StatusCreated, "")
	var c struct{ ID string }
	if err := json.Unmarshal([]byte(r.body), &c); err != nil || c.ID == "" {
		s.t.Fatalf("create conversation: %s", r.body)
	}
	return c.ID
}

// parkedCall sends a message on conv and returns the parked call's id and
// run id, waiting for it through GET /v1/conversations/{id}.
func (s *server) parkedCall(key, conv string) (callID, runID string) {
	s.t.Helper()
	r := s.do("POST", "/v1/conversations/"+conv+"/messages", key, `{"content":"pay"}`, nil)
	want(s.t, "send", r, http.StatusAccepted, "")
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		r := s.do("GET", "/v1/conversations/"+conv, key, "", nil)
		var v struct {
			ToolCalls []agentd.ToolCall `json:"tool_calls"`
		}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			s.t.Fatalf("conversation: %s", r.body)
		}
		for _, c := range v.ToolCalls {
			if c.Status == agentd.StatusRequiresConfirmation {
				return c.ID, c.RunID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatal("no parked call")
	return "", ""
}

// toolCall returns the call as key sees it.
func (s *server) toolCall(key, id string) agentd.ToolCall {
	s.t.Helper()
	r := s.do("GET", "/v1/tool-calls/"+id, key, "", nil)
	want(s.t, "get tool call", r, http.StatusOK, "")
	var c agentd.ToolCall
	if err := json.Unmarshal([]byte(r.body), &c); err != nil {
		s.t.Fatal(err)
	}
	return c
}
