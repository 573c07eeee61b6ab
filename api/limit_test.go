package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/api"
)

// sendWholeBody writes a request with a body of n bytes in full before it
// reads anything (as Python's urllib does), then returns the status line.
// chunked sends the body without Content-Length.
func sendWholeBody(t *testing.T, addr, path string, n int, chunked bool) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", path, addr)
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", n)
	}
	if _, err := conn.Write([]byte(head)); err != nil {
		return "write headers: " + err.Error()
	}
	chunk := []byte(`{"content":"` + strings.Repeat("x", 64<<10) + `"}`)
	for sent := 0; sent < n; sent += len(chunk) {
		part := chunk[:min(len(chunk), n-sent)]
		if chunked {
			part = append([]byte(fmt.Sprintf("%x\r\n", len(part))), append(part, "\r\n"...)...)
		}
		if _, err := conn.Write(part); err != nil {
			return "write body: " + err.Error()
		}
	}
	if chunked {
		if _, err := conn.Write([]byte("0\r\n\r\n")); err != nil {
			return "write body end: " + err.Error()
		}
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "read response: " + err.Error()
	}
	return strings.TrimSpace(line)
}

// TestOversizedBodyGets413: a client that sends its whole oversized body
// before reading gets the 413, with or without Content-Length, every time.
func TestOversizedBodyGets413(t *testing.T) {
	s := newServer(t, nil, api.Config{MaxBodyBytes: 256 << 10})
	conv := s.createConversation("")
	addr := strings.TrimPrefix(s.url, "http://")
	for i := range 10 {
		for _, chunked := range []bool{false, true} {
			got := sendWholeBody(t, addr, "/v1/conversations/"+conv+"/messages", 4<<20, chunked)
			if got != "HTTP/1.1 413 Request Entity Too Large" {
				t.Fatalf("try %d (chunked %v): %q, want the 413", i, chunked, got)
			}
		}
	}
	// The server is still healthy.
	want(t, "healthz", s.do("GET", "/healthz", "", "", nil), http.StatusOK, "")
}

// TestOversizedBodyWithExpectContinue: a client that waits for
// "100 Continue" gets the 413 before it sends its body.
func TestOversizedBodyWithExpectContinue(t *testing.T) {
	s := newServer(t, nil, api.Config{MaxBodyBytes: 256 << 10})
	conv := s.createConversation("")
	addr := strings.TrimPrefix(s.url, "http://")
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	fmt.Fprintf(conn, "POST /v1/conversations/%s/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", conv, addr, 4<<20)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "HTTP/1.1 413 Request Entity Too Large" {
		t.Fatalf("status line %q (%v), want the 413 without a 100 Continue", line, err)
	}
}
