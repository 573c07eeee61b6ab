package connections

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/confirm"
)

// requestCall is a request-tool call with the given arguments.
// TestSSRFRefused is acceptance 6: nothing that would leave the
// connection's origin or path prefix reaches any server.
func TestSSRFRefused(t *testing.T) {
	api := newRecorder(t, nil)
	evil := newRecorder(t, nil)
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	c := loadConn(t, `{"base_url":"`+api.URL+`/api/v1","auth":{"type":"bearer","token_env":"TOKEN"}}`, map[string]string{"TOKEN": secretValue}, nil)
	rt := NewRequestTool([]*Connection{c})

	endpoints := []string{
		"http://evil/", evil.URL + "/x", "https://" + evilHost + "/x", "http:" + evilHost + "/x",
		"//evil/x", "//" + evilHost + "/x", "///" + evilHost + "/x",
		"/../../admin", "../admin", "/ok/../../admin", "/./admin", "/%2e%2e/admin", "%2e%2e/admin", "/%2E%2E/%2E%2E/admin",
		"/%252e%252e/admin", "%252e%252e", "..%2fadmin", "/..%2f..%2fadmin", "/a%2fb", "/a%2Fb", "/a%5c..%5cadmin",
		`\evil\x`, `/a\..\admin`, `/\` + evilHost + `/x`, "/a?x=1", "/a#frag", "/a%00b", "/a\nb", "",
		"/a//b",
	}
	for _, ep := range endpoints {
		t.Run(ep, func(t *testing.T) {
			// The decision refuses it before any card.
			args, _ := json.Marshal(map[string]any{"connection": "api", "method": "GET", "endpoint": ep, "intent": "read"})
			if d := classify(rt.Confirm(), string(args)); !d.Refused || !d.Invalid {
				t.Errorf("the decision accepted %q: %+v", ep, d)
			}
			// A call that records it anyway (a store written by something
			// else): the tool sends nothing.
			call := requestCall(rt, "call_1", `{"connection":"api","method":"GET","endpoint":"/ok","intent":"read"}`)
			call.Endpoint = ep
			if out, err := rt.Execute(context.Background(), call); err == nil {
				t.Errorf("Execute accepted %q: %s", ep, out)
			}
			// Straight to Do, past confirm.Resolve: the client checks again.
			tg := &confirm.Target{Connection: "api", Method: "GET", Path: ep}
			if resp, err := c.Do(context.Background(), tg, ""); err == nil {
				t.Errorf("Do accepted %q: status %d", ep, resp.Status)
			}
		})
	}
	if got := api.requests(); len(got) != 0 {
		t.Errorf("the connection's server received %d requests: %+v", len(got), got)
	}
	if got := evil.requests(); len(got) != 0 {
		t.Errorf("the other server received %d requests: %+v", len(got), got)
	}
}

func TestURLStaysUnderPrefix(t *testing.T) {
	c := loadConn(t, `{"base_url":"https://api.example.com/api"}`, nil, nil)
	base, prefix := c.origin()
	for raw, want := range map[string]bool{
		"https://api.example.com/api":                true,
		"https://api.example.com/api/":               true,
		"https://api.example.com/api/orders/1":       true,
		"https://API.example.com/api/orders/1":       true,
		"https://api.example.com/apix":               false,
		"https://api.example.com/apix/orders":        false,
		"https://api.example.com/":                   false,
		"https://api.example.com/admin":              false,
		"https://api.example.com/api/%2e%2e/admin":   false,
		"https://api.example.com/api/a%2fb":          false,
		"http://api.example.com/api/orders":          false,
		"https://api.example.com:8443/api/orders":    false,
		"https://evil.example.com/api/orders":        false,
		"https://user@api.example.com/api/orders":    false,
		"https://api.example.com.evil.com/api/order": false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.inside(u, base, prefix); got != want {
			t.Errorf("inside(%s) = %v, want %v", raw, got, want)
		}
	}
	u, err := c.requestURL("/orders/A%201")
	if err != nil || u.String() != "https://api.example.com/api/orders/A%201" {
		t.Errorf("requestURL = %v, %v", u, err)
	}
}

func TestRedirects(t *testing.T) {
	evil := newRecorder(t, nil)
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/go-evil":
			http.Redirect(w, r, evil.URL+"/steal", http.StatusFound)
		case "/api/go-evil-307":
			http.Redirect(w, r, evil.URL+"/steal", http.StatusTemporaryRedirect)
		case "/api/old":
			http.Redirect(w, r, "/api/new?x=1", http.StatusMovedPermanently)
		case "/api/out":
			http.Redirect(w, r, "/admin", http.StatusFound)
		case "/api/sibling":
			http.Redirect(w, r, "/apix/secret", http.StatusFound)
		case "/api/dots":
			w.Header().Set("Location", "/api/%2e%2e/admin")
			w.WriteHeader(http.StatusFound)
		case "/api/loop":
			http.Redirect(w, r, "/api/loop", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
		}
	})
	c := loadConn(t, `{"base_url":"`+api.URL+`/api","auth":{"type":"header","name":"X-API-Key","value_env":"KEY"}}`, map[string]string{"KEY": secretValue}, nil)
	do := func(method, path string) (*Response, error) {
		var body json.RawMessage
		if method != "GET" {
			body = json.RawMessage(`{"a":1}`)
		}
		return c.Do(context.Background(), &confirm.Target{Connection: "api", Method: method, Path: path, Body: body}, "")
	}

	for _, p := range []string{"/go-evil", "/go-evil-307"} {
		_, err := do("POST", p)
		var re *RedirectError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), "redirect to another origin") || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: err = %v, want a refused redirect to another origin", p, err)
		}
	}
	if got := evil.requests(); len(got) != 0 {
		t.Errorf("the other origin received %d requests (credentials would have gone with them)", len(got))
	}

	resp, err := do("GET", "/old")
	if err != nil || resp.Status != 200 || string(resp.Body) != `{"path":"/api/new"}` {
		t.Errorf("redirect within the prefix: %+v, %v", resp, err)
	}
	reqs := api.requests()
	if last := reqs[len(reqs)-1]; last.Path != "/api/new" || last.RawQuery != "x=1" || last.Header.Get("X-API-Key") != secretValue {
		t.Errorf("followed request = %+v", last)
	}

	for _, p := range []string{"/out", "/sibling", "/dots"} {
		before := len(api.requests())
		_, err := do("GET", p)
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "base path") {
			t.Errorf("%s: err = %v, want a refused redirect outside the base path", p, err)
		}
		if n := len(api.requests()) - before; n != 1 {
			t.Errorf("%s: the server received %d requests, want only the first", p, n)
		}
	}

	before := len(api.requests())
	if _, err := do("GET", "/loop"); err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Errorf("loop: err = %v", err)
	}
	if n := len(api.requests()) - before; n != 6 {
		t.Errorf("loop: %d requests, want 6 (the first and 5 redirects)", n)
	}
}

func TestModelHeadersRefused(t *testing.T) {
	api := newRecorder(t, nil)
	c := loadConn(t, `{"base_url":"`+api.URL+`","headers":{"X-Tenant":"acme"},"auth":{"type":"header","name":"X-Token","value_env":"KEY"}}`,
		map[string]string{"KEY": secretValue}, nil)
	rt := NewRequestTool([]*Connection{c})
	for _, h := range []string{"Authorization", "authorization", "Cookie", "Connection", "Idempotency-Key", "Host", "Proxy-Authorization",
		"Transfer-Encoding", "Content-Length", "X-Forwarded-For", "X-Tenant", "x-token", "Content-Type", "User-Agent", "Bad Name", "X-A\r\nX-B",
		"X-Auth-Token", "Via", "Max-Forwards", "X-Originating-IP", "X-Remote-Addr", "X-Cluster-Client-IP", "X-ProxyUser-Ip"} {
		tg := &confirm.Target{Connection: "api", Method: "GET", Path: "/x", Header: map[string]string{h: "v"}}
		if _, err := c.Do(context.Background(), tg, ""); err == nil {
			t.Errorf("Do sent model header %q", h)
		}
		args, _ := json.Marshal(map[string]any{"connection": "api", "method": "GET", "endpoint": "/x", "intent": "read", "headers": map[string]string{h: "v"}})
		if d := classify(rt.Confirm(), string(args)); !d.Refused {
			t.Errorf("the decision accepted model header %q", h)
		}
		// Recorded on a call anyway: the tool does not send it.
		call := requestCall(rt, "c1", `{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`)
		call.Params, _ = json.Marshal(map[string]any{"header": map[string]string{h: "v"}})
		if _, err := rt.Execute(context.Background(), call); err == nil {
			t.Errorf("Execute sent model header %q", h)
		}
	}
	for _, v := range []string{"a\r\nInjected: 1", "a\x00b", "a\nb"} {
		tg := &confirm.Target{Connection: "api", Method: "GET", Path: "/x", Header: map[string]string{"X-Ok": v}}
		if _, err := c.Do(context.Background(), tg, ""); err == nil {
			t.Errorf("Do sent a header value %q", v)
		}
		args, _ := json.Marshal(map[string]any{"connection": "api", "method": "GET", "endpoint": "/x", "intent": "read", "headers": map[string]string{"X-Ok": v}})
		if d := classify(rt.Confirm(), string(args)); !d.Refused || !d.Invalid {
			t.Errorf("header value %q passed the decision: %+v", v, d)
		}
	}
	if got := api.requests(); len(got) != 0 {
		t.Fatalf("the server received %d requests", len(got))
	}
	// An ordinary header goes through.
	tg := &confirm.Target{Connection: "api", Method: "GET", Path: "/x", Header: map[string]string{"X-Trace": "t-1"}}
	if _, err := c.Do(context.Background(), tg, ""); err != nil {
		t.Fatal(err)
	}
	if got := api.requests(); len(got) != 1 || got[0].Header.Get("X-Trace") != "t-1" || got[0].Header.Get("X-Token") != secretValue {
		t.Errorf("received %+v", got)
	}
}

func TestCredentialsAndStaticHeaders(t *testing.T) {
	api := newRecorder(t, nil)
	env := map[string]string{"TOKEN": "tok-" + secretValue, "KEY": "key-" + secretValue, "USER": "alice", "PASS": "pw-" + secretValue}
	cases := []struct {
		auth  string
		check func(h http.Header) error
	}{
		{`{"type":"bearer","token_env":"TOKEN"}`, func(h http.Header) error {
			if h.Get("Authorization") != "Bearer tok-"+secretValue {
				return fmt.Errorf("Authorization = %q", h.Get("Authorization"))
			}
			return nil
		}},
		{`{"type":"header","name":"x-api-key","value_env":"KEY"}`, func(h http.Header) error {
			if h.Get("X-Api-Key") != "key-"+secretValue || h.Get("Authorization") != "" {
				return fmt.Errorf("X-Api-Key = %q, Authorization = %q", h.Get("X-Api-Key"), h.Get("Authorization"))
			}
			return nil
		}},
		{`{"type":"basic","username_env":"USER","password_env":"PASS"}`, func(h http.Header) error {
			want := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:pw-"+secretValue))
			if h.Get("Authorization") != want {
				return fmt.Errorf("Authorization = %q", h.Get("Authorization"))
			}
			return nil
		}},
	}
	for _, tc := range cases {
		c := loadConn(t, `{"base_url":"`+api.URL+`/api","auth":`+tc.auth+`,"headers":{"Accept":"application/json","X-Tenant":"acme"}}`, env, nil)
		before := len(api.requests())
		rt := NewRequestTool([]*Connection{c})
		if _, err := rt.Execute(context.Background(),
			requestCall(rt, "call_7", `{"connection":"api","method":"GET","endpoint":"/me","intent":"read"}`)); err != nil {
			t.Fatal(err)
		}
		got := api.requests()[before:]
		if len(got) != 1 {
			t.Fatalf("%d requests", len(got))
		}
		h := got[0].Header
		if err := tc.check(h); err != nil {
			t.Errorf("auth %s: %v", tc.auth, err)
		}
		if h.Get("Accept") != "application/json" || h.Get("X-Tenant") != "acme" || h.Get("User-Agent") != "agentd" {
			t.Errorf("static headers: Accept %q, X-Tenant %q, User-Agent %q", h.Get("Accept"), h.Get("X-Tenant"), h.Get("User-Agent"))
		}
		if h.Get("Idempotency-Key") != "" {
			t.Errorf("a GET carried Idempotency-Key %q", h.Get("Idempotency-Key"))
		}
		for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %#v %+v", c, c, c, c.auth)} {
			if strings.Contains(s, secretValue) {
				t.Errorf("the secret shows in %q", s)
			}
		}
	}
}

func TestIdempotencyKeyOnWrites(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": "R-1",  "amount": 25}`))
	})
	c := loadConn(t, `{"base_url":"`+api.URL+`/api"}`, nil, nil)
	rt := NewRequestTool([]*Connection{c})
	out, err := rt.Execute(context.Background(), requestCall(rt, "call_01HXYZ",
		`{"connection":"api","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":25},"intent":"confirmed_write"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"status":201,"body":{"id":"R-1","amount":25},"truncated":false}` {
		t.Errorf("result = %s", out)
	}
	for _, m := range []string{"PUT", "PATCH", "DELETE", "HEAD"} {
		if _, err := rt.Execute(context.Background(), requestCall(rt, "call_"+m,
			`{"connection":"api","method":"`+m+`","endpoint":"/refunds/R-1","intent":"write"}`)); err != nil {
			t.Fatal(err)
		}
	}
	got := api.requests()
	if len(got) != 5 {
		t.Fatalf("%d requests", len(got))
	}
	if k := got[0].Header.Get("Idempotency-Key"); k != "call_01HXYZ" {
		t.Errorf("POST Idempotency-Key = %q, want the call id", k)
	}
	if ct := got[0].Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	for i, m := range []string{"PUT", "PATCH", "DELETE"} {
		if k := got[i+1].Header.Get("Idempotency-Key"); got[i+1].Method != m || k != "call_"+m {
			t.Errorf("%s Idempotency-Key = %q", got[i+1].Method, k)
		}
		if len(got[i+1].Body) != 0 || got[i+1].Header.Get("Content-Type") != "" {
			t.Errorf("%s without data sent a body %q / Content-Type %q", m, got[i+1].Body, got[i+1].Header.Get("Content-Type"))
		}
	}
	if k := got[4].Header.Get("Idempotency-Key"); got[4].Method != "HEAD" || k != "" {
		t.Errorf("HEAD Idempotency-Key = %q", k)
	}
}

func TestResponseBounded(t *testing.T) {
	big := strings.Repeat("é", 1<<19) // 1 MiB of two-byte runes
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.URL.Path == "/json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`["` + big + `"]`))
			return
		}
		_, _ = w.Write([]byte(big))
	})
	c := loadConn(t, `{"base_url":"`+api.URL+`","max_response_bytes":1024}`, nil, nil)
	resp, err := c.Do(context.Background(), &confirm.Target{Connection: "api", Method: "GET", Path: "/text"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || len(resp.Body) != 1024 || resp.Status != 200 || resp.StatusText != "OK" || !strings.HasPrefix(resp.ContentType, "text/plain") {
		t.Errorf("response: truncated %v, %d bytes, %d %s, %s", resp.Truncated, len(resp.Body), resp.Status, resp.StatusText, resp.ContentType)
	}

	// Through the tool, the result's body is a string within the bound,
	// cut on a rune boundary (1023 splits a two-byte rune).
	for _, limit := range []int{1024, 1023} {
		c := loadConn(t, fmt.Sprintf(`{"base_url":%q,"max_response_bytes":%d}`, api.URL, limit), nil, nil)
		rt := NewRequestTool([]*Connection{c})
		for _, ep := range []string{"/text", "/json"} {
			out, err := rt.Execute(context.Background(), requestCall(rt, "c", `{"connection":"api","method":"GET","endpoint":"`+ep+`","intent":"read"}`))
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Status    int
				Body      any
				Truncated bool
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatal(err)
			}
			s, ok := r.Body.(string)
			if !r.Truncated || !ok || len(s) > limit || len(s) < limit-4 || strings.ContainsRune(s, '\uFFFD') {
				t.Errorf("%d %s: truncated %v, body %T of %d bytes", limit, ep, r.Truncated, r.Body, len(s))
			}
		}
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	c := loadConn(t, `{"base_url":"`+api.URL+`","timeout_ms":150}`, nil, nil)
	start := time.Now()
	_, err := c.Do(context.Background(), &confirm.Target{Connection: "api", Method: "GET", Path: "/slow"}, "")
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the request took %v with a 150ms timeout", d)
	}
	// A cancelled context also ends the request.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, &confirm.Target{Connection: "api", Method: "GET", Path: "/slow"}, ""); err == nil {
		t.Error("a cancelled context did not fail the request")
	}
}

func TestDoRefusesForeignTargets(t *testing.T) {
	api := newRecorder(t, nil)
	c := loadConn(t, `{"base_url":"`+api.URL+`"}`, nil, nil)
	for _, tg := range []*confirm.Target{
		{Connection: "other", Method: "GET", Path: "/x"},
		{Connection: "api", Method: "TRACE", Path: "/x"},
		{Connection: "api", Method: "CONNECT", Path: "/x"},
		nil,
	} {
		if _, err := c.Do(context.Background(), tg, ""); err == nil {
			t.Errorf("Do accepted %+v", tg)
		}
	}
	if _, err := c.Do(context.Background(), &confirm.Target{Connection: "api", Method: "POST", Path: "/x"}, "key\r\nX: y"); err == nil {
		t.Error("Do accepted an idempotency key with a line break")
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("the server received %d requests", n)
	}
}
