package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/rs/zerolog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// benchSecret is the signing secret of the benchmarks' endpoints.
const benchSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// benchEndpoints parses endpoints for urls (ids e0, e1, …) with settings
// merged into each.
func benchEndpoints(tb testing.TB, settings string, urls ...string) []webhook.Endpoint {
	tb.Helper()
	var items []string
	for i, u := range urls {
		items = append(items, fmt.Sprintf(`{"id":"e%d","url":%q,"secret_env":"S"%s}`, i, u, settings))
	}
	eps, err := webhook.ParseConfig(json.RawMessage("["+strings.Join(items, ",")+"]"),
		func(string) string { return benchSecret })
	if err != nil {
		tb.Fatal(err)
	}
	return eps
}

// arrivals is a webhook receiver on loopback that answers 204 and records
// when each webhook-id first arrived.
type arrivals struct {
	srv  *httptest.Server
	mu   sync.Mutex
	at   map[string]time.Time
	hits atomic.Int64
	got  chan struct{}
}

func newArrivals(tb testing.TB) *arrivals {
	a := &arrivals{at: map[string]time.Time{}, got: make(chan struct{}, 1)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		a.mu.Lock()
		if _, ok := a.at[r.Header.Get(webhook.HeaderID)]; !ok {
			a.at[r.Header.Get(webhook.HeaderID)] = now
		}
		a.mu.Unlock()
		a.hits.Add(1)
		select {
		case a.got <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(a.srv.Close)
	return a
}

// waitHits waits until the receiver has n requests.
func (a *arrivals) waitHits(tb testing.TB, n int64, limit time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for a.hits.Load() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("receiver: %d of %d requests within %s", a.hits.Load(), n, limit)
		}
		select {
		case <-a.got:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// BenchmarkWebhookApprovalOverhead measures approval POST → tool start
// (as BenchmarkApprovalLatency) with two webhook endpoints that receive
// every event against the same server without webhooks, interleaved in
// one run. The outbox adds nothing to the approval's transaction; the
// dispatcher's own writes come after a batch window. Target: ratio ≤ 1.1.
//
//	go test -run '^$' -bench WebhookApprovalOverhead -benchtime 1x ./bench/
func BenchmarkWebhookApprovalOverhead(b *testing.B) {
	helper := markHelper(b)
	dir := benchDir(b)
	mark := filepath.Join(dir, "mark")
	b.Setenv(markEnv, mark)
	defs := []toolDef{{name: "mark", command: []string{helper}, confirm: true}}
	r1, r2 := newArrivals(b), newArrivals(b)
	plain := startAgentdHooks(b, filepath.Join(dir, "plain"), approvalRules, defs, benchWiring(), nil)
	hooked := startAgentdHooks(b, filepath.Join(dir, "hooked"), approvalRules, defs, benchWiring(),
		benchEndpoints(b, "", r1.srv.URL, r2.srv.URL))
	client := newClient()
	for range 5 {
		plain.approvalSample(b, client, mark)
		hooked.approvalSample(b, client, mark)
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	var ps, hs []time.Duration
	b.ResetTimer()
	for i := range n {
		one := func(inst *instance, into *[]time.Duration) {
			*into = append(*into, inst.approvalSample(b, client, mark).latency)
		}
		if i%2 == 0 {
			one(plain, &ps)
			one(hooked, &hs)
		} else {
			one(hooked, &hs)
			one(plain, &ps)
		}
	}
	b.StopTimer()
	r1.waitHits(b, int64(4*(n+5)), waitLimit) // every event reached both (4 per sample)
	r2.waitHits(b, int64(4*(n+5)), waitLimit)
	p, h := summarize(ps), summarize(hs)
	b.ReportMetric(ms(h.p50), "webhooks-p50-ms")
	b.ReportMetric(ms(p.p50), "none-p50-ms")
	b.ReportMetric(float64(h.p50)/float64(p.p50), "ratio-p50")
	b.ReportMetric(float64(h.p99)/float64(p.p99), "ratio-p99")
	var t strings.Builder
	fmt.Fprintf(&t, "approval POST → tool process start, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-34s %9s %9s %9s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "mean ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-34s %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.mean))
	}
	row("no webhooks (baseline)", p)
	row("two webhook endpoints", h)
	fmt.Fprintf(&t, "  %-34s %9.2f %9.2f %9.2f   (target ≤ 1.10)\n", "ratio", float64(h.p50)/float64(p.p50),
		float64(h.p90)/float64(p.p90), float64(h.p99)/float64(p.p99))
	report(b, t.String())
}

// outboxStore opens a store in dir with a conversation and a running run
// for seedCalls.
type outboxStore struct {
	store *sqlite.DB
	run   *agentd.Run
}

func openOutbox(tb testing.TB, dir string) *outboxStore {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	store, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	ctx := context.Background()
	now := time.Now().UTC()
	conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a", CreatedAt: now}
	if err := store.CreateConversation(ctx, conv); err != nil {
		tb.Fatal(err)
	}
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t", ProjectID: "p",
		CorrelationID: "corr", Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "x", CreatedAt: now}
	if _, err := store.StartRun(ctx, run, msg, nil); err != nil {
		tb.Fatal(err)
	}
	return &outboxStore{store: store, run: run}
}

// seed commits n executing calls, each with its tool_call_started event,
// in transactions of at most batch calls (as many loop commits would).
func (o *outboxStore) seed(tb testing.TB, n, batch int) {
	tb.Helper()
	now := time.Now().UTC()
	for start := 0; start < n; start += batch {
		var calls []*agentd.ToolCall
		var drafts []agentd.EventDraft
		for i := start; i < min(n, start+batch); i++ {
			c := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p", ConversationID: o.run.ConversationID,
				RunID: o.run.ID, CorrelationID: "corr", Index: i, Name: "tool", ServerID: "tools",
				Arguments: json.RawMessage(`{"order_id":"A-1001","amount":42.5}`), ArgumentsSHA256: "d", Tier: agentd.TierAuto,
				Status: agentd.StatusExecuting, Method: "TOOL", Endpoint: "tool", CreatedAt: now, UpdatedAt: now}
			d, err := agentd.NewEventDraft(c.ConversationID, now, &agentd.ToolCallStartedPayload{RunID: o.run.ID, ToolCallID: c.ID,
				ToolName: "tool", ServerID: "tools", Arguments: c.Arguments})
			if err != nil {
				tb.Fatal(err)
			}
			calls, drafts = append(calls, c), append(drafts, d)
		}
		if _, err := o.store.CreateToolCalls(context.Background(), calls, drafts); err != nil {
			tb.Fatal(err)
		}
	}
}

