package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/rs/zerolog"
)

// fakeLinks is a behavioural fake of api.Links: token "ok" (or any
// "secret-…") is a pending approve link, "deny" a pending deny link;
// "spent", "decided", "broken-secret" and any other token answer as a
// spent, decided, failing (EINTERNAL) or unknown link.
type fakeLinks struct {
	minted     []string // the key ids that minted
	usedReason string
}

func (f *fakeLinks) Mint(_ context.Context, p agentd.Principal, id, ttl string) (*agentd.DecisionLinks, error) {
	if ttl == "bad" {
		return nil, agentd.Errorf(agentd.EINVALID, `"ttl" must be a positive Go duration`)
	}
	if p.Role == agentd.RoleClient {
		return nil, agentd.Errorf(agentd.EAPPROVERNOTALLOWED, "approvers are operator")
	}
	f.minted = append(f.minted, p.KeyID)
	return &agentd.DecisionLinks{Approve: "ok", Deny: "deny", ExpiresAt: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}, nil
}

func (f *fakeLinks) view(token string) (*agentd.LinkView, error) {
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	call := &agentd.ToolCall{ID: "call_1", Name: "pay", Arguments: json.RawMessage(`{"amount":5,"memo":"<script>x</script>"}`),
		Reason: "needs approval", RequiresApprovalAt: &at}
	switch {
	case token == "broken-secret":
		return nil, agentd.Errorf(agentd.EINTERNAL, "the store failed")
	case strings.HasPrefix(token, "secret-"):
		token = "ok"
	}
	switch token {
	case "ok":
		return &agentd.LinkView{Decision: "approve", ExpiresAt: at, Call: call}, nil
	case "deny":
		return &agentd.LinkView{Decision: "deny", ExpiresAt: at, Call: call}, nil
	case "spent":
		return nil, agentd.Errorf(agentd.EGONE, "this decision link was already used")
	case "decided":
		return nil, agentd.Errorf(agentd.ECONFLICT, "the call was already decided another way")
	}
	return nil, agentd.Errorf(agentd.ENOTFOUND, "no such decision link")
}

func (f *fakeLinks) Open(_ context.Context, token string) (*agentd.LinkView, error) {
	return f.view(token)
}

func (f *fakeLinks) Use(_ context.Context, token, reason string) (*agentd.LinkView, *agentd.Decision, error) {
	v, err := f.view(token)
	if err != nil {
		return nil, nil, err
	}
	f.usedReason = reason
	return v, &agentd.Decision{Decision: v.Decision}, nil
}

// TestMintLinks: the links' URLs start with public_url when set, else the
// request's host; the engine's refusals keep their codes.
func TestMintLinks(t *testing.T) {
	keys := []testKey{{key: "k-op", id: "op", tenant: "t1", project: "p1", role: agentd.RoleOperator},
		{key: "k-c", id: "c", tenant: "t1", project: "p1", role: agentd.RoleClient}}
	links := &fakeLinks{}
	s := newServer(t, keys, api.Config{Links: links})
	r := s.do("POST", "/v1/tool-calls/call_1/links", "k-op", "", map[string]string{"Host": "agentd.example.com"})
	want(t, "mint", r, http.StatusOK, "")
	var got agentd.DecisionLinks
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || got.Approve != "http://agentd.example.com/d/ok" || got.Deny != "http://agentd.example.com/d/deny" {
		t.Fatalf("links %s (%v)", r.body, err)
	}
	want(t, "bad ttl", s.do("POST", "/v1/tool-calls/call_1/links", "k-op", `{"ttl":"bad"}`, nil), http.StatusBadRequest, agentd.EINVALID)
	want(t, "unknown field", s.do("POST", "/v1/tool-calls/call_1/links", "k-op", `{"ttl":"1h","by":"x"}`, nil), http.StatusBadRequest, agentd.EINVALID)
	want(t, "a key that may not decide", s.do("POST", "/v1/tool-calls/call_1/links", "k-c", "", nil), http.StatusForbidden, agentd.EAPPROVERNOTALLOWED)
	want(t, "no key", s.do("POST", "/v1/tool-calls/call_1/links", "", "", nil), http.StatusUnauthorized, agentd.EUNAUTHORIZED)

	pub := newServer(t, keys, api.Config{Links: links, PublicURL: "https://agentd.example.com/base"})
	r = pub.do("POST", "/v1/tool-calls/call_1/links", "k-op", `{"ttl":"30m"}`, nil)
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || got.Approve != "https://agentd.example.com/base/d/ok" {
		t.Fatalf("links with public_url %s", r.body)
	}
	none := newServer(t, keys, api.Config{})
	want(t, "no links configured", none.do("POST", "/v1/tool-calls/call_1/links", "k-op", "", nil), http.StatusNotFound, agentd.ENOTFOUND)
}

