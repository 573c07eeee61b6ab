package connections

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
)

// classified is a call of tool as the loop records it once package confirm
// has classified it for tenant t1 (loop's classify): the effective
// arguments and the HTTP request Decide resolved. A call whose arguments
// no request can be made of records none, and Execute sends nothing.
func classified(tool *confirm.Tool, id, args string) agentd.ToolCall {
	d := confirm.Classify(confirm.Call{Name: tool.Name, Arguments: json.RawMessage(args), Tool: tool, TenantID: "t1"})
	return agentd.ToolCall{ID: id, TenantID: "t1", Name: tool.Name, ServerID: d.ServerID, Arguments: d.Arguments,
		Method: d.Method, Endpoint: d.Endpoint, ConnectionName: d.Connection, PathTemplate: d.PathTemplate, Params: d.Params}
}

// requestCall is a call of the request tool rt, classified.
func requestCall(rt *RequestTool, id, args string) agentd.ToolCall {
	return classified(rt.Confirm(), id, args)
}

// writeProject writes files (paths relative to the project dir) into a new
// temporary project and returns its dir.
func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// envOf returns a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// loadOne loads a project with one connection "api" from its
// connection.json (and optional extra files of the connection folder).
func loadConn(t *testing.T, connectionJSON string, env map[string]string, extra map[string]string) *Connection {
	t.Helper()
	files := map[string]string{"connections/api/connection.json": connectionJSON}
	for k, v := range extra {
		files["connections/api/"+k] = v
	}
	conns, err := Load(writeProject(t, files), envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 {
		t.Fatalf("loaded %d connections", len(conns))
	}
	return conns[0]
}

// recorded is one request a recorder received.
type recorded struct {
	Method   string
	Path     string // escaped
	RawQuery string
	Header   http.Header
	Body     []byte
}

// recorder is a real loopback HTTP server that records every request.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

// newRecorder starts a recording server; h answers (nil: 200 {"ok":true}).
func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{Method: req.Method, Path: req.URL.EscapedPath(), RawQuery: req.URL.RawQuery,
			Header: req.Header.Clone(), Body: body})
		r.mu.Unlock()
		if h != nil {
			h(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

// durableRead performs a request-tool call on the durable path, which
// must answer a Result.
func durableRead(t *testing.T, c *Connection, args string) Result {
	t.Helper()
	out, preview, err := NewDurable([]*Connection{c}).Request(context.Background(), c.Name, json.RawMessage(args),
		agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator}, "")
	r, ok := out.(Result)
	if err != nil || preview || !ok {
		t.Fatalf("durable %s: %v, %v, %v", args, out, preview, err)
	}
	return r
}
