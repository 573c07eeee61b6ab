package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/demo"
	"github.com/agentd-dev/agentd/demo/billing"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/tools/callcontext"
	"github.com/rs/zerolog"
)

// inline adapts connections.Durable to callcontext.Requests.
type inline struct{ d *connections.Durable }

func (r inline) Inline(ctx context.Context, args json.RawMessage, caller agentd.Principal, o callcontext.RequestOptions) (any, bool, error) {
	return r.d.Inline(ctx, args, caller, connections.InlineOptions{Writes: o.Writes, Durable: o.Durable, IdempotencyKey: o.IdempotencyKey})
}

// BenchmarkContextRequest: a command tool's read through its per-call
// context endpoint (POST /v1/context/request on the real echo API on
// loopback → the token → the request tool's classification → the
// connection's client → the demo billing API on loopback, with its audit
// entry in a real SQLite file) against the same GET sent by the same
// client straight to the billing API, interleaved in the same run.
// docs/runtime.md has the figures.
func BenchmarkContextRequest(b *testing.B) {
	down := httptest.NewServer(billing.New().Handler())
	defer down.Close()
	dir := benchDir(b)
	cdir := filepath.Join(dir, "project", "connections", "billing")
	must(b, os.MkdirAll(cdir, 0o755))
	doc, err := demo.FS().Open("connections/billing/openapi.json")
	must(b, err)
	raw, err := io.ReadAll(doc)
	must(b, err)
	must(b, os.WriteFile(filepath.Join(cdir, "openapi.json"), raw, 0o644))
	must(b, os.WriteFile(filepath.Join(cdir, "policy.json"), []byte(`{"endpoints": {"GET /invoices": {}}}`), 0o644))
	must(b, os.WriteFile(filepath.Join(cdir, "connection.json"), []byte(fmt.Sprintf(`{"base_url": %q, "openapi": "openapi.json"}`, down.URL+"/api")), 0o644))
	conns, err := connections.Load(filepath.Join(dir, "project"), os.Getenv)
	must(b, err)
	store, err := sqlite.Open(filepath.Join(dir, "agentd.db"))
	must(b, err)
	defer store.Close()
	// endpoint serves the context endpoint over durable and returns its
	// URL and a token of an open call.
	endpoint := func(durable *connections.Durable) (string, string) {
		ep := callcontext.New(zerolog.Nop())
		ep.Wire(nil, inline{durable})
		srv := httptest.NewServer(api.New(nil, nil, nil, api.Config{Context: ep, Logger: zerolog.Nop()}).Handler())
		b.Cleanup(srv.Close)
		ep.SetURL(srv.URL + "/v1/context")
		env, closeCtx := ep.Open(agentd.ToolCall{ID: "call_bench", Name: "bench", TenantID: "default", ProjectID: "default"}, false, nil, false)
		b.Cleanup(closeCtx)
		return srv.URL, strings.TrimPrefix(env[1], callcontext.EnvToken+"=")
	}
	audited, token := endpoint(connections.NewDurable(conns, connections.WithAudit(store, zerolog.Nop())))
	bare, bareToken := endpoint(connections.NewDurable(conns))

	c := newClient()
	send := func(req *http.Request) time.Duration {
		began := time.Now()
		resp, err := c.Do(req)
		must(b, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", req.URL, resp.StatusCode)
		}
		return time.Since(began)
	}
	body := `{"connection":"billing","method":"GET","endpoint":"/invoices","intent":"read"}`
	viaCtx := func(base, token string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/context/request", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		return send(req)
	}
	direct := func() time.Duration {
		req, _ := http.NewRequest(http.MethodGet, down.URL+"/api/invoices", nil)
		return send(req)
	}
	for range 20 { // warm every path's connections
		viaCtx(audited, token)
		viaCtx(bare, bareToken)
		direct()
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 500)
	var ds, cs, bs []time.Duration
	b.ResetTimer()
	for range n {
		ds = append(ds, direct())
		cs = append(cs, viaCtx(audited, token))
		bs = append(bs, viaCtx(bare, bareToken))
	}
	b.StopTimer()
	d, x, y := summarize(ds), summarize(cs), summarize(bs)
	b.ReportMetric(float64(x.p50)/float64(d.p50), "ratio-p50")
	b.ReportMetric(ms(x.p50-d.p50), "extra-ms-p50")
	var t strings.Builder
	fmt.Fprintf(&t, "  %-40s %9s %9s %9s\n", "", "p50 ms", "p90 ms", "p99 ms")
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f\n", "GET straight to the API (baseline)", ms(d.p50), ms(d.p90), ms(d.p99))
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f\n", "the same through the context endpoint", ms(x.p50), ms(x.p90), ms(x.p99))
	fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f\n", "  … without its audit entry", ms(y.p50), ms(y.p90), ms(y.p99))
	fmt.Fprintf(&t, "  %-40s %9.2f %9.2f %9.2f   (n = %d)\n", "ratio", float64(x.p50)/float64(d.p50), float64(x.p90)/float64(d.p90),
		float64(x.p99)/float64(d.p99), n)
	fmt.Fprintf(&t, "  %-40s %9.2f %9.2f %9.2f\n", "ratio without the audit entry", float64(y.p50)/float64(d.p50), float64(y.p90)/float64(d.p90),
		float64(y.p99)/float64(d.p99))
	report(b, t.String())
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
