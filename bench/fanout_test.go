package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// fanoutSubscribers is the number of concurrent SSE subscribers of the one
// conversation in BenchmarkSSEFanout and BenchmarkIdleSubscriberMemory.
const fanoutSubscribers = 1000

// fanoutText is the script model's answer in BenchmarkSSEFanout: 60 words,
// streamed as 15 text_delta events of 4 words.
var fanoutText = strings.TrimSpace(strings.Repeat("the quick brown fox jumps over the lazy dog again ", 6))

// endType marks the last event of a round published without the loop.
const endType = "bench_end"

// BenchmarkSSEFanout measures how fast events get from their producer to
// 1,000 concurrent subscribers of one conversation, each a real HTTP SSE
// stream over loopback whose client reads and parses the framing (id,
// event, data; the JSON is not decoded). A round is a burst of events that
// ends with a marker; it is timed from the first publish (or the message
// POST) until every subscriber has read the marker, and the next round
// starts only then. Three kinds of round are interleaved in each iteration:
//
//   - loop: POST a message; the loop runs one model step whose 60-word
//     answer streams as text_delta events (run_started, 15 × text_delta,
//     message, run_finished: 18 events, each its own durable commit), all
//     to the 1,000 SSE streams through the API route;
//   - commit: the same number of events, each appended by its own
//     store.AppendEvents (one fsynced transaction) and then published to
//     the hub, as the loop's commit does, to the same 1,000 streams;
//   - hub (the baseline): the same number of events published to a hub with
//     1,000 in-memory subscriptions, each drained by a goroutine — no
//     store, no HTTP, no SSE encoding.
//
// Metrics: events/s of each (an event counts once, when all 1,000 have it),
// deliveries/s of the loop (events × subscribers), and the slowdown of loop
// and commit against the hub alone. ns/op is the wall time of one
// iteration (three rounds).
//
//	go test -run '^$' -bench SSEFanout -benchtime 1x ./bench/
func BenchmarkSSEFanout(b *testing.B) {
	const n = fanoutSubscribers
	rules := `[{"when":{"user":"^talk"},"reply":{"text":` + mustJSON(fanoutText) + `}}]`
	inst := startAgentd(b, benchDir(b), rules, nil)
	client := newClient()
	conv := inst.createConversation(b, client)
	events := inst.w.watch(conv)

	// 1,000 real SSE streams through the API route.
	streamEnds := &endCounter{ch: make(chan struct{}, 1)}
	streams := openStreams(b, inst.base+"/v1/conversations/"+conv+"/events", n, streamEnds)
	defer streams.close()
	waitSubscribers(b, inst.hub, n)

	// The baseline: the hub alone, 1,000 in-memory subscriptions.
	hub := sse.NewHub()
	hubEnds := &endCounter{ch: make(chan struct{}, 1)}
	hubSubs := drainHub(hub, "c", n, hubEnds)
	defer hubSubs.close(hub)

	ctx := context.Background()
	var loopSeq int64 // the conversation's last sequence number
	loopRound := func() (time.Duration, int) {
		streamEnds.expect(n)
		t0 := time.Now()
		inst.sendMessage(b, client, conv, "talk")
		streamEnds.wait(b, inst.hub)
		d := time.Since(t0)
		fin := waitEvent(b, events, agentd.EventRunFinished)
		k := int(fin.Seq - loopSeq)
		loopSeq = fin.Seq
		return d, k
	}
	deltaData := func(i int) json.RawMessage {
		d, err := agentd.NewEventDraft(conv, time.Now(), &agentd.TextDeltaPayload{RunID: "run_bench", MessageID: "msg_bench",
			Delta: fmt.Sprintf("word%d fox jumps over ", i)})
		if err != nil {
			b.Fatal(err)
		}
		return d.Data
	}
	commitRound := func(k int) time.Duration {
		drafts := make([]agentd.EventDraft, k)
		for i := range drafts {
			drafts[i] = agentd.EventDraft{ConversationID: conv, Type: agentd.EventTextDelta, Data: deltaData(i)}
		}
		drafts[k-1].Type = endType
		streamEnds.expect(n)
		t0 := time.Now()
		for _, d := range drafts {
			evs, err := inst.store.AppendEvents(ctx, []agentd.EventDraft{d})
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range evs {
				inst.publish(e)
			}
		}
		streamEnds.wait(b, inst.hub)
		loopSeq += int64(k)
		return time.Since(t0)
	}
	var hubSeq int64
	hubRound := func(k int) time.Duration {
		es := make([]agentd.Event, k)
		for i := range es {
			hubSeq++
			es[i] = agentd.Event{ConversationID: "c", Seq: hubSeq, Type: agentd.EventTextDelta, Data: deltaData(i)}
		}
		es[k-1].Type = endType
		hubEnds.expect(n)
		t0 := time.Now()
		for _, e := range es {
			hub.Publish(e)
		}
		hubEnds.wait(b, hub)
		return time.Since(t0)
	}

	// Warm up, and learn how many events one loop round makes.
	_, k := loopRound()
	commitRound(k)
	hubRound(k)

	rounds := iterations(b, "AGENTD_BENCH_ROUNDS", 20)
	var loopD, commitD, hubD []time.Duration
	b.ResetTimer()
	start := time.Now()
	for range rounds {
		d, got := loopRound()
		if got != k {
			b.Fatalf("a loop round made %d events, the first %d", got, k)
		}
		loopD = append(loopD, d)
		commitD = append(commitD, commitRound(k))
		hubD = append(hubD, hubRound(k))
	}
	elapsed := time.Since(start)
	b.StopTimer()

	streams.close()
	if err := streams.check(loopSeq); err != nil {
		b.Fatal(err)
	}
	hubSubs.close(hub)
	if err := hubSubs.check(hubSeq); err != nil {
		b.Fatal(err)
	}

	total := func(ds []time.Duration) time.Duration {
		var t time.Duration
		for _, d := range ds {
			t += d
		}
		return t
	}
	rate := func(ds []time.Duration) float64 { return float64(k*len(ds)) / total(ds).Seconds() }
	loopRate, commitRate, hubRate := rate(loopD), rate(commitD), rate(hubD)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(rounds), "ns/op")
	b.ReportMetric(loopRate, "loop-events/s")
	b.ReportMetric(loopRate*n, "loop-deliveries/s")
	b.ReportMetric(commitRate, "commit-events/s")
	b.ReportMetric(hubRate, "hub-events/s")
	b.ReportMetric(hubRate/loopRate, "hub/loop")

	var t strings.Builder
	fmt.Fprintf(&t, "events to %d subscribers of one conversation, %d rounds of %d events each, interleaved\n", n, rounds, k)
	fmt.Fprintf(&t, "  %-44s %10s %13s %9s %9s %9s\n", "", "events/s", "deliveries/s", "p50 ms", "p99 ms", "vs hub")
	row := func(name string, ds []time.Duration) {
		s := summarize(ds)
		r := rate(ds)
		fmt.Fprintf(&t, "  %-44s %10.0f %13.0f %9.2f %9.2f %8.1f×\n", name, r, r*n, ms(s.p50), ms(s.p99), hubRate/r)
	}
	row("loop → API route SSE (HTTP, loopback)", loopD)
	row("AppendEvents+Publish → API route SSE", commitD)
	row("hub alone → in-memory subscriptions", hubD)
	fmt.Fprintf(&t, "  (p50/p99: time for a round's %d events to reach all %d subscribers; slow-subscriber cut-offs: %d)\n",
		k, n, inst.hub.CutOffs())
	report(b, t.String())
}

