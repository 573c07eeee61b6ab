package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	r3 "github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/agentd-dev/agentd"
)

// collect returns a handle function that sends each event to a channel and
// returns errStop once it has seen seq stopAt.
func collect(stopAt int64) (func(agentd.Event) error, <-chan agentd.Event) {
	ch := make(chan agentd.Event, 1000)
	return func(e agentd.Event) error {
		ch <- e
		if e.Seq == stopAt {
			return errStop
		}
		return nil
	}, ch
}

func drain(ch <-chan agentd.Event) []int64 {
	var seqs []int64
	for {
		select {
		case e := <-ch:
			seqs = append(seqs, e.Seq)
		default:
			return seqs
		}
	}
}

// fastRetry keeps reconnect waits short in tests; no test asserts on time.
func fastRetry(o FollowOptions) FollowOptions {
	o.MinRetryDelay, o.MaxRetryDelay = time.Millisecond, 5*time.Millisecond
	return o
}

// rawServer is an httptest server whose handler the test writes, counting
// requests and recording their Last-Event-ID headers.
type rawServer struct {
	*httptest.Server
	mu      sync.Mutex
	lastIDs []string
}

func newRawServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int)) *rawServer {
	rs := &rawServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.lastIDs = append(rs.lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(rs.lastIDs)
		rs.mu.Unlock()
		h(w, r, n)
	}))
	t.Cleanup(func() {
		rs.CloseClientConnections()
		rs.Close()
	})
	return rs
}

func (rs *rawServer) seen() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.lastIDs...)
}

func writeSSE(w http.ResponseWriter, es ...agentd.Event) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range es {
		WriteEvent(w, e)
	}
	w.(http.Flusher).Flush()
}

func dataEvent(seq int64) agentd.Event {
	d, _ := json.Marshal(map[string]any{"type": "message", "conversation_id": testConv, "seq": seq})
	return agentd.Event{ConversationID: testConv, Seq: seq, Type: "message", Data: d}
}

// Follow against the real Serve: headers are sent, the log and then live
// events arrive in order, and handle's error ends Follow.
func TestFollowServe(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t)
	fx.auth = "Bearer k1"
	fx.start()
	for i := 0; i < 3; i++ {
		fx.log.commit(testConv, agentd.EventMessage)
	}
	handle, got := collect(4)
	done := make(chan error)
	go func() {
		done <- Follow(context.Background(), fx.url(), FollowOptions{
			Header:     http.Header{"Authorization": {"Bearer k1"}},
			HTTPClient: fx.srv.Client(),
		}, handle)
	}()
	for want := int64(1); want <= 3; want++ {
		e := <-got
		if e.Seq != want || e.Type != agentd.EventMessage || e.ConversationID != testConv {
			t.Fatalf("event %+v, want seq %d", e, want)
		}
		if string(e.Data) != fmt.Sprintf(`{"conversation_id":"c1","seq":%d,"type":"message"}`, want) {
			t.Fatalf("data %s", e.Data)
		}
	}
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventRunFinished)
	if e := <-got; e.Seq != 4 || e.Type != agentd.EventRunFinished {
		t.Fatalf("live event %+v", e)
	}
	if err := <-done; !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v, want errStop", err)
	}
	if err := fx.waitServed(t); err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

// End to end with the real Serve: when a stream ends (here the hub closes,
// as a cut-off would end it), Follow reconnects with the last id it
// handled and the events committed meanwhile come from the log, once each.
func TestFollowCatchesUpAfterStreamEnds(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	fx.log.commit(testConv, agentd.EventMessage)
	fx.log.commit(testConv, agentd.EventMessage)
	handle, got := collect(5)
	done := make(chan error)
	go func() {
		done <- Follow(context.Background(), fx.url(), fastRetry(FollowOptions{LastEventID: 1, HTTPClient: fx.srv.Client()}), handle)
	}()
	if e := <-got; e.Seq != 2 {
		t.Fatalf("first event %d, want 2 (after LastEventID 1)", e.Seq)
	}
	old := fx.swapHub(NewHub())
	commitAndPublish(fx.log, old, testConv, agentd.EventMessage) // reaches the open stream, or the log
	old.Close()
	if err := fx.waitServed(t); !errors.Is(err, ErrHubClosed) {
		t.Fatalf("Serve = %v, want ErrHubClosed", err)
	}
	commitAndPublish(fx.log, old, testConv, agentd.EventMessage) // while disconnected: log only
	if e := <-got; e.Seq != 3 {
		t.Fatalf("got %d, want 3", e.Seq)
	}
	if e := <-got; e.Seq != 4 {
		t.Fatalf("got %d, want 4", e.Seq)
	}
	commitAndPublish(fx.log, fx.currentHub(), testConv, agentd.EventRunFinished)
	if err := <-done; !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	if seqs := fmt.Sprint(drain(got)); seqs != "[5]" {
		t.Fatalf("then handled %s, want [5]", seqs)
	}
}