// startOutbox starts a webhook service on o's store.
func startOutbox(tb testing.TB, o *outboxStore, eps []webhook.Endpoint) (*webhook.Service, *feed.Feed) {
	tb.Helper()
	f := feed.New(o.store, feed.Options{})
	svc, err := webhook.New(o.store, f, eps, webhook.Options{Logger: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Close(); f.Close() })
	return svc, f
}

// BenchmarkWebhookDelivery measures, with one local receiver: the latency
// from an event's commit to its arrival (p50/p99, events committed one at
// a time), beside a floor of one durable SQLite commit plus one signed POST
// to the same receiver; and the throughput of draining 10,000 queued
// events, beside the floor of 10,000 signed POSTs with the same
// concurrency (max_in_flight 4) and no store.
//
//	go test -run '^$' -bench WebhookDelivery -benchtime 1x ./bench/
func BenchmarkWebhookDelivery(b *testing.B) {
	dir := benchDir(b)
	rc := newArrivals(b)
	o := openOutbox(b, filepath.Join(dir, "latency"))
	_, feed := startOutbox(b, o, benchEndpoints(b, "", rc.srv.URL))
	fl := openFloorDB(b, filepath.Join(dir, "floor.db"))
	floorRC := newArrivals(b) // the floor's own receiver, so its hits do not count as agentd's
	client := newClient()

	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	var lat, floorLat []time.Duration
	b.ResetTimer()
	for i := range n + 5 {
		o.seed(b, 1, 1)
		committed := time.Now() // CreateToolCalls returned: the event is durable
		feed.Notify()           // as the loop's commit wakes the feed
		rc.waitHits(b, int64(i+1), waitLimit)
		// The newest arrival is this event's.
		rc.mu.Lock()
		var last time.Time
		for _, at := range rc.at {
			if at.After(last) {
				last = at
			}
		}
		rc.mu.Unlock()
		t0 := time.Now()
		fl.commitAndPost(b, client, floorRC.srv.URL, i)
		if i >= 5 { // warm-up
			lat, floorLat = append(lat, last.Sub(committed)), append(floorLat, time.Since(t0))
		}
	}

	// Throughput: 10,000 events queued while the service is down.
	const queued = 10000
	tp := openOutbox(b, filepath.Join(dir, "throughput"))
	tpRC := newArrivals(b)
	eps := benchEndpoints(b, "", tpRC.srv.URL)
	// The service's cursor starts at the end of the log on its first
	// start: start it once before queueing.
	svc, f := startOutbox(b, tp, eps)
	svc.Close()
	f.Close()
	tp.seed(b, queued, 500)
	start := time.Now()
	_, tpFeed := startOutbox(b, tp, eps)
	tpFeed.Notify()
	tpRC.waitHits(b, queued, 10*time.Minute)
	drain := time.Since(start)
	floorDrain := postConcurrently(b, client, floorRC.srv.URL, queued, webhook.DefaultMaxInFlight)
	b.StopTimer()

	a, f2 := summarize(lat), summarize(floorLat)
	rate, floorRate := float64(queued)/drain.Seconds(), float64(queued)/floorDrain.Seconds()
	b.ReportMetric(ms(a.p50), "commit-to-receiver-p50-ms")
	b.ReportMetric(ms(a.p99), "commit-to-receiver-p99-ms")
	b.ReportMetric(rate, "deliveries/s")
	var t strings.Builder
	fmt.Fprintf(&t, "commit → receiver, %d events one at a time, one local receiver\n", n)
	fmt.Fprintf(&t, "  %-40s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "mean ms")
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f\n", "agentd: commit → arrival", ms(a.p50), ms(a.p99), ms(a.mean))
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f\n", "floor: one durable commit + signed POST", ms(f2.p50), ms(f2.p99), ms(f2.mean))
	fmt.Fprintf(&t, "  %-40s %9.2f %9.2f\n", "ratio", float64(a.p50)/float64(f2.p50), float64(a.p99)/float64(f2.p99))
	fmt.Fprintf(&t, "throughput: %d queued events to one endpoint (max_in_flight %d)\n", queued, webhook.DefaultMaxInFlight)
	fmt.Fprintf(&t, "  %-40s %9.0f deliveries/s (%.1f s)\n", "agentd: drain the outbox", rate, drain.Seconds())
	fmt.Fprintf(&t, "  %-40s %9.0f POSTs/s (%.1f s)\n", "floor: signed POSTs, no store", floorRate, floorDrain.Seconds())
	fmt.Fprintf(&t, "  %-40s %9.3f\n", "ratio agentd / floor", rate/floorRate)
	report(b, t.String())
}

// floorDB is the latency floor's database: one table, WAL, synchronous=FULL.
type floorDB struct{ db *sql.DB }

func openFloorDB(tb testing.TB, path string) *floorDB {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	return &floorDB{db: db}
}

// commitAndPost commits one row and sends one signed POST.
func (f *floorDB) commitAndPost(tb testing.TB, c *http.Client, url string, i int) {
	tb.Helper()
	tx, err := f.db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO outbox (body) VALUES (?)`, fmt.Sprintf(`{"n":%d}`, i)); err != nil {
		tb.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	signedPost(tb, c, url, fmt.Sprintf("msg_floor_%d", i))
}

// signedPost sends one body with Standard Webhooks headers.
func signedPost(tb testing.TB, c *http.Client, url, id string) {
	body := `{"event_context":{"event_name":"llm.tool_call_started"},"tool_call":{"arguments_json":{"order_id":"A-1001","amount":42.5}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	wh, err := standardwebhooks.NewWebhook(benchSecret)
	if err != nil {
		tb.Fatal(err)
	}
	ts := time.Now()
	sig, err := wh.Sign(id, ts, []byte(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
}

// postConcurrently sends n signed POSTs, conc at a time, and returns how long it took.
func postConcurrently(tb testing.TB, c *http.Client, url string, n, conc int) time.Duration {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				signedPost(tb, c, url, fmt.Sprintf("msg_floor_tp_%d", i))
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkWebhookDeadEndpointMemory measures the heap in use with 10,000
// undelivered events for an endpoint that refuses connections, beside the
// same store and feed before the webhook service starts: the backlog stays
// in the store, claimed a few deliveries at a time.
//
//	go test -run '^$' -bench WebhookDeadEndpointMemory -benchtime 1x ./bench/
func BenchmarkWebhookDeadEndpointMemory(b *testing.B) {
	dir := benchDir(b)
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close() // connections are refused from now on
	o := openOutbox(b, filepath.Join(dir, "dead"))
	eps := benchEndpoints(b, `,"retry_schedule":["1s","1s","1s","1s","1s","1s"]`, url)
	// The cursor starts at the end of the log on the first start: start
	// once before queueing, as a server that ran before the outage.
	svc, f := startOutbox(b, o, eps)
	svc.Close()
	f.Close()
	const queued = 10000
	o.seed(b, queued, 500)
	before := memInUse()
	b.ResetTimer()
	startOutbox(b, o, eps)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		depth, _ := o.store.WebhookQueueDepth(context.Background(), "", "")
		if depth["e0"] >= queued {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("queue depth %d of %d", depth["e0"], queued)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a few retry rounds of the claimed ones
	after := memInUse()
	b.StopTimer()
	grow := after.total() - before.total()
	b.ReportMetric(grow/(1<<20), "MiB")
	var t strings.Builder
	fmt.Fprintf(&t, "heap+stack in use with %d undelivered events to a dead endpoint\n", queued)
	fmt.Fprintf(&t, "  %-40s %9.2f MiB\n", "baseline: store with the events", before.total()/(1<<20))
	fmt.Fprintf(&t, "  %-40s %9.2f MiB\n", "with the webhook service and backlog", after.total()/(1<<20))
	fmt.Fprintf(&t, "  %-40s %9.2f MiB (%.0f bytes per queued event)\n", "growth", grow/(1<<20), grow/queued)
	report(b, t.String())
}