// endCounter counts end markers seen by subscribers and signals when the
// expected number has been reached.
type endCounter struct {
	ends   atomic.Int64
	target atomic.Int64
	ch     chan struct{}
}

// expect raises the target by n; call it before publishing a round.
func (c *endCounter) expect(n int64) { c.target.Add(n) }

func (c *endCounter) hit() {
	if c.ends.Add(1) == c.target.Load() {
		c.ch <- struct{}{}
	}
}

func (c *endCounter) wait(tb testing.TB, hub *sse.Hub) {
	tb.Helper()
	select {
	case <-c.ch:
	case <-time.After(waitLimit):
		tb.Fatalf("subscribers saw %d of %d end markers within %s (hub: %d subscribers, %d cut off)",
			c.ends.Load(), c.target.Load(), waitLimit, hub.Subscribers(), hub.CutOffs())
	}
}

func isEnd(typ string) bool { return typ == endType || typ == agentd.EventRunFinished }

// subscriberSet is a set of subscriber goroutines and what each saw.
type subscriberSet struct {
	wg      sync.WaitGroup
	closers []func()
	once    sync.Once
	mu      sync.Mutex
	counts  []int64 // events seen, per subscriber
	lasts   []int64 // last sequence number seen
	errs    []error
}

func (s *subscriberSet) close(hub ...*sse.Hub) {
	s.once.Do(func() {
		for _, c := range s.closers {
			if c != nil {
				c()
			}
		}
		for _, h := range hub {
			h.Close()
		}
		s.wg.Wait()
	})
}