func TestFollowStatusErrors(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t)
	fx.auth = "Bearer right"
	fx.start()
	handle, _ := collect(0)
	err := Follow(context.Background(), fx.url(), fastRetry(FollowOptions{
		Header:     http.Header{"Authorization": {"Bearer wrong"}},
		HTTPClient: fx.srv.Client(),
	}), handle)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 401 || se.Code != "unauthorized" || se.Message != "bad api key" {
		t.Fatalf("Follow = %v, want a 401 StatusError with the server's code and message", err)
	}

	// A 400 is not retried either.
	err = Follow(context.Background(), fx.url()+"?last_event_id=x", fastRetry(FollowOptions{
		Header:     http.Header{"Authorization": {"Bearer right"}},
		HTTPClient: fx.srv.Client(),
	}), handle)
	if !errors.As(err, &se) || se.StatusCode != 400 {
		t.Fatalf("Follow = %v, want 400", err)
	}

	// Nor is a 200 that is not an event stream.
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>login</html>")
	})
	err = Follow(context.Background(), rs.URL, fastRetry(FollowOptions{HTTPClient: rs.Client()}), handle)
	if !errors.As(err, &se) || se.StatusCode != 200 || len(rs.seen()) != 1 {
		t.Fatalf("Follow = %v after %d requests, want a content-type StatusError after 1", err, len(rs.seen()))
	}
}

func TestFollowRetriesServerErrors(t *testing.T) {
	checkLeaks(t)
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		writeSSE(w, dataEvent(1))
	})
	handle, _ := collect(1)
	var retries []error
	opt := fastRetry(FollowOptions{HTTPClient: rs.Client()})
	opt.OnRetry = func(err error, _ time.Duration) { retries = append(retries, err) }
	if err := Follow(context.Background(), rs.URL, opt, handle); !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	var se *StatusError
	if len(retries) != 2 || !errors.As(retries[0], &se) || se.StatusCode != 503 {
		t.Fatalf("retries = %v, want two 503s", retries)
	}
}

// Trap: r3labs' client fails on events over 64 KiB by default.
func TestFollowLargeEvent(t *testing.T) {
	checkLeaks(t)
	big := agentd.Event{Seq: 1, Type: "tool_call_result", Data: json.RawMessage(`{"result":"` + strings.Repeat("y", 200<<10) + `"}`)}
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) { writeSSE(w, big) })

	// The trap itself, with r3labs' defaults.
	c := r3.NewClient(rs.URL)
	c.Connection = rs.Client()
	c.ReconnectStrategy = &backoff.StopBackOff{}
	err := c.SubscribeRawWithContext(context.Background(), func(*r3.Event) { t.Error("r3labs delivered the large event") })
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("r3labs default client: %v, want bufio.ErrTooLong (has the trap gone?)", err)
	}

	handle, got := collect(1)
	if err := Follow(context.Background(), rs.URL, FollowOptions{HTTPClient: rs.Client()}, handle); !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	if e := <-got; string(e.Data) != string(big.Data) {
		t.Fatalf("large event came back with %d bytes, want %d", len(e.Data), len(big.Data))
	}

	// Over MaxEventSize: an error, not a reconnect loop.
	err = Follow(context.Background(), rs.URL, fastRetry(FollowOptions{HTTPClient: rs.Client(), MaxEventSize: 64 << 10}), handle)
	if !errors.Is(err, bufio.ErrTooLong) || len(rs.seen()) != 3 {
		t.Fatalf("Follow = %v after %d requests, want bufio.ErrTooLong after 3", err, len(rs.seen()))
	}
}

// Trap: r3labs' client returns nil, without reconnecting, when the server
// ends the response cleanly (as on shutdown). Follow reconnects with the
// last id it handled.
func TestFollowReconnectsAfterCleanEOF(t *testing.T) {
	checkLeaks(t)
	// Each response sends the next two events after Last-Event-ID and ends.
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		last, _ := ParseLastEventID(r.Header.Get("Last-Event-ID"), "")
		writeSSE(w, dataEvent(last+1), dataEvent(last+2))
	})

	// The trap itself.
	c := r3.NewClient(rs.URL)
	c.Connection = rs.Client()
	var n int
	if err := c.SubscribeRawWithContext(context.Background(), func(*r3.Event) { n++ }); err != nil || n != 2 || len(rs.seen()) != 1 {
		t.Fatalf("r3labs: err %v, %d events, %d requests; want nil, 2, 1 (has the trap gone?)", err, n, len(rs.seen()))
	}

	handle, got := collect(6)
	var retries []error
	opt := fastRetry(FollowOptions{HTTPClient: rs.Client()})
	opt.OnRetry = func(err error, _ time.Duration) { retries = append(retries, err) }
	if err := Follow(context.Background(), rs.URL, opt, handle); !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	if seqs := fmt.Sprint(drain(got)); seqs != "[1 2 3 4 5 6]" {
		t.Fatalf("handled %s", seqs)
	}
	if ids := fmt.Sprintf("%q", rs.seen()[1:]); ids != `["" "2" "4"]` {
		t.Fatalf("Last-Event-ID headers %s", ids)
	}
	if len(retries) != 2 || !errors.Is(retries[0], ErrStreamEnded) {
		t.Fatalf("retries %v, want two ErrStreamEnded", retries)
	}
}

