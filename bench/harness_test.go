package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/internal/mcptest"
	"github.com/agentd-dev/agentd/internal/replicas"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/metrics"
	"github.com/agentd-dev/agentd/model/script"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/sqlstore"
	"github.com/agentd-dev/agentd/sse"
	"github.com/agentd-dev/agentd/tools"
	"github.com/agentd-dev/agentd/tools/registry"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// waitLimit bounds every wait for something that must happen. It is a
// failure deadline, never a performance assertion.
const waitLimit = 30 * time.Second

// markEnv names the file the mark helper writes its start instant to.
const markEnv = "AGENTD_BENCH_MARK"

// benchDir returns the folder for database files: $AGENTD_BENCH_DIR (a
// fresh subfolder, removed afterwards) or a temporary folder.
func benchDir(tb testing.TB) string {
	tb.Helper()
	root := os.Getenv("AGENTD_BENCH_DIR")
	if root == "" {
		return tb.TempDir()
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "agentd-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// iterations is how many samples a benchmark takes: b.N, but at least min,
// so that -benchtime 1x and the default benchtime both give enough samples
// for a p99. The environment variable env, when set to a positive integer,
// replaces min (a smoke run can ask for few samples, a careful one for
// more). Benchmarks that use it report ns/op themselves.
func iterations(b *testing.B, env string, min int) int {
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
		min = v
	}
	return max(b.N, min)
}

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// markHelper builds testdata/markhelper once per test binary and returns
// the path of the executable.
func markHelper(tb testing.TB) string {
	tb.Helper()
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentd-bench-helper-")
		if err != nil {
			helperErr = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			helperErr = fmt.Errorf("the go command is needed to build the mark helper: %w", err)
			return
		}
		out := filepath.Join(dir, "markhelper")
		cmd := exec.Command(goBin, "build", "-o", out, "./testdata/markhelper")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("go build markhelper: %v\n%s", err, b)
			return
		}
		helperPath = out
	})
	if helperErr != nil {
		tb.Fatal(helperErr)
	}
	return helperPath
}

// readMark returns the instant the mark helper wrote.
func readMark(tb testing.TB, path string) time.Time {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read mark: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		tb.Fatalf("mark %q: %v", b, err)
	}
	return time.Unix(0, n)
}

// watcher is what feeds the hub in the benchmarks: it publishes to the
// real hub (which feeds the SSE streams) and also hands the events of
// watched conversations to the benchmark, so that it can wait for a state
// without polling. It never blocks. With the direct wiring the engine's
// commits call it; with the feed wiring the feed's follower does.
type watcher struct {
	hub *sse.Hub

	mu   sync.Mutex
	subs map[string]chan stamped
}

// stamped is a published event and the instant the hub had it.
type stamped struct {
	agentd.Event
	at time.Time
}

func (w *watcher) Publish(e agentd.Event) {
	w.hub.Publish(e)
	at := time.Now()
	w.mu.Lock()
	ch := w.subs[e.ConversationID]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- stamped{e, at}:
		default:
			panic("bench: watcher channel full for " + e.ConversationID)
		}
	}
}

func (w *watcher) watch(conv string) <-chan stamped {
	ch := make(chan stamped, 4096)
	w.mu.Lock()
	w.subs[conv] = ch
	w.mu.Unlock()
	return ch
}

func (w *watcher) unwatch(conv string) {
	w.mu.Lock()
	delete(w.subs, conv)
	w.mu.Unlock()
}

// waitEvent returns the next event of type typ from ch, skipping others.
func waitEvent(tb testing.TB, ch <-chan stamped, typ string) stamped {
	tb.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		select {
		case e := <-ch:
			if e.Type == typ {
				return e
			}
		case <-deadline.C:
			tb.Fatalf("no %s event within %s", typ, waitLimit)
		}
	}
}

// field returns a string field of an event's data.
func field(tb testing.TB, e stamped, name string) string {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		tb.Fatalf("%s event data: %v", e.Type, err)
	}
	s, _ := m[name].(string)
	return s
}

// toolDef is one command tool of a benchmark project.
type toolDef struct {
	name    string
	command []string
	confirm bool // exposure requires-confirmation
	// idempotent declares the tool idempotent: an approval then claims
	// the call in its own commit (docs/loop.md).
	idempotent bool
	// approval, when set, is tool.json's approval rule (docs/governance.md).
	approval string
}

