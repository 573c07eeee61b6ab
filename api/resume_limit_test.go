package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/protocol/aisdk"
)

// openGet opens GET path with key and returns the response once its
// headers arrived (a stream holds its slot by then), and a func that
// closes it.
func (s *server) openGet(key, path string) (*http.Response, func()) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		s.t.Fatalf("GET %s: %v", path, err)
	}
	s.t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, func() { cancel(); resp.Body.Close() }
}

// runAll marks every run of the fake store running: the chat's turn is
// active, so its resumed stream stays open, waiting for the run's events.
func (s *server) runAll() {
	st := s.engine.store
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range st.runs {
		r.Status = agentd.RunRunning
	}
}

// TestResumedAISDKStreamCountsAgainstTheLimit: GET /v1/ai-sdk/chat/{id}/stream
// (the AI SDK's reconnect) is a stream like any other: while open it holds
// one of its key's MaxStreamsPerKey slots, so the key's next stream of any
// kind is 429 too_many_streams; at the limit a reconnect is itself refused
// with 429 before it reads the chat; closing it frees its slot.
func TestResumedAISDKStreamCountsAgainstTheLimit(t *testing.T) {
	const limit = 2
	keys := []testKey{{key: "ka", id: "ka", tenant: "t1", project: "p1", role: agentd.RoleClient}}
	s := newServer(t, keys, api.Config{MaxStreamsPerKey: limit, Heartbeat: time.Hour})
	chat := s.do("POST", "/v1/ai-sdk/chat", "ka", `{"id":"chat1","messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`, nil)
	want(t, "the chat's first message", chat, http.StatusOK, "")
	conv := chat.header.Get(aisdk.HeaderConversation)
	s.runAll()

	const resume = "/v1/ai-sdk/chat/chat1/stream"
	resumed, closeResumed := s.openGet("ka", resume)
	if resumed.StatusCode != http.StatusOK || resumed.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" {
		t.Fatalf("resume: %d %v, want the active run's stream", resumed.StatusCode, resumed.Header)
	}
	events, _ := s.openGet("ka", "/v1/conversations/"+conv+"/events")
	if events.StatusCode != http.StatusOK {
		t.Fatalf("the second stream: %d, want 200 at the limit", events.StatusCode)
	}
	// Past the limit (opened as streams, so that a wrongly accepted one
	// fails the test at once instead of hanging it).
	if r, closeIt := s.openGet("ka", "/v1/conversations/"+conv+"/events"); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an event stream past the limit: %d, want 429", r.StatusCode)
	} else {
		closeIt()
	}
	over, closeOver := s.openGet("ka", resume)
	if over.StatusCode != http.StatusTooManyRequests || over.Header.Get("Retry-After") == "" {
		t.Fatalf("a resume past the limit: %d %v, want 429 with Retry-After", over.StatusCode, over.Header)
	}
	closeOver()
	want(t, "a resume past the limit", s.do("GET", resume, "ka", "", nil), http.StatusTooManyRequests, agentd.ETOOMANYSTREAMS)

	// Closing the resumed stream frees its slot: the server notices the
	// closed connection, so a stream is accepted once it has (waited on,
	// not slept).
	closeResumed()
	deadline := time.Now().Add(waitLimit)
	for {
		resp, closeIt := s.openGet("ka", "/v1/conversations/"+conv+"/events")
		if resp.StatusCode == http.StatusOK {
			break
		}
		closeIt()
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after closing the resumed stream: %d, want 200 once its slot is free", resp.StatusCode)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
