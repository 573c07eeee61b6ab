package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// localReceiver is an OTLP/HTTP trace receiver on loopback that decodes
// each export (as a collector would) and counts its spans.
func localReceiver(tb testing.TB) (url string, spans *atomic.Int64) {
	spans = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans.Add(int64(len(ss.Spans)))
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	tb.Cleanup(srv.Close)
	return srv.URL, spans
}

// exportingProvider is the tracer provider server/otel.go builds
// (batching OTLP/HTTP exporter, agentd's ID generator), exporting to url.
func exportingProvider(tb testing.TB, url string) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		tb.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithIDGenerator(tracing.IDGenerator{}))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// tracedSample is one approval of BenchmarkApprovalTracing.
type tracedSample struct {
	step     time.Duration // the message POST → run_waiting: a model step and the park
	approval time.Duration // the approval POST → the tool's start mark
}

// BenchmarkApprovalTracing measures the approval path of
// BenchmarkApprovalLatency on four engines in the same run, interleaved:
// two with traces off (no tracer, as cmd/agentd runs without an OTEL_*
// variable; the second is the A/A noise floor), one with the trace API's
// no-op provider (every span call made, nothing recorded), and one with
// the SDK exporting over OTLP/HTTP to a receiver on loopback. Each sample
// also times the message POST → run_waiting (a model step and the park).
//
// Metrics: p50 ratios of each engine to the first one with traces off.
//
//	go test -run '^$' -bench ApprovalTracing -benchtime 1x ./bench/
func BenchmarkApprovalTracing(b *testing.B) {
	helper := markHelper(b)
	dir := benchDir(b)
	mark := filepath.Join(dir, "mark")
	b.Setenv(markEnv, mark)
	recv, exported := localReceiver(b)
	names := []string{"off", "off (A/A)", "no-op provider", "on, OTLP to loopback"}
	exporting := exportingProvider(b, recv)
	providers := []trace.TracerProvider{nil, nil, noop.NewTracerProvider(), exporting}
	var insts []*instance
	for i, tp := range providers {
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		insts = append(insts, startAgentdTraced(b, d, approvalRules, []toolDef{{name: "mark", command: []string{helper}, confirm: true}}, benchWiring(), nil, tp))
	}
	client := newClient()
	for range 5 {
		for _, inst := range insts {
			inst.tracedSample(b, client, mark)
		}
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 100) // four engines: 100 keeps the one-iteration run of scripts/test.sh short
	samples := make([][]tracedSample, len(insts))
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		for j := range insts {
			k := (i + j) % len(insts) // rotate the order
			samples[k] = append(samples[k], insts[k].tracedSample(b, client, mark))
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := exporting.ForceFlush(context.Background()); err != nil || exported.Load() == 0 {
		b.Fatalf("the exporting engine exported no span: %v", err)
	}

	col := func(ss []tracedSample, get func(tracedSample) time.Duration) summary {
		ds := make([]time.Duration, len(ss))
		for i, s := range ss {
			ds[i] = get(s)
		}
		return summarize(ds)
	}
	approval := func(s tracedSample) time.Duration { return s.approval }
	step := func(s tracedSample) time.Duration { return s.step }
	base, baseStep := col(samples[0], approval), col(samples[0], step)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	keys := []string{"aa", "noop", "on"}
	var t strings.Builder
	fmt.Fprintf(&t, "approval POST → tool start, and message POST → run_waiting, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-22s %12s %12s %8s %8s %14s %8s\n", "traces", "approval p50", "approval p99", "ratio50", "ratio99", "step p50 ms", "ratio50")
	for i, name := range names {
		a, s := col(samples[i], approval), col(samples[i], step)
		fmt.Fprintf(&t, "  %-22s %9.3f ms %9.3f ms %8.3f %8.3f %11.3f ms %8.3f\n", name, ms(a.p50), ms(a.p99),
			float64(a.p50)/float64(base.p50), float64(a.p99)/float64(base.p99), ms(s.p50), float64(s.p50)/float64(baseStep.p50))
		if i > 0 {
			b.ReportMetric(float64(a.p50)/float64(base.p50), "ratio-p50-"+keys[i-1])
			b.ReportMetric(float64(s.p50)/float64(baseStep.p50), "step-ratio-p50-"+keys[i-1])
		}
	}
	fmt.Fprintf(&t, "  spans exported by the traced engine: %d (%.1f per approval)\n", exported.Load(), float64(exported.Load())/float64(n+5))
	report(b, t.String())
}

// tracedSample is approvalSample that also times the run's first step.
func (inst *instance) tracedSample(b *testing.B, c *http.Client, mark string) tracedSample {
	b.Helper()
	conv := inst.createConversation(b, c)
	events := inst.w.watch(conv)
	defer inst.w.unwatch(conv)
	t0 := time.Now()
	inst.sendMessage(b, c, conv, "go")
	callID := field(b, waitEvent(b, events, agentd.EventConfirmationRequired), "tool_call_id")
	step := waitEvent(b, events, agentd.EventRunWaiting).at.Sub(t0)
	if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	t1 := time.Now()
	if status, body := post(b, c, inst.base+"/v1/tool-calls/"+callID+"/approval", `{"decision":"approve"}`); status != http.StatusOK {
		b.Fatalf("approve: %d %s", status, body)
	}
	if fin := waitEvent(b, events, agentd.EventRunFinished); field(b, fin, "status") != string(agentd.RunCompleted) {
		b.Fatalf("run finished: %s", fin.Data)
	}
	return tracedSample{step: step, approval: readMark(b, mark).Sub(t1)}
}

var (
	attrTool = attribute.String("gen_ai.tool.name", "mark")
	attrCall = attribute.String("gen_ai.tool.call.id", "call_01JBENCH")
	attrTier = attribute.String("agentd.tier", "confirm")
)

// BenchmarkSpan measures the cost of one span as the engine records it
// (start with three attributes, end) with the exporting provider of
// BenchmarkApprovalTracing, and with the no-op provider.
//
//	go test -run '^$' -bench 'Span$' ./bench/
func BenchmarkSpan(b *testing.B) {
	recv, _ := localReceiver(b)
	for _, c := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"noop", noop.NewTracerProvider()}, {"otlp", exportingProvider(b, recv)}} {
		b.Run(c.name, func(b *testing.B) {
			tr := c.tp.Tracer("bench")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, span := tr.Start(ctx, "execute_tool mark", trace.WithAttributes(
					attrTool, attrCall, attrTier))
				span.End()
			}
		})
	}
}