// instance is agentd wired as server/serve.go wires it, in-process, on
// a loopback listener.
type instance struct {
	dir    string
	store  countedStore
	hub    *sse.Hub
	w      *watcher
	engine *loop.Engine
	srv    *http.Server
	base   string // http://127.0.0.1:port
	// feed is the event feed the engine's commits wake. With the feed
	// wiring it also feeds the hub (and the watcher); stopFeed ends that.
	feed     *feed.Feed
	feedsHub bool
	stopFeed func()
	hooks    *webhook.Service // nil without webhook endpoints
}

// Wirings of the hub ($AGENTD_BENCH_WIRING).
const (
	// wiringDirect is serve.go's: the engine's commits go to the hub
	// directly and wake the event feed (which the hub does not follow).
	wiringDirect = "direct"
	// wiringFeed feeds the hub from the event feed: the engine's commits
	// only wake the feed, and one goroutine follows it from the head and
	// publishes to the hub, as sse.Hub.PublishFeed does.
	wiringFeed = "feed"
)

// benchWiring is the wiring the benchmarks use: $AGENTD_BENCH_WIRING,
// "direct" (the default, as serve.go) or "feed", for comparing the two in
// one session (BenchmarkHubWiring runs both side by side).
func benchWiring() string {
	if os.Getenv("AGENTD_BENCH_WIRING") == wiringFeed {
		return wiringFeed
	}
	return wiringDirect
}

// publish announces committed events as the engine's commits do.
func (inst *instance) publish(e agentd.Event) {
	if !inst.feedsHub {
		inst.hub.Publish(e)
	}
	inst.feed.Publish(e)
}

// followFeed feeds w (and so the hub) from feed, from the newest event
// on, in one goroutine, and returns a function that ends it.
func followFeed(tb testing.TB, store agentd.Store, feed *feed.Feed, w *watcher) func() {
	head, err := store.LastPosition(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	sub, err := feed.Follow(agentd.FeedFilter{After: head})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			e, err := sub.Next(ctx)
			if err != nil {
				return // the benchmark's waits fail if this was not the end
			}
			w.Publish(e)
		}
	}()
	return func() {
		cancel()
		<-done
		sub.Close()
	}
}

// enginePublisher is what the engine publishes to with the direct wiring:
// the watcher (and so the hub), then the feed.
type enginePublisher struct {
	w    *watcher
	feed *feed.Feed
}

func (p enginePublisher) Publish(e agentd.Event) {
	p.w.Publish(e)
	p.feed.Publish(e)
}

// startAgentd builds store, hub, engine and API in dir with the script
// rules given and the tools, wired as benchWiring says, and serves the API
// on 127.0.0.1:0. Everything is closed when tb ends.
func startAgentd(tb testing.TB, dir, rules string, defs []toolDef) *instance {
	tb.Helper()
	return startAgentdWired(tb, dir, rules, defs, benchWiring())
}

// startAgentdWired is startAgentd with the hub wiring given (wiringDirect
// or wiringFeed).
func startAgentdWired(tb testing.TB, dir, rules string, defs []toolDef, wiring string) *instance {
	tb.Helper()
	return startAgentdHooks(tb, dir, rules, defs, wiring, nil)
}

// startAgentdHooks is startAgentdWired with the webhook outbox serving
// endpoints (none: no webhook service), started before the engine as
// serve.go starts it.
func startAgentdHooks(tb testing.TB, dir, rules string, defs []toolDef, wiring string, endpoints []webhook.Endpoint) *instance {
	tb.Helper()
	return startAgentdTraced(tb, dir, rules, defs, wiring, endpoints, nil)
}

// startAgentdTraced is startAgentdHooks with the engine's tracer provider
// (nil: traces off, as cmd/agentd runs without an OTEL_* variable).
func startAgentdTraced(tb testing.TB, dir, rules string, defs []toolDef, wiring string, endpoints []webhook.Endpoint, tp trace.TracerProvider) *instance {
	tb.Helper()
	return startAgentdWith(tb, dir, rules, defs, setup{wiring: wiring, endpoints: endpoints, tp: tp})
}

// setup is what startAgentdWith is given beyond the rules and the command
// tools; its zero value is serve.go's defaults with the direct wiring.
type setup struct {
	wiring    string
	endpoints []webhook.Endpoint
	tp        trace.TracerProvider
	// sources are tool sources registered after the command tools (Go
	// functions, say, for a tool that costs no fork).
	sources []toolset.Source
	// maxTurns is the agent's max_turns (0: the default).
	maxTurns int
	// open opens the store in dir (nil: the SQLite file agentd.db).
	open func(tb testing.TB, dir string) countedStore
	// expireEvery is the engine's ExpireEvery (0: the default; negative:
	// no background expiry, whose first pass reads the store once the
	// engine has started).
	expireEvery time.Duration
}

