package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol/agui"
	"github.com/agentd-dev/agentd/protocol/aisdk"
	"github.com/agentd-dev/agentd/protocol/protocoltest"
	"github.com/agentd-dev/agentd/sse"
)

// BenchmarkProtocolApproval measures the time from an approval request to
// the start of the approved tool's process through each way of approving,
// interleaved in the same run on the same server: the native approval POST
// (the baseline), an AG-UI run whose resume approves the interrupt, and an
// AI SDK chat request whose last message carries the approval response.
// Each sample parks one call in a fresh conversation (as
// BenchmarkApprovalLatency does); the protocol requests name the
// conversation as their thread and are read to their end.
//
// Metrics: p50/p99 of each, in ms, and each protocol's ratio to the native
// POST (target ≤ 1.2).
//
//	go test -run '^$' -bench ProtocolApproval -benchtime 1x ./bench/
func BenchmarkProtocolApproval(b *testing.B) {
	helper := markHelper(b)
	dir := benchDir(b)
	mark := filepath.Join(dir, "mark")
	b.Setenv(markEnv, mark)
	inst := startAgentd(b, dir, approvalRules, []toolDef{{name: "mark", command: []string{helper}, confirm: true}})
	client := newClient()

	ways := []struct {
		name    string
		path    string
		body    func(conv, call string) string
		samples []time.Duration
	}{
		{name: "native POST /v1/tool-calls/{id}/approval", body: func(_, _ string) string { return `{"decision":"approve"}` }},
		{name: "AG-UI POST /v1/ag-ui (resume)", path: "/v1/ag-ui", body: func(conv, call string) string {
			return fmt.Sprintf(`{"threadId":%q,"runId":"bench","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, conv, call)
		}},
		{name: "AI SDK POST /v1/ai-sdk/chat", path: "/v1/ai-sdk/chat", body: func(conv, call string) string {
			return fmt.Sprintf(`{"id":%q,"trigger":"submit-message","messages":[{"id":"m","role":"assistant","parts":[{"type":"tool-mark","toolCallId":%q,"state":"approval-responded","input":{},"approval":{"id":%q,"approved":true}}]}]}`, conv, call, call)
		}},
	}
	sample := func(i int) {
		w := &ways[i]
		conv := inst.createConversation(b, client)
		events := inst.w.watch(conv)
		defer inst.w.unwatch(conv)
		inst.sendMessage(b, client, conv, "go")
		call := field(b, waitEvent(b, events, agentd.EventConfirmationRequired), "tool_call_id")
		waitEvent(b, events, agentd.EventRunWaiting)
		if err := os.Remove(mark); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
		url := inst.base + w.path
		if w.path == "" {
			url = inst.base + "/v1/tool-calls/" + call + "/approval"
		}
		t0 := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(w.body(conv, call)))
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body) // a protocol's stream ends with the run
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %s %v", w.name, resp.StatusCode, body, err)
		}
		if fin := waitEvent(b, events, agentd.EventRunFinished); field(b, fin, "status") != string(agentd.RunCompleted) {
			b.Fatalf("%s: run finished %s", w.name, fin.Data)
		}
		w.samples = append(w.samples, readMark(b, mark).Sub(t0))
	}
	for i := range 3 * 5 { // warm up every path
		sample(i % 3)
	}
	for i := range ways {
		ways[i].samples = nil
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		for j := range 3 {
			sample((i + j) % 3) // rotate the order
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	native := summarize(ways[0].samples)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	var t strings.Builder
	fmt.Fprintf(&t, "approval request → tool process start, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-42s %9s %9s %9s %9s %11s %11s\n", "", "p50 ms", "p90 ms", "p99 ms", "mean ms", "ratio p50", "ratio p99")
	for i, w := range ways {
		s := summarize(w.samples)
		r50, r99 := float64(s.p50)/float64(native.p50), float64(s.p99)/float64(native.p99)
		fmt.Fprintf(&t, "  %-42s %9.3f %9.3f %9.3f %9.3f %11.2f %11.2f\n", w.name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.mean), r50, r99)
		key := []string{"native", "agui", "aisdk"}[i]
		b.ReportMetric(ms(s.p50), key+"-p50-ms")
		if i > 0 {
			b.ReportMetric(r50, key+"-ratio-p50")
			b.ReportMetric(r99, key+"-ratio-p99")
		}
	}
	fmt.Fprintf(&t, "  (target: each protocol's ratio to the native POST ≤ 1.20)\n")
	report(b, t.String())
}

// BenchmarkProtocolFrames measures the cost of encoding agentd's events as
// each protocol's frames — the pure encoder plus the JSON of each frame —
// per event, against the native SSE encoding of the same events
// (sse.WriteEvent, which writes the stored JSON as it is) as the baseline.
// The events are those of protocoltest.Scenario, a run with streamed text,
// parked, auto, refused and denied calls.
//
//	go test -run '^$' -bench ProtocolFrames ./bench/
func BenchmarkProtocolFrames(b *testing.B) {
	items := protocoltest.Scenario()
	events := make([]agentd.Event, len(items))
	for i, it := range items {
		events[i] = it.Event
	}
	b.Run("native", func(b *testing.B) {
		for b.Loop() {
			for _, e := range events {
				if err := sse.WriteEvent(io.Discard, e); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	})
	b.Run("ag-ui", func(b *testing.B) {
		frames := 0
		for b.Loop() {
			enc := agui.NewEncoder("thread", "run")
			for _, it := range items {
				for _, f := range enc.Item(it) {
					if _, err := json.Marshal(f); err != nil {
						b.Fatal(err)
					}
					frames++
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		b.ReportMetric(float64(frames)/float64(b.N*len(events)), "frames/event")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
	})
	b.Run("ai-sdk", func(b *testing.B) {
		chunks := 0
		for b.Loop() {
			enc := aisdk.NewEncoder()
			for _, it := range items {
				for _, c := range enc.Item(it) {
					if _, err := json.Marshal(c); err != nil {
						b.Fatal(err)
					}
					chunks++
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		b.ReportMetric(float64(chunks)/float64(b.N*len(events)), "frames/event")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/frame")
	})
}