// check verifies that every subscriber saw every event up to last, in order.
func (s *subscriberSet) check(last int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.counts {
		if s.counts[i] != last || s.lasts[i] != last {
			return fmt.Errorf("subscriber %d saw %d events, the last %d; want %d (ended with %v)",
				i, s.counts[i], s.lasts[i], last, s.errs[i])
		}
	}
	return nil
}

// openStreams opens n SSE streams of url, each read by its own goroutine
// that parses the framing and checks that ids increase by one.
func openStreams(b *testing.B, url string, n int, ends *endCounter) *subscriberSet {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: n, DisableCompression: true,
	}}
	s := &subscriberSet{counts: make([]int64, n), lasts: make([]int64, n), errs: make([]error, n)}
	s.closers = make([]func(), n)
	var open sync.WaitGroup
	sem := make(chan struct{}, 32)
	var openErr atomic.Value
	for i := range n {
		open.Add(1)
		sem <- struct{}{}
		go func() {
			defer open.Done()
			defer func() { <-sem }()
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				openErr.Store(err)
				return
			}
			req.Header.Set("Accept", "text/event-stream")
			resp, err := client.Do(req)
			if err != nil {
				openErr.Store(err)
				return
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				openErr.Store(fmt.Errorf("stream: %s", resp.Status))
				return
			}
			s.closers[i] = func() { resp.Body.Close() }
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				r := newSSEReader(resp.Body)
				var count, last int64
				var err error
				for {
					var id int64
					var typ string
					id, typ, _, err = r.next()
					if err != nil {
						break
					}
					if id != last+1 {
						err = fmt.Errorf("id %d after %d", id, last)
						break
					}
					count, last = count+1, id
					if isEnd(typ) {
						ends.hit()
					}
				}
				s.mu.Lock()
				s.counts[i], s.lasts[i], s.errs[i] = count, last, err
				s.mu.Unlock()
			}()
		}()
	}
	open.Wait()
	if err, _ := openErr.Load().(error); err != nil {
		s.close()
		b.Fatal(err)
	}
	return s
}

// drainHub subscribes n in-memory subscribers to conv, each drained by a
// goroutine.
func drainHub(hub *sse.Hub, conv string, n int, ends *endCounter) *subscriberSet {
	s := &subscriberSet{counts: make([]int64, n), lasts: make([]int64, n), errs: make([]error, n)}
	for i := range n {
		sub := hub.Subscribe(conv)
		s.closers = append(s.closers, sub.Close)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			var count, last int64
			for {
				select {
				case e := <-sub.Events():
					count, last = count+1, e.Seq
					if isEnd(e.Type) {
						ends.hit()
					}
					continue
				case <-sub.Done():
				}
				break
			}
			s.mu.Lock()
			s.counts[i], s.lasts[i], s.errs[i] = count, last, sub.Err()
			s.mu.Unlock()
		}()
	}
	return s
}

// waitSubscribers waits until hub has n live subscribers.
func waitSubscribers(tb testing.TB, hub *sse.Hub, n int) {
	tb.Helper()
	deadline := time.Now().Add(waitLimit)
	for hub.Subscribers() != n {
		if time.Now().After(deadline) {
			tb.Fatalf("hub has %d subscribers, want %d", hub.Subscribers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustJSON(v any) string { return string(mustRaw(v)) }

func mustRaw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
