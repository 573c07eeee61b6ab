package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// openStream opens GET /v1/conversations/{conv}/events with key and
// returns the response once its headers arrived (the server holds the
// stream's slot by then), and a func that closes it.
func (s *server) openStream(key, conv string) (*http.Response, context.CancelFunc) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/conversations/"+conv+"/events", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		s.t.Fatalf("open stream: %v", err)
	}
	s.t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, func() { cancel(); resp.Body.Close() }
}

// TestStreamLimitPerKey: a key holds at most MaxStreamsPerKey streams at
// once, whatever the kind (the event stream, AG-UI, the AI SDK); one more
// is 429 too_many_streams with Retry-After, and applies nothing; another
// key is unaffected; closing a stream frees its slot.
func TestStreamLimitPerKey(t *testing.T) {
	const limit = 3
	keys := []testKey{
		{key: "ka", id: "ka", tenant: "t1", project: "p1", role: agentd.RoleClient},
		{key: "kb", id: "kb", tenant: "t1", project: "p1", role: agentd.RoleClient},
	}
	s := newServer(t, keys, api.Config{MaxStreamsPerKey: limit, Heartbeat: time.Hour})
	convA, convB := s.createConversation("ka"), s.createConversation("kb")
	var closers []context.CancelFunc
	for i := range limit {
		resp, closeIt := s.openStream("ka", convA)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d, want 200 under the limit", i, resp.StatusCode)
		}
		closers = append(closers, closeIt)
	}
	over := s.do("GET", "/v1/conversations/"+convA+"/events", "ka", "", nil)
	want(t, "one stream over the limit", over, http.StatusTooManyRequests, agentd.ETOOMANYSTREAMS)
	if over.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", over.header)
	}
	if !strings.Contains(over.body, fmt.Sprint(limit)) {
		t.Errorf("the 429 does not say the limit: %s", over.body)
	}
	// The chat protocols' streams share the slots, and a refused request
	// applies nothing: no run starts on the thread.
	agui := s.do("POST", "/v1/ag-ui", "ka", `{"threadId":"`+convA+`","runId":"r","messages":[{"id":"1","role":"user","content":"pay"}]}`, nil)
	want(t, "AG-UI over the limit", agui, http.StatusTooManyRequests, agentd.ETOOMANYSTREAMS)
	aisdk := s.do("POST", "/v1/ai-sdk/chat", "ka", `{"id":"`+convA+`","messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"pay"}]}]}`, nil)
	want(t, "AI SDK over the limit", aisdk, http.StatusTooManyRequests, agentd.ETOOMANYSTREAMS)
	if n := s.engine.executed(); n != 0 {
		t.Errorf("a refused protocol request ran %d calls", n)
	}
	r := s.do("GET", "/v1/conversations/"+convA, "ka", "", nil)
	if strings.Contains(r.body, `"role":"user"`) {
		t.Errorf("a refused protocol request sent a message: %s", r.body)
	}

	// Another key is unaffected.
	resp, _ := s.openStream("kb", convB)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another key's stream: %d, want 200", resp.StatusCode)
	}

	// Closing one frees a slot: the server notices the closed connection,
	// so the next stream is accepted once it has (waited on, not slept).
	closers[0]()
	deadline := time.Now().Add(waitLimit)
	for {
		resp, closeIt := s.openStream("ka", convA)
		if resp.StatusCode == http.StatusOK {
			break
		}
		closeIt()
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after closing a stream: %d, want 200 once the slot is free", resp.StatusCode)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// And that was the one free slot.
	want(t, "the limit again", s.do("GET", "/v1/conversations/"+convA+"/events", "ka", "", nil), http.StatusTooManyRequests, agentd.ETOOMANYSTREAMS)
}
