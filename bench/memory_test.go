package bench

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/sse"
)

// BenchmarkIdleSubscriberMemory measures the server memory held by one idle
// SSE subscriber: runtime.MemStats HeapInuse+StackInuse after opening 1,000
// idle streams of one conversation, minus before, divided by 1,000 (after
// two GCs each time). The clients are raw TCP connections that have read
// the response header, so client-side buffers are garbage by then; what
// remains is the server's state plus the client net.Conns (a few hundred
// bytes each). Three kinds are measured in each iteration:
//
//   - api: GET /v1/conversations/{id}/events on the agentd API (echo
//     routing, middleware, the tenant check, sse.Serve), with the server
//     settings of cmd/agentd;
//   - sse: sse.Serve alone behind a plain net/http mux, same store and
//     server settings (the cost of the stream itself);
//   - hub: hub.Subscribe only, no HTTP (the subscription and its buffer).
//
// Target: api ≤ 48 KiB per subscriber. ns/op is the wall time of one
// iteration.
//
//	go test -run '^$' -bench IdleSubscriberMemory -benchtime 1x ./bench/
func BenchmarkIdleSubscriberMemory(b *testing.B) {
	const n = fanoutSubscribers
	inst := startAgentd(b, benchDir(b), `[]`, nil)
	conv := inst.createConversation(b, newClient())

	// sse.Serve alone, on its own hub and listener.
	bareHub := sse.NewHub()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		_ = sse.Serve(r.Context(), w, bareHub, inst.store, conv, 0, sse.Options{})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bare := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() { _ = bare.Serve(ln) }()
	defer bare.Close()
	defer bareHub.Close()

	apiAddr := strings.TrimPrefix(inst.base, "http://")
	iters := iterations(b, "AGENTD_BENCH_ROUNDS", 1)
	var api, bareSSE, hubOnly memUse
	b.ResetTimer()
	start := time.Now()
	for range iters {
		api = api.add(idleStreams(b, apiAddr, "/v1/conversations/"+conv+"/events", inst.hub, n))
		bareSSE = bareSSE.add(idleStreams(b, ln.Addr().String(), "/events", bareHub, n))
		hubOnly = hubOnly.add(idleSubscriptions(n))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	api, bareSSE, hubOnly = api.div(iters), bareSSE.div(iters), hubOnly.div(iters)

	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(iters), "ns/op")
	b.ReportMetric(api.total(), "api-B/sub")
	b.ReportMetric(bareSSE.total(), "sse-B/sub")
	b.ReportMetric(hubOnly.total(), "hub-B/sub")
	b.ReportMetric(api.total()/bareSSE.total(), "api/sse")

	var t strings.Builder
	fmt.Fprintf(&t, "server memory per idle SSE subscriber (HeapInuse+StackInuse delta / %d), mean of %d iteration(s)\n", n, iters)
	fmt.Fprintf(&t, "  %-46s %10s %9s %9s %9s %9s\n", "", "B/sub", "KiB/sub", "heap B", "stack B", "vs hub")
	row := func(name string, v memUse) {
		fmt.Fprintf(&t, "  %-46s %10.0f %9.1f %9.0f %9.0f %8.1f×\n", name, v.total(), v.total()/1024, v.heap, v.stack, v.total()/hubOnly.total())
	}
	row("api: GET /v1/conversations/{id}/events", api)
	row("sse: sse.Serve behind a plain net/http mux", bareSSE)
	row("hub: hub.Subscribe only", hubOnly)
	fmt.Fprintf(&t, "  (target: api ≤ 48 KiB per subscriber)\n")
	report(b, t.String())
}

// memUse is HeapInuse and StackInuse after two collections.
type memUse struct{ heap, stack float64 }

func memInUse() memUse {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memUse{heap: float64(m.HeapInuse), stack: float64(m.StackInuse)}
}

// perSub is the growth from before to after, per subscriber.
func perSub(before, after memUse, n int) memUse {
	return memUse{heap: (after.heap - before.heap) / float64(n), stack: (after.stack - before.stack) / float64(n)}
}

func (m memUse) total() float64 { return m.heap + m.stack }

func (m memUse) add(o memUse) memUse { return memUse{m.heap + o.heap, m.stack + o.stack} }

func (m memUse) div(n int) memUse { return memUse{m.heap / float64(n), m.stack / float64(n)} }

// idleStreams opens n idle streams of path on addr with raw TCP clients and
// returns the growth of memInUse per stream. It closes them and waits
// until hub has no subscribers before it returns.
func idleStreams(b *testing.B, addr, path string, hub *sse.Hub, n int) memUse {
	b.Helper()
	conns := make([]net.Conn, 0, n+1)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		waitSubscribers(b, hub, 0)
	}()
	open := func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			b.Fatalf("stream: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			c.Close()
			b.Fatalf("stream: %s", resp.Status)
		}
		conns = append(conns, c)
	}
	open() // warm up: anything allocated once is not per stream
	waitSubscribers(b, hub, 1)
	before := memInUse()
	for len(conns) < n+1 {
		open()
	}
	waitSubscribers(b, hub, n+1)
	return perSub(before, memInUse(), n)
}

// idleSubscriptions returns the growth of memInUse per subscription when n
// subscriptions of one conversation are open on a fresh hub.
func idleSubscriptions(n int) memUse {
	hub := sse.NewHub()
	defer hub.Close()
	subs := make([]*sse.Subscription, 0, n+1)
	subs = append(subs, hub.Subscribe("c"))
	before := memInUse()
	for len(subs) < n+1 {
		subs = append(subs, hub.Subscribe("c"))
	}
	after := memInUse()
	runtime.KeepAlive(subs)
	return perSub(before, after, n)
}