// A server that repeats events (ignoring Last-Event-ID) does not make
// handle see one twice.
func TestFollowDedupesBySeq(t *testing.T) {
	checkLeaks(t)
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, dataEvent(1), dataEvent(2), dataEvent(int64(2+n)))
	})
	handle, got := collect(4)
	if err := Follow(context.Background(), rs.URL, fastRetry(FollowOptions{HTTPClient: rs.Client()}), handle); !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	if seqs := fmt.Sprint(drain(got)); seqs != "[1 2 3 4]" {
		t.Fatalf("handled %s", seqs)
	}
}

// Trap: when a connection breaks in the middle of an event, r3labs hands
// over the partial event. Follow drops it and resumes before it.
func TestFollowDropsTruncatedEvent(t *testing.T) {
	checkLeaks(t)
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeSSE(w, dataEvent(1))
			io.WriteString(w, "id: 2\nevent: message\ndata: {\"type\":\"mess")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // drop the connection mid-event
		}
		writeSSE(w, dataEvent(2))
	})
	handle, got := collect(2)
	var retries []error
	opt := fastRetry(FollowOptions{HTTPClient: rs.Client()})
	opt.OnRetry = func(err error, _ time.Duration) { retries = append(retries, err) }
	if err := Follow(context.Background(), rs.URL, opt, handle); !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	<-got
	if e := <-got; e.Seq != 2 || string(e.Data) != string(dataEvent(2).Data) {
		t.Fatalf("event 2 = %s", e.Data)
	}
	if len(retries) != 1 || !errors.Is(retries[0], ErrBadEvent) {
		t.Fatalf("retries %v, want [ErrBadEvent] (r3labs delivering the partial event)", retries)
	}
	if ids := fmt.Sprintf("%q", rs.seen()); ids != `["" "1"]` {
		t.Fatalf("Last-Event-ID headers %s", ids)
	}
}

// Trap: r3labs' retry loop ignores its context. Follow, cancelled while it
// waits an hour to reconnect, returns at once.
func TestFollowCancelWhileWaitingToRetry(t *testing.T) {
	checkLeaks(t)
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "down", http.StatusBadGateway)
	})
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan struct{})
	opt := FollowOptions{HTTPClient: rs.Client(), MinRetryDelay: time.Hour, MaxRetryDelay: time.Hour}
	opt.OnRetry = func(error, time.Duration) { close(waiting) }
	done := make(chan error)
	handle, _ := collect(0)
	go func() { done <- Follow(ctx, rs.URL, opt, handle) }()
	<-waiting
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second): // hang guard, not a timing assertion
		t.Fatal("Follow ignored its context while waiting to retry")
	}
}

func TestFollowCancelWhileStreaming(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	fx.log.commit(testConv, agentd.EventMessage)
	ctx, cancel := context.WithCancel(context.Background())
	handle, got := collect(0)
	done := make(chan error)
	go func() { done <- Follow(ctx, fx.url(), FollowOptions{HTTPClient: fx.srv.Client()}, handle) }()
	<-got
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow = %v, want context.Canceled", err)
	}
	if err := fx.waitServed(t); err != nil {
		t.Fatalf("Serve = %v, want nil when the client leaves", err)
	}
}

// A connection on which nothing arrives, not even a heartbeat, is replaced.
func TestFollowIdleTimeoutReconnects(t *testing.T) {
	checkLeaks(t)
	rs := newRawServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeSSE(w, dataEvent(1))
			<-r.Context().Done() // then silence
			return
		}
		writeSSE(w, dataEvent(2))
	})
	handle, _ := collect(2)
	var retries []error
	opt := fastRetry(FollowOptions{HTTPClient: rs.Client(), IdleTimeout: 50 * time.Millisecond})
	opt.OnRetry = func(err error, _ time.Duration) { retries = append(retries, err) }
	if err := Follow(context.Background(), rs.URL, opt, handle); !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v", err)
	}
	// A slow machine may idle out a connection more than once; every retry
	// is for idleness, and the one that succeeded resumed after event 1.
	if len(retries) == 0 {
		t.Fatal("no reconnect")
	}
	for _, err := range retries {
		if !errors.Is(err, ErrIdle) {
			t.Fatalf("retries %v, want only ErrIdle", retries)
		}
	}
	if ids := rs.seen(); ids[len(ids)-1] != "1" {
		t.Fatalf("Last-Event-ID headers %q, want the last to be 1", ids)
	}
}

func TestFollowRejectsBadURL(t *testing.T) {
	handle, _ := collect(0)
	for _, u := range []string{"ftp://x/events", "://bad", "127.0.0.1:8787/events"} {
		if err := Follow(context.Background(), u, FollowOptions{}, handle); err == nil {
			t.Errorf("Follow(%q) = nil", u)
		}
	}
}
