package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// frames are the data lines of an SSE body.
func frames(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(body, "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("frame %q: %v", d, err)
		}
		out = append(out, m)
	}
	return out
}

// runError is the RUN_ERROR frame of an AG-UI body (nil if none).
func runError(t *testing.T, body string) map[string]any {
	for _, f := range frames(t, body) {
		if f["type"] == "RUN_ERROR" {
			return f
		}
	}
	return nil
}

// Bad bodies get a clear 4xx before any stream starts, and reach nothing.
func TestProtocolBadBodies(t *testing.T) {
	keys := []testKey{{key: "k1", id: "k1", tenant: "t1", project: "p1", role: agentd.RoleClient}}
	s, fake := newFakeServer(t, keys, api.Config{MaxBodyBytes: 4096})
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"ag-ui malformed", "/v1/ag-ui", `{"threadId":"t","runId":`, 400, agentd.EINVALID},
		{"ag-ui not an object", "/v1/ag-ui", `[1,2]`, 400, agentd.EINVALID},
		{"ag-ui empty", "/v1/ag-ui", ``, 400, agentd.EINVALID},
		{"ag-ui threadId type", "/v1/ag-ui", `{"threadId":5,"runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui messages type", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":{}}`, 400, agentd.EINVALID},
		{"ag-ui resume type", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":1}]}`, 400, agentd.EINVALID},
		{"ag-ui no runId", "/v1/ag-ui", `{"threadId":"t","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui no threadId", "/v1/ag-ui", `{"runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui long threadId", "/v1/ag-ui", `{"threadId":"` + strings.Repeat("x", 300) + `","runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui duplicate key", "/v1/ag-ui", `{"threadId":"t","threadId":"u","runId":"r","messages":[]}`, 400, agentd.EINVALID},
		{"ag-ui bad payload", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"c","status":"resolved","payload":{"approved":"yes"}}]}`, 400, agentd.EINVALID},
		{"ag-ui user content type", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":7}]}`, 400, agentd.EINVALID},
		{"ag-ui oversized", "/v1/ag-ui", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, agentd.ETOOLARGE},
		{"ai-sdk malformed", "/v1/ai-sdk/chat", `{"id":`, 400, agentd.EINVALID},
		{"ai-sdk no id", "/v1/ai-sdk/chat", `{"messages":[]}`, 400, agentd.EINVALID},
		{"ai-sdk id type", "/v1/ai-sdk/chat", `{"id":["c"],"messages":[]}`, 400, agentd.EINVALID},
		{"ai-sdk regenerate", "/v1/ai-sdk/chat", `{"id":"c","trigger":"regenerate-message","messages":[]}`, 400, agentd.EINVALID},
		{"ai-sdk parts type", "/v1/ai-sdk/chat", `{"id":"c","messages":[{"id":"1","role":"user","parts":"hi"}]}`, 400, agentd.EINVALID},
		{"ai-sdk approval without approved", "/v1/ai-sdk/chat", `{"id":"c","messages":[{"id":"1","role":"assistant","parts":[{"type":"tool-pay","toolCallId":"c1","state":"approval-responded","approval":{"id":"c1"}}]}]}`, 400, agentd.EINVALID},
		{"ai-sdk oversized", "/v1/ai-sdk/chat", `{"id":"c","messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}]}]}`, 413, agentd.ETOOLARGE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fake.count()
			r := s.do("POST", tc.path, "k1", tc.body, nil)
			want(t, tc.name, r, tc.status, tc.code)
			if n := fake.count(); n != before {
				t.Errorf("a bad body reached the service (%d calls)", n-before)
			}
		})
	}
	// No key: 401, as everywhere.
	want(t, "no key", s.do("POST", "/v1/ag-ui", "", `{"threadId":"t","runId":"r","messages":[]}`, nil), 401, agentd.EUNAUTHORIZED)
}

// Another tenant's conversation named as the thread is a 404 that reads as
// a ghost's; an unknown interrupt is a RUN_ERROR and decides nothing.
func TestProtocolOtherTenantAndUnknownInterrupt(t *testing.T) {
	keys := []testKey{
		{key: "k1", id: "k1", tenant: "t1", project: "p1", role: agentd.RoleAdmin},
		{key: "k2", id: "k2", tenant: "t2", project: "p1", role: agentd.RoleAdmin},
	}
	s, fake := newFakeServer(t, keys, api.Config{})
	r := s.do("POST", "/v1/conversations", "k1", "", nil)
	var conv struct{ ID string }
	_ = json.Unmarshal([]byte(r.body), &conv)
	ghost := agentd.NewID(agentd.PrefixConversation)
	for _, path := range []string{"/v1/ag-ui", "/v1/ai-sdk/chat"} {
		body := func(thread string) string {
			if path == "/v1/ag-ui" {
				return fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":[{"id":"1","role":"user","content":"hi"}]}`, thread)
			}
			return fmt.Sprintf(`{"id":%q,"messages":[{"id":"1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`, thread)
		}
		other := s.do("POST", path, "k2", body(conv.ID), nil)
		missing := s.do("POST", path, "k2", body(ghost), nil)
		want(t, path+" other tenant's conversation", other, http.StatusNotFound, agentd.ENOTFOUND)
		if other.body != missing.body {
			t.Errorf("%s: another tenant's conversation reads %s, a ghost %s", path, other.body, missing.body)
		}
	}
	for _, c := range fake.calls {
		if c.method == "Send" {
			t.Fatalf("a message reached another tenant's conversation: %+v", c)
		}
	}
	// The fake's calls belong to no conversation: the interrupt is unknown.
	r = s.do("POST", "/v1/ag-ui", "k1", fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":[],"resume":[{"interruptId":"call_x","status":"resolved","payload":{"approved":true}}]}`, conv.ID), nil)
	want(t, "unknown interrupt", r, http.StatusOK, "")
	if e := runError(t, r.body); e == nil || e["code"] != agentd.ENOTFOUND || !strings.Contains(e["message"].(string), "unknown interrupt") {
		t.Errorf("unknown interrupt: %s", r.body)
	}
	// The engine was asked to decide only a call of this thread.
	if c := fake.last(); c.method != "Decide" || c.req.(agentd.DecisionRequest).ConversationID != conv.ID {
		t.Errorf("the decision did not name the thread's conversation: %+v", c)
	}
	// A resume on a thread nobody has used: unknown interrupt, no conversation made.
	before := fake.count()
	r = s.do("POST", "/v1/ag-ui", "k1", `{"threadId":"never-used","runId":"r","messages":[],"resume":[{"interruptId":"call_x","status":"cancelled"}]}`, nil)
	if e := runError(t, r.body); e == nil || e["code"] != agentd.ENOTFOUND {
		t.Errorf("resume on a new thread: %s", r.body)
	}
	for _, c := range fake.calls[before:] {
		if c.method == "CreateConversation" {
			t.Errorf("a resume created a conversation")
		}
	}
}