// countedStore is a store that counts the statements and transactions it
// runs (sqlite.DB, postgres.DB).
type countedStore interface {
	agentd.Store
	Counts() sqlstore.Counts
}

// openSQLite opens the SQLite store agentd.db in dir.
func openSQLite(tb testing.TB, dir string) countedStore {
	tb.Helper()
	store, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// startAgentdWith is startAgentd with everything the setup says.
func startAgentdWith(tb testing.TB, dir, rules string, defs []toolDef, su setup) *instance {
	tb.Helper()
	wiring, endpoints, tp := su.wiring, su.endpoints, su.tp
	toolsDir := filepath.Join(dir, "tools")
	for _, d := range defs {
		td := filepath.Join(toolsDir, d.name)
		if err := os.MkdirAll(td, 0o755); err != nil {
			tb.Fatal(err)
		}
		def := map[string]any{"name": d.name, "description": "benchmark tool " + d.name,
			"command": d.command, "env": []string{markEnv}}
		if d.confirm {
			def["exposure"] = map[string]string{"kind": tools.ExposureRequiresConfirmation}
		}
		if d.idempotent {
			def["idempotent"] = true
		}
		if d.approval != "" {
			def["approval"] = json.RawMessage(d.approval)
		}
		b, _ := json.Marshal(def)
		if err := os.WriteFile(filepath.Join(td, "tool.json"), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	tl, _, err := tools.LoadDir(toolsDir)
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := registry.New(append([]toolset.Source{tools.NewSource(tl)}, su.sources...)...)
	if err != nil {
		tb.Fatal(err)
	}
	toolSet, err := reg.Toolset(nil)
	if err != nil {
		tb.Fatal(err)
	}
	model, err := script.New(json.RawMessage(`{"provider":"script","script":{"rules":`+rules+`}}`), dir)
	if err != nil {
		tb.Fatal(err)
	}
	open := su.open
	if open == nil {
		open = openSQLite
	}
	store := open(tb, dir)
	hub := sse.NewHub()
	w := &watcher{hub: hub, subs: map[string]chan stamped{}}
	inst := &instance{dir: dir, store: store, hub: hub, w: w, feed: feed.New(store, feed.Options{})}
	var pub loop.Publisher = enginePublisher{w, inst.feed}
	if wiring == wiringFeed {
		inst.feedsHub, inst.stopFeed = true, followFeed(tb, store, inst.feed, w)
		pub = inst.feed
	}
	// Metrics as server/serve.go registers them: the approval path pays
	// for its observer and the HTTP collectors too.
	promReg := prometheus.NewRegistry()
	if len(endpoints) > 0 {
		hooks, err := webhook.New(store, inst.feed, endpoints, webhook.Options{Logger: zerolog.Nop()})
		if err != nil {
			tb.Fatal(err)
		}
		if err := hooks.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		inst.hooks = hooks
	}
	engine := loop.New(store, pub, &loop.Agent{
		Name: "bench", System: "You are a benchmark agent.", Model: model, Tools: toolSet, MaxTurns: su.maxTurns,
	}, loop.Options{Logger: zerolog.Nop(), Observer: metrics.NewLoop(promReg, store.ParkedCount), Tracer: tp,
		ExpireEvery: su.expireEvery})
	if err := engine.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	// Every subscriber of a load run is the one dev key: no per-key
	// stream limit applies to the harness.
	srvAPI := api.New(engine, hub, store, api.Config{Logger: zerolog.Nop(), Registerer: promReg,
		Metrics: promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}), MaxStreamsPerKey: 1 << 30})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	// The settings of server/serve.go.
	srv := &http.Server{
		Handler:           srvAPI.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	srv.RegisterOnShutdown(hub.Close)
	go func() { _ = srv.Serve(ln) }()
	inst.engine, inst.srv, inst.base = engine, srv, "http://"+ln.Addr().String()
	tb.Cleanup(inst.close)
	return inst
}

func (inst *instance) close() {
	inst.hub.Close() // ends the streams, so that Shutdown need not wait for them
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = inst.srv.Shutdown(ctx)
	_ = inst.srv.Close()
	inst.engine.Close()
	if inst.hooks != nil {
		inst.hooks.Close()
	}
	if inst.stopFeed != nil {
		inst.stopFeed()
	}
	inst.feed.Close()
	_ = inst.store.Close()
}

// newClient is an HTTP client that keeps its loopback connections alive.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: 64, MaxIdleConnsPerHost: 64, DisableCompression: true, IdleConnTimeout: time.Minute,
	}}
}

