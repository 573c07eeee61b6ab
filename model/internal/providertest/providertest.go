// Package providertest is a loopback fake of a model provider's HTTP API for
// the provider packages' tests: it answers each request with the next
// scripted reply (an SSE body read from testdata, an error status with
// headers, or a handler of its own) and records every request it receives.
// It is imported by tests only.
package providertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// Reply is one scripted answer.
type Reply struct {
	Status  int               // 200 when zero
	Header  map[string]string // extra response headers
	Body    string            // written as it is
	Handler http.HandlerFunc  // when set, answers instead of Status, Header and Body
}

// Request is one request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Server is a fake provider on a loopback port.
type Server struct {
	*httptest.Server
	t        testing.TB
	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// New starts a server that answers the n-th request with replies[n] and
// every request past the script with a 500 and a test error. It stops
// when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var reply Reply
	ok := n < len(s.replies)
	if ok {
		reply = s.replies[n]
	}
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("fake provider: unexpected request %d to %s", n+1, r.URL.Path)
		http.Error(w, `{"error":{"message":"no scripted reply"}}`, http.StatusInternalServerError)
		return
	}
	if reply.Handler != nil {
		reply.Handler(w, r)
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply.Body)
}

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// SSE is a 200 reply with the server-sent events in the file path,
// written with a flush after every event, as a provider streams them.
func SSE(t testing.TB, path string) Reply {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Reply{Handler: StreamEvents(string(b))}
}

// StreamEvents returns a handler that writes body event by event (split on
// blank lines), flushing after each.
func StreamEvents(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		for _, ev := range strings.SplitAfter(body, "\n\n") {
			if ev == "" {
				continue
			}
			if _, err := io.WriteString(w, ev); err != nil {
				return
			}
			_ = http.NewResponseController(w).Flush()
		}
	}
}

// Error is a reply with status and a JSON body.
func Error(status int, body string, header map[string]string) Reply {
	return Reply{Status: status, Body: body, Header: header}
}
