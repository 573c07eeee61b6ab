package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/sse"
	"github.com/agentd-dev/agentd/toolset"
)

// waitLimit bounds every wait of these tests: a failure deadline, never a
// performance assertion.
const waitLimit = 20 * time.Second

// payModel answers a user message with one call to the confirm-tier tool
// "pay" and a tool result with plain text.
type payModel struct{}

func (payModel) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(string)) (*agentd.ModelResponse, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agentd.ModelRoleTool {
		return &agentd.ModelResponse{Text: "pay " + string(last.ToolStatus)}, nil
	}
	return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{"amount":5}`)}}}, nil
}

// payTool is a requires-confirmation tool that counts its executions; it
// is the engine's whole toolset.
type payTool struct {
	mu   sync.Mutex
	runs int
}

func (t *payTool) Tools() []toolset.Tool {
	return []toolset.Tool{{
		Spec:        agentd.ToolSpec{Name: "pay", Description: "pays", Parameters: json.RawMessage(`{"type":"object"}`)},
		Confirm:     &confirm.Tool{Name: "pay", ServerID: "tools", Exposure: "requires-confirmation"},
		LLMCallable: true,
	}}
}
func (t *payTool) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	t.mu.Lock()
	t.runs++
	t.mu.Unlock()
	return json.RawMessage(`{"paid":true}`), nil
}

func (t *payTool) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs
}

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

type server struct {
	t    *testing.T
	url  string
	tool *payTool
}

// newServer starts the API on loopback over a real engine and a real SQLite
// file, with keys (none: dev mode) and the other settings of cfg.
func newServer(t *testing.T, keys []testKey, cfg api.Config) *server {
	t.Helper()
	return newServerWith(t, keys, cfg, payModel{})
}

// newServerWith is newServer with another model.
func newServerWith(t *testing.T, keys []testKey, cfg api.Config, model agentd.Model) *server {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hub := sse.NewHub()
	tool := &payTool{}
	engine := loop.New(store, hub, &loop.Agent{Name: "test", Model: model, Tools: tool},
		loop.Options{ExpireEvery: -1})
	if err := engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(engine.Close)
	for _, k := range keys {
		cfg.Keys = append(cfg.Keys, k.apiKey())
	}
	ts := httptest.NewServer(api.New(engine, hub, store, cfg).Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(hub.Close)
	return &server{t: t, url: ts.URL, tool: tool}
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