// post sends a JSON body and returns the status and the response body.
func post(tb testing.TB, c *http.Client, url, body string) (int, []byte) {
	tb.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("POST %s: %v", url, err)
	}
	return resp.StatusCode, b
}

// createConversation creates a conversation through the API.
func (inst *instance) createConversation(tb testing.TB, c *http.Client) string {
	tb.Helper()
	status, body := post(tb, c, inst.base+"/v1/conversations", `{}`)
	if status != http.StatusCreated {
		tb.Fatalf("create conversation: %d %s", status, body)
	}
	var conv struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &conv); err != nil || conv.ID == "" {
		tb.Fatalf("create conversation: %s", body)
	}
	return conv.ID
}

// sendMessage starts a run through the API.
func (inst *instance) sendMessage(tb testing.TB, c *http.Client, conv, content string) {
	tb.Helper()
	b, _ := json.Marshal(map[string]string{"content": content})
	status, body := post(tb, c, inst.base+"/v1/conversations/"+conv+"/messages", string(b))
	if status != http.StatusAccepted {
		tb.Fatalf("send message: %d %s", status, body)
	}
}

// devPrincipal is the caller of a dev-mode server (no API keys).
var devPrincipal = agentd.Principal{TenantID: "default", ProjectID: "default", Role: agentd.RoleAdmin, KeyID: "dev"}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample with at least p% of the samples
// at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// summary is the distribution of a set of latencies.
type summary struct {
	n                  int
	p50, p90, p99, max time.Duration
	mean               time.Duration
}

func summarize(ds []time.Duration) summary {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	out := summary{n: len(s), p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99)}
	if len(s) > 0 {
		out.max = s[len(s)-1]
		out.mean = sum / time.Duration(len(s))
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sseReader parses an SSE stream's framing: id, event and data fields,
// events ended by a blank line, comments ignored. It does not decode the
// JSON data (the clients share the server's CPUs in these benchmarks).
type sseReader struct {
	br   *bufio.Reader
	line []byte
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReaderSize(r, 8<<10)} }

// next returns the next event's id, type and data length.
func (r *sseReader) next() (id int64, typ string, dataLen int, err error) {
	haveData := false
	for {
		line, err := r.readLine()
		if err != nil {
			return 0, "", 0, err
		}
		switch {
		case len(line) == 0:
			if typ != "" || haveData {
				return id, typ, dataLen, nil
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("id: ")):
			id, err = strconv.ParseInt(string(line[4:]), 10, 64)
			if err != nil {
				return 0, "", 0, fmt.Errorf("bad id line %q", line)
			}
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			haveData = true
			dataLen += len(line) - 6
		default:
			return 0, "", 0, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// readLine returns one line without its \n; the slice is valid until the
// next call.
func (r *sseReader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.line = append(r.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			r.line = append(r.line, line...)
		}
		line = r.line
	}
	if err != nil {
		return nil, err
	}
	return line[:len(line)-1], nil
}

// Tables of the last run of each benchmark, printed after all of them (the
// testing package keeps only the first lines of a benchmark's log).
var (
	tablesMu    sync.Mutex
	tableOrder  []string
	tablesByKey = map[string]string{}
)

// report keeps the table of b's current run; TestMain prints it at the end.
func report(b *testing.B, table string) {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	if _, ok := tablesByKey[b.Name()]; !ok {
		tableOrder = append(tableOrder, b.Name())
	}
	tablesByKey[b.Name()] = table
}

func TestMain(m *testing.M) {
	code := m.Run()
	if agentdPath != "" {
		os.RemoveAll(filepath.Dir(agentdPath)) // the binary agentdBinary built
	}
	replicas.RemoveBinary() // the one internal/replicas built
	mcptest.Remove()        // the MCP test server, if a benchmark built it
	tablesMu.Lock()
	if len(tableOrder) > 0 {
		fmt.Printf("\nhub wiring (all but BenchmarkHubWiring, which runs both): %s ($AGENTD_BENCH_WIRING: feed or direct)\n", benchWiring())
	}
	for _, name := range tableOrder {
		fmt.Printf("\n== %s\n%s", name, tablesByKey[name])
	}
	tablesMu.Unlock()
	os.Exit(code)
}
