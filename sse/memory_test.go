package sse

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkIdleStreamMemory reports the server memory (heap and stacks) held
// per idle SSE stream: its connection, goroutine, subscription and buffers.
// The clients are raw TCP connections, so their cost is not counted.
//
//	go test -run XXX -bench IdleStreamMemory ./sse/
func BenchmarkIdleStreamMemory(b *testing.B) {
	const n = 500
	for i := 0; i < b.N; i++ {
		b.ReportMetric(idleStreamBytes(b, n), "B/stream")
	}
}

func idleStreamBytes(b *testing.B, n int) float64 {
	hub := NewHub()
	log := newMemLog()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		Serve(r.Context(), w, hub, log, "c", 0, Options{})
	})
	srv := &http.Server{Handler: mux}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	defer hub.Close()

	measure := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	open := func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("stream: %v", err)
		}
		conns = append(conns, c)
	}
	open() // warm up
	before := measure()
	for len(conns) < n+1 {
		open()
	}
	// The client bufio.Readers and Responses are garbage by now; what is
	// left is server state plus the client net.Conns (a few hundred bytes).
	after := measure()
	if hub.Subscribers() != n+1 {
		b.Fatalf("Subscribers = %d", hub.Subscribers())
	}
	return float64(after-before) / float64(n)
}
