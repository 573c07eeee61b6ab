package connections

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/confirm"
)

// A downstream server that echoes the request (its headers in the body, or
// in an error) does not hand the model the connection's credentials.
func TestCredentialsRedactedFromResults(t *testing.T) {
	echo := func(status int) *recorder {
		return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := json.Marshal(map[string]any{"headers": r.Header})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(b)
		})
	}
	env := map[string]string{"TOKEN": "tok-" + secretValue, "KEY": "key-" + secretValue, "USER": "alice", "PASS": "pw-" + secretValue}
	for _, auth := range []string{
		`{"type":"bearer","token_env":"TOKEN"}`,
		`{"type":"header","name":"x-api-key","value_env":"KEY"}`,
		`{"type":"basic","username_env":"USER","password_env":"PASS"}`,
	} {
		for _, status := range []int{200, 500} {
			api := echo(status)
			c := loadConn(t, `{"base_url":"`+api.URL+`/api","auth":`+auth+`}`, env, nil)
			rt := NewRequestTool([]*Connection{c})
			res, err := rt.Execute(context.Background(),
				requestCall(rt, "call_1", `{"connection":"api","method":"GET","endpoint":"/echo","intent":"read"}`))
			text := string(res)
			if err != nil {
				text = err.Error()
			}
			if strings.Contains(text, secretValue) || !strings.Contains(text, "[redacted]") {
				t.Errorf("auth %s, status %d: the model would read %s", auth, status, text)
			}
			if status == 200 && (err != nil || !json.Valid(res)) {
				t.Errorf("auth %s: result %s, %v", auth, res, err)
			}
		}
	}
}

// redactAuths are the three auth types with the secrets each sends.
var redactAuths = []struct {
	auth    string
	secrets []string
}{
	{`{"type":"bearer","token_env":"TOKEN"}`, []string{"tok-" + secretValue}},
	{`{"type":"header","name":"x-api-key","value_env":"KEY"}`, []string{"key-" + secretValue}},
	{`{"type":"basic","username_env":"USER","password_env":"PASS"}`,
		[]string{"pw-" + secretValue, base64.StdEncoding.EncodeToString([]byte("alice:pw-" + secretValue))}},
}

var redactEnv = map[string]string{"TOKEN": "tok-" + secretValue, "KEY": "key-" + secretValue, "USER": "alice", "PASS": "pw-" + secretValue}

// placer is a loopback server that answers GET /place?at=N&s=S&status=C
// with N dots, the text S, 100 more dots, with status C (default 200).
func placer(t *testing.T) *recorder {
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		at, _ := strconv.Atoi(r.URL.Query().Get("at"))
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(cmp.Or(status, 200))
		_, _ = w.Write([]byte(strings.Repeat(".", at) + r.URL.Query().Get("s") + strings.Repeat(".", 100)))
	})
}

// onlyDots fails unless text, once every "[redacted]" and a cut one at
// its end are removed, is dots only: no byte of a secret is left.
func onlyDots(t *testing.T, what, text string) {
	t.Helper()
	rest := strings.ReplaceAll(text, "[redacted]", "")
	for n := len("[redacted]") - 1; n > 0; n-- {
		if strings.HasSuffix(rest, "[redacted]"[:n]) {
			rest = strings.TrimSuffix(rest, "[redacted]"[:n])
			break
		}
	}
	if strings.Trim(rest, ".") != "" {
		t.Errorf("%s: a secret shows through: %q", what, text)
	}
}

// A secret that straddles max_response_bytes, at every offset, is
// redacted on the loop tool path, in error results and on the durable
// path; what is given back stays within the bound.
func TestRedactedBeforeTruncated(t *testing.T) {
	const limit = 64
	api := placer(t)
	for _, a := range redactAuths {
		c := loadConn(t, fmt.Sprintf(`{"base_url":%q,"auth":%s,"max_response_bytes":%d}`, api.URL, a.auth, limit), redactEnv, nil)
		rt := NewRequestTool([]*Connection{c})
		for _, s := range a.secrets {
			for at := limit - len(s) - 2; at <= limit+2; at++ {
				args := fmt.Sprintf(`{"connection":"api","method":"GET","endpoint":"/place","params":{"at":%d,"s":%q},"intent":"read"}`, at, s)
				what := fmt.Sprintf("%s, secret %.8s… at %d", a.auth, s, at)

				out, err := rt.Execute(context.Background(), requestCall(rt, "call_1", args))
				var r struct {
					Body      string
					Truncated bool
				}
				if err != nil || json.Unmarshal(out, &r) != nil {
					t.Fatalf("%s: tool: %s, %v", what, out, err)
				}
				onlyDots(t, what+", tool", r.Body)
				if !r.Truncated || len(r.Body) > limit {
					t.Errorf("%s, tool: truncated %v, %d bytes (limit %d)", what, r.Truncated, len(r.Body), limit)
				}

				res := durableRead(t, c, args)
				var body string
				if err := json.Unmarshal(res.Body, &body); err != nil {
					t.Fatalf("%s: durable body %s", what, res.Body)
				}
				onlyDots(t, what+", durable", body)
				if !res.Truncated || len(body) > limit {
					t.Errorf("%s, durable: truncated %v, %d bytes (limit %d)", what, res.Truncated, len(body), limit)
				}

				failing := strings.Replace(args, `"params":{`, `"params":{"status":500,`, 1)
				_, err = rt.Execute(context.Background(), requestCall(rt, "call_2", failing))
				if err == nil {
					t.Fatalf("%s: a 500 is not an error", what)
				}
				onlyDots(t, what+", error", strings.TrimPrefix(err.Error(), "HTTP 500 Internal Server Error: "))
			}
		}
	}
}

