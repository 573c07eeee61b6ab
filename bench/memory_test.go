package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
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
// Target: api ≤ 1.2× sse (issue 19; the api/sse metric). ns/op is the
// wall time of one iteration.
//
//	go test -run '^$' -bench IdleSubscriberMemory -benchtime 1x ./bench/
func BenchmarkIdleSubscriberMemory(b *testing.B) {
	n := envInt("AGENTD_BENCH_SUBS", fanoutSubscribers)
	convs := envInt("AGENTD_BENCH_SUB_CONVS", 1)
	raiseFileLimit(b, 2*n+1000) // a client and a server socket per stream, if it may
	inst := startAgentd(b, benchDir(b), `[]`, nil)
	paths := make([]string, convs)
	for i := range paths {
		paths[i] = "/v1/conversations/" + inst.createConversation(b, newClient()) + "/events"
	}
	conv := strings.TrimSuffix(strings.TrimPrefix(paths[0], "/v1/conversations/"), "/events")
	barePaths := make([]string, convs)
	for i, p := range paths {
		barePaths[i] = "/events?conversation=" + strings.TrimSuffix(strings.TrimPrefix(p, "/v1/conversations/"), "/events")
	}

	// sse.Serve alone, on its own hub and listener.
	bareHub := sse.NewHub()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		_ = sse.Serve(r.Context(), w, bareHub, inst.store, cmp.Or(r.URL.Query().Get("conversation"), conv), 0, sse.Options{})
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
		api = api.add(idleStreams(b, apiAddr, paths, inst.hub, n))
		bareSSE = bareSSE.add(idleStreams(b, ln.Addr().String(), barePaths, bareHub, n))
		hubOnly = hubOnly.add(idleSubscriptions(n, convs))
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
	fmt.Fprintf(&t, "server memory per idle SSE subscriber (HeapInuse+StackInuse delta / %d, across %d conversation(s)), mean of %d iteration(s)\n", n, convs, iters)
	fmt.Fprintf(&t, "  %-46s %10s %9s %9s %9s %9s\n", "", "B/sub", "KiB/sub", "heap B", "stack B", "vs hub")
	row := func(name string, v memUse) {
		fmt.Fprintf(&t, "  %-46s %10.0f %9.1f %9.0f %9.0f %8.1f×\n", name, v.total(), v.total()/1024, v.heap, v.stack, v.total()/hubOnly.total())
	}
	row("api: GET /v1/conversations/{id}/events", api)
	row("sse: sse.Serve behind a plain net/http mux", bareSSE)
	row("hub: hub.Subscribe only", hubOnly)
	fmt.Fprintf(&t, "  api ÷ sse: %.2f× (target: ≤ 1.2×)\n", api.total()/bareSSE.total())
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

// idleStreams opens n idle streams on addr with raw TCP clients, of paths
// in turn, and returns the growth of memInUse per stream. It closes them
// and waits until hub has no subscribers before it returns. When this
// process may not open 2n sockets, the clients are another process (the
// test binary running TestIdleStreamClients), so that only the server's
// sockets count.
func idleStreams(b *testing.B, addr string, paths []string, hub *sse.Hub, n int) memUse {
	b.Helper()
	conns := make([]net.Conn, 0, n+1)
	defer func() {
		closeAll(conns)
		waitSubscribers(b, hub, 0)
	}()
	// warm up: anything allocated once is not per stream
	if err := openIdle(&conns, addr, paths, 1); err != nil {
		b.Fatal(err)
	}
	waitSubscribers(b, hub, 1)
	before := memInUse()
	if fileLimit() >= uint64(2*n+1000) {
		if err := openIdle(&conns, addr, paths, n); err != nil {
			b.Fatal(err)
		}
		waitSubscribers(b, hub, n+1)
		return perSub(before, memInUse(), n)
	}
	stop := remoteStreams(b, addr, paths, n)
	defer stop()
	waitSubscribers(b, hub, n+1)
	return perSub(before, memInUse(), n)
}

// openIdle opens n idle streams on addr, of paths in turn, and appends
// their connections to conns.
func openIdle(conns *[]net.Conn, addr string, paths []string, n int) error {
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		path := paths[len(*conns)%len(paths)]
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", resp.Status)
		}
		if err != nil {
			c.Close()
			return fmt.Errorf("stream: %w", err)
		}
		*conns = append(*conns, c)
	}
	return nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// remoteStreams runs TestIdleStreamClients in a child process that opens n
// streams, waits until they are open, and returns the function that closes
// them (it ends the child).
func remoteStreams(b *testing.B, addr string, paths []string, n int) (stop func()) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleStreamClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENTD_IDLE_ADDR="+addr, "AGENTD_IDLE_PATHS="+strings.Join(paths, ","),
		"AGENTD_IDLE_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop = func() { stdin.Close(); _ = cmd.Wait() }
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stop()
		b.Fatalf("stream clients: %q %v", line, err)
	}
	return stop
}

// TestIdleStreamClients is BenchmarkIdleSubscriberMemory's client process
// (it skips when run otherwise): it opens $AGENTD_IDLE_N streams on
// $AGENTD_IDLE_ADDR, prints "ready" and holds them until stdin closes.
func TestIdleStreamClients(t *testing.T) {
	addr := os.Getenv("AGENTD_IDLE_ADDR")
	if addr == "" {
		t.Skip("the client process of BenchmarkIdleSubscriberMemory")
	}
	n, _ := strconv.Atoi(os.Getenv("AGENTD_IDLE_N"))
	raiseFileLimit(t, n+1000)
	var conns []net.Conn
	defer func() { closeAll(conns) }()
	if err := openIdle(&conns, addr, strings.Split(os.Getenv("AGENTD_IDLE_PATHS"), ","), n); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// idleSubscriptions returns the growth of memInUse per subscription when n
// subscriptions of convs conversations are open on a fresh hub.
func idleSubscriptions(n, convs int) memUse {
	hub := sse.NewHub()
	defer hub.Close()
	subs := make([]*sse.Subscription, 0, n+1)
	subs = append(subs, hub.Subscribe("c0"))
	before := memInUse()
	for len(subs) < n+1 {
		subs = append(subs, hub.Subscribe(fmt.Sprintf("c%d", len(subs)%convs)))
	}
	after := memInUse()
	runtime.KeepAlive(subs)
	return perSub(before, after, n)
}

// fileLimit is the process's limit of open files.
func fileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// raiseFileLimit raises the process's limit of open files towards n, as
// far as its hard limit allows (a larger hard limit needs privileges
// containers often lack).
func raiseFileLimit(tb testing.TB, n int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= uint64(n) {
		return
	}
	lim.Cur = min(uint64(n), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Logf("open files limit: %v", err)
	}
}