// TestLinkPages: GET shows the card (arguments escaped) and one button,
// with no caching, no framing and no script; POST passes the deny
// reason; each refusal is a short page with its status.
func TestLinkPages(t *testing.T) {
	links := &fakeLinks{}
	s := newServer(t, nil, api.Config{Links: links})
	r := s.do("GET", "/d/ok", "", "", nil)
	want(t, "GET approve link", r, http.StatusOK, "")
	h := r.header
	if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") ||
		h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("headers %v", h)
	}
	if !strings.Contains(r.body, `id="tool">pay<`) || !strings.Contains(r.body, "&lt;script&gt;") || strings.Contains(r.body, "<script") ||
		!strings.Contains(r.body, `action="/d/ok"`) || !strings.Contains(r.body, ">Approve</button>") || strings.Contains(r.body, `name="reason"`) ||
		!strings.Contains(r.body, "2026-12-02T03:00:00Z") {
		t.Fatalf("approve page %s", r.body)
	}
	if r := s.do("GET", "/d/deny", "", "", nil); !strings.Contains(r.body, `name="reason"`) || !strings.Contains(r.body, ">Deny</button>") {
		t.Fatalf("deny page %s", r.body)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	r = s.do("POST", "/d/deny", "", "reason=not+now", form)
	if want(t, "POST deny link", r, http.StatusOK, ""); links.usedReason != "not now" || !strings.Contains(r.body, "Denied") {
		t.Fatalf("deny: reason %q, page %s", links.usedReason, r.body)
	}
	for token, status := range map[string]int{"spent": http.StatusGone, "decided": http.StatusConflict, "nope": http.StatusNotFound} {
		for _, m := range []string{"GET", "POST"} {
			r := s.do(m, "/d/"+token, "", "", form)
			if r.status != status || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s /d/%s: %d %v, want %d as a page", m, token, r.status, r.header, status)
			}
		}
	}
	none := newServer(t, nil, api.Config{})
	want(t, "no links configured", none.do("GET", "/d/ok", "", "", nil), http.StatusNotFound, "")
}

// TestLinkTokensStayOutOfTheLog (issue 28, finding 7): a decision link's
// token is its credential, so no log line — the request log of a GET, a
// POST, a path that routes nowhere, a spelling with // or %2F, nor the
// internal error's line — holds it; they show the route, /d/{token}.
func TestLinkTokensStayOutOfTheLog(t *testing.T) {
	var logs lockedBuffer
	s := newServer(t, nil, api.Config{Links: &fakeLinks{}, Logger: zerolog.New(&logs)})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	paths := []string{"/d/secret-Ab1", "/d/secret-Ab2", "/d/secret-Ab3/more", "//d/secret-Ab4", "/d/secret-Ab5%2Fx", "/d/broken-secret"}
	for _, p := range paths {
		s.do("GET", p, "", "", nil)
	}
	want(t, "POST a link", s.do("POST", "/d/secret-Ab6", "", "", form), http.StatusOK, "")
	// Each request's line is written once its answer is sent: wait for all.
	deadline := time.Now().Add(waitLimit)
	for strings.Count(logs.String(), `"message":"request"`) < len(paths)+1 {
		if time.Now().After(deadline) {
			t.Fatalf("request lines: %s", logs.String())
		}
		runtime.Gosched()
	}
	got := logs.String()
	if strings.Contains(got, "secret") || !strings.Contains(got, `"path":"/d/{token}"`) || !strings.Contains(got, `"message":"internal error"`) {
		t.Fatalf("the log shows a link's token, or not its route:\n%s", got)
	}
}

// lockedBuffer is a log's destination written by the server's goroutines
// and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