// An error body is quoted up to 2 KiB: a secret across that cut is
// redacted too.
func TestRedactedBeforeErrorCut(t *testing.T) {
	api := placer(t)
	for _, a := range redactAuths {
		c := loadConn(t, fmt.Sprintf(`{"base_url":%q,"auth":%s}`, api.URL, a.auth), redactEnv, nil)
		rt := NewRequestTool([]*Connection{c})
		for _, s := range a.secrets {
			cut := maxErrorBody - len("…")
			for at := cut - len(s) - 2; at <= cut+2; at++ {
				args := fmt.Sprintf(`{"connection":"api","method":"GET","endpoint":"/place","params":{"at":%d,"s":%q,"status":502},"intent":"read"}`, at, s)
				_, err := rt.Execute(context.Background(), requestCall(rt, "call_1", args))
				if err == nil {
					t.Fatal("a 502 is not an error")
				}
				text := strings.TrimSuffix(strings.TrimPrefix(err.Error(), "HTTP 502 Bad Gateway: "), "…")
				onlyDots(t, fmt.Sprintf("%s, secret %.8s… at %d", a.auth, s, at), text)
			}
		}
	}
}

// Redaction can make a body longer ("[redacted]" replaces a shorter
// secret): the result still respects max_response_bytes.
func TestRedactionKeepsTheBound(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("abcde", 12))) // 60 bytes
	})
	c := loadConn(t, `{"base_url":"`+api.URL+`","auth":{"type":"bearer","token_env":"TOKEN"},"max_response_bytes":64}`,
		map[string]string{"TOKEN": "abcde"}, nil)
	resp, err := c.Do(context.Background(), &confirm.Target{Connection: "api", Method: "GET", Path: "/x"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Body) > 64 || !resp.Truncated || strings.Contains(string(resp.Body), "abc") {
		t.Errorf("body %q (%d bytes), truncated %v", resp.Body, len(resp.Body), resp.Truncated)
	}
}

// A status line or a refused redirect that echoes the credentials does not
// hand them to the model either.
func TestCredentialsRedactedFromStatusAndRedirects(t *testing.T) {
	const token = "tok-" + secretValue
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				switch req.URL.Path {
				case "/api/status":
					fmt.Fprintf(conn, "HTTP/1.1 599 echo %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", token)
				case "/api/away":
					fmt.Fprintf(conn, "HTTP/1.1 302 Found\r\nLocation: /elsewhere/%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", token)
				case "/api/abroad":
					fmt.Fprintf(conn, "HTTP/1.1 302 Found\r\nLocation: http://%s.example.com/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", token)
				case "/api/hop": // a same-origin redirect whose target then fails: the error quotes its URL
					fmt.Fprintf(conn, "HTTP/1.1 302 Found\r\nLocation: /api/reset?t=%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", token)
				}
			}()
		}
	}()
	c := loadConn(t, `{"base_url":"http://`+ln.Addr().String()+`/api","auth":{"type":"bearer","token_env":"TOKEN"}}`,
		map[string]string{"TOKEN": token}, nil)
	rt := NewRequestTool([]*Connection{c})
	for _, ep := range []string{"/status", "/away", "/abroad", "/hop"} {
		_, err := rt.Execute(context.Background(), requestCall(rt, "call_1", `{"connection":"api","method":"GET","endpoint":"`+ep+`","intent":"read"}`))
		if err == nil || strings.Contains(err.Error(), secretValue) {
			t.Errorf("%s: the model would read %v", ep, err)
		}
	}
}

func TestRedact(t *testing.T) {
	c := &Connection{redacts: []string{"SECRET1234"}}
	tests := []struct {
		name      string
		in        string
		limit     int64
		more      bool
		want      string
		truncated bool
	}{
		{"whole body", "aaSECRET1234bb", 100, false, "aa[redacted]bb", false},
		{"a secret across the cut", strings.Repeat("a", 16) + "SECRET1234bbbb", 20, false, strings.Repeat("a", 16) + "[red", true},
		{"a secret that starts at the cut", strings.Repeat("a", 20) + "SECRET1234", 20, false, strings.Repeat("a", 20), true},
		{"the beginning of a secret at the end of a longer text", "aaaaSECRE", 20, true, "aaaa[redacted]", true},
		{"a look-alike that the rest of the text rules out", strings.Repeat("a", 18) + "SEXXXXXXXXXX", 20, false, strings.Repeat("a", 18) + "SE", true},
		{"the marker must fit in the bound", strings.Repeat("a", 15) + "SECRE", 20, true, strings.Repeat("a", 10) + "[redacted]", true},
		{"a bound shorter than the marker", "abSECR", 4, true, "ab", true},
		{"a marker cut by the bound", "SECRET1234SECRET1234", 5, false, "[reda", true},
		{"redaction that lengthens past the bound", "SECRET1234" + strings.Repeat("b", 8), 12, false, "[redacted]bb", true},
		{"no bound", "xSECRET1234xSECRET1234", -1, false, "x[redacted]x[redacted]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := c.redact([]byte(tt.in), tt.limit, tt.more)
			if string(got) != tt.want || truncated != tt.truncated {
				t.Errorf("redact(%q, %d, %v) = %q, %v; want %q, %v", tt.in, tt.limit, tt.more, got, truncated, tt.want, tt.truncated)
			}
		})
	}
}
