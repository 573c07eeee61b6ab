package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

func TestServeHeadersReplayThenLive(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	for i := 0; i < 3; i++ {
		fx.log.commit(testConv, agentd.EventMessage)
	}
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)

	for k, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"X-Accel-Buffering": "no",
	} {
		if got := s.resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", s.resp.StatusCode)
	}

	f := s.nextEvent(t)
	if f.ID != "1" || f.Event != agentd.EventMessage || f.Data != `{"conversation_id":"c1","seq":1,"type":"message"}` {
		t.Fatalf("first event = %+v", f)
	}
	s.expectSeqs(t, 2, 3)
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventRunFinished)
	f = s.nextEvent(t)
	if f.ID != "4" || f.Event != agentd.EventRunFinished {
		t.Fatalf("live event = %+v", f)
	}
	// Another conversation's events do not appear: the next event is 5.
	commitAndPublish(fx.log, fx.hub, "other", agentd.EventMessage)
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 5)
}

func TestServeReplaysStrictlyAfterLastEventID(t *testing.T) {
	tests := []struct {
		name   string
		header string
		query  string
	}{
		{"header", "4", ""},
		{"query", "", "4"},
		{"header wins over query", "4", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			fx := newFixture(t)
			fx.opt.PageSize = 3 // several pages
			fx.start()
			for i := 0; i < 10; i++ {
				fx.log.commit(testConv, agentd.EventTextDelta)
			}
			url := fx.url()
			if tt.query != "" {
				url += "?last_event_id=" + tt.query
			}
			h := http.Header{}
			if tt.header != "" {
				h.Set("Last-Event-ID", tt.header)
			}
			s := dialStream(t, fx.srv.Client(), url, h)
			s.expectSeqs(t, seqRange(5, 10)...)
			commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
			s.expectSeqs(t, 11) // live follows, nothing repeated
		})
	}
}

func TestServeLastEventIDAtHead(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	for i := 0; i < 3; i++ {
		fx.log.commit(testConv, agentd.EventMessage)
	}
	s := dialStream(t, fx.srv.Client(), fx.url(), http.Header{"Last-Event-Id": {"3"}})
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 4)
}

// A Last-Event-ID the log has not reached is refused before anything is
// written, with a message that names the newest event; an id at the newest
// event is not.
func TestServeRefusesLastEventIDPastNewest(t *testing.T) {
	checkLeaks(t)
	log := newMemLog()
	for i := 0; i < 3; i++ {
		log.commit(testConv, agentd.EventMessage)
	}
	for _, tt := range []struct {
		conv   string
		last   int64
		newest string
	}{
		{testConv, 4, "newest event 3"},
		{testConv, 1000, "newest event 3"},
		{"empty", 1, "newest event 0"},
	} {
		hub := NewHub()
		rec := httptest.NewRecorder()
		// A hang guard: a stream that starts runs until it ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Serve(ctx, rec, hub, log, tt.conv, tt.last, Options{})
		cancel()
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Fatalf("%s after %d: Serve = %v, want EINVALID", tt.conv, tt.last, err)
		}
		msg := agentd.ErrorMessage(err)
		for _, want := range []string{fmt.Sprint(tt.last), tt.newest, "without Last-Event-ID"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s after %d: message %q does not mention %q", tt.conv, tt.last, msg, want)
			}
		}
		assertUntouched(t, rec)
		if hub.Subscribers() != 0 {
			t.Errorf("%s after %d: the refused stream left a subscriber", tt.conv, tt.last)
		}
	}
}

// Over HTTP, a Last-Event-ID past the newest event, in the header or the
// query, is a 400 in the API's error shape, not a silent stream; the same
// client resumes from the newest id and gets the next live event.
func TestServeLastEventIDPastNewestOverHTTP(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	for i := 0; i < 3; i++ {
		fx.log.commit(testConv, agentd.EventMessage)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tt := range []struct{ header, query string }{{"4", ""}, {"", "4"}} {
		req, _ := http.NewRequest(http.MethodGet, fx.url(), nil)
		if tt.header != "" {
			req.Header.Set("Last-Event-ID", tt.header)
		} else {
			req.URL.RawQuery = "last_event_id=" + tt.query
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || body.Error.Code != agentd.EINVALID ||
			!strings.Contains(body.Error.Message, "newest event 3") {
			t.Errorf("header %q query %q: %s %+v (%v), want 400 invalid naming the newest event 3",
				tt.header, tt.query, resp.Status, body, err)
		}
		if err := fx.waitServed(t); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("Serve = %v, want EINVALID", err)
		}
	}
	if fx.hub.Subscribers() != 0 {
		t.Fatal("a refused stream subscribed")
	}
	s := dialStream(t, client, fx.url(), http.Header{"Last-Event-Id": {"3"}})
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 4)
}

// The newest event is read after the subscription: an id that an event
// committed meanwhile reaches is accepted, and what follows it arrives once.
func TestServeLastEventIDReachedWhileChecking(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	for i := 0; i < 3; i++ {
		fx.log.commit(testConv, agentd.EventMessage)
	}
	fx.log.afterRead = func(n int) {
		if n == 1 { // after the replay found nothing after 4, before the check
			commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
		}
	}
	s := dialStream(t, &http.Client{Timeout: 10 * time.Second}, fx.url(), http.Header{"Last-Event-Id": {"4"}})
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s, want 200", s.resp.Status)
	}
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 5) // 4 (published during the check) is not sent: the client has it
}

func TestServeRejectsBadLastEventID(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	for _, bad := range []string{"-1", "abc", "1.5"} {
		req, _ := http.NewRequest(http.MethodGet, fx.url(), nil)
		req.Header.Set("Last-Event-ID", bad)
		resp, err := fx.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: status %d, want 400", bad, resp.StatusCode)
		}
	}
	if fx.hub.Subscribers() != 0 {
		t.Fatal("a rejected request subscribed")
	}
}

// Events committed and published while the stream is replaying, including
// out of order, are each delivered exactly once and in order.
func TestServeCommitsDuringReplayAreNeitherLostNorDuplicated(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t)
	fx.opt.PageSize = 3
	fx.start()
	for i := 0; i < 10; i++ {
		fx.log.commit(testConv, agentd.EventTextDelta)
	}
	var once sync.Once
	fx.log.beforeRead = func(n int) {
		// Before each page is read: a commit the page may include, and
		// whose publish arrives on the subscription too.
		commitAndPublish(fx.log, fx.hub, testConv, agentd.EventTextDelta)
	}
	fx.log.afterRead = func(n int) {
		// After a page is read: commit two, publish them out of order,
		// and once commit one that is never published at all.
		a := fx.log.commit(testConv, agentd.EventTextDelta)
		b := fx.log.commit(testConv, agentd.EventTextDelta)
		fx.hub.Publish(b)
		fx.hub.Publish(a)
		once.Do(func() { fx.log.commit(testConv, agentd.EventTextDelta) })
	}

	s := dialStream(t, fx.srv.Client(), fx.url(), http.Header{"Last-Event-Id": {"2"}})
	// Read until the stream settles: stop the hooks, then publish a
	// sentinel; everything up to it must arrive exactly once, in order.
	var got []int64
	for len(got) < 20 {
		f := s.nextEvent(t)
		var seq int64
		fmt.Sscan(f.ID, &seq)
		got = append(got, seq)
	}
	fx.log.mu.Lock()
	fx.log.beforeRead, fx.log.afterRead = nil, nil
	fx.log.mu.Unlock()
	sentinel := commitAndPublish(fx.log, fx.hub, testConv, agentd.EventRunFinished)
	for {
		f := s.nextEvent(t)
		var seq int64
		fmt.Sscan(f.ID, &seq)
		got = append(got, seq)
		if seq == sentinel.Seq {
			break
		}
	}
	want := seqRange(3, sentinel.Seq)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %v\nwant     %v", got, want)
	}
}

// A live event that skips ahead makes the stream read the gap from the log;
// the skipped event, published late, is not sent twice.
func TestServeFillsGapFromLog(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	fx.log.commit(testConv, agentd.EventMessage)
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	s.expectSeqs(t, 1)

	e2 := fx.log.commit(testConv, agentd.EventMessage)
	e3 := fx.log.commit(testConv, agentd.EventMessage)
	fx.hub.Publish(e3)
	s.expectSeqs(t, 2, 3)
	fx.hub.Publish(e2)
	fx.hub.Publish(e3)
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 4)
}

// Publishing an event before committing it breaks the contract; the stream
// ends rather than skip what precedes it, so the client resumes from the log.
func TestServeEndsWhenLiveEventIsAheadOfLog(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	fx.log.commit(testConv, agentd.EventMessage)
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	s.expectSeqs(t, 1)
	fx.hub.Publish(ev(testConv, 3)) // never committed
	if err := fx.waitServed(t); !errors.Is(err, errLogBehind) {
		t.Fatalf("Serve = %v, want errLogBehind", err)
	}
	if _, err := s.p.readFrame(); err != io.EOF {
		t.Fatalf("after the stream ended: %v, want EOF", err)
	}
}

func TestServeHeartbeatOnTick(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	fx.tick <- time.Now() // unbuffered: Serve has taken it when this returns
	f := s.next(t)
	if !f.isComment() || len(f.Comments) != 1 || f.Comments[0] != "ping" {
		t.Fatalf("got %+v, want a ping comment", f)
	}
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 1)
	fx.tick <- time.Now()
	if f := s.next(t); !f.isComment() {
		t.Fatalf("got %+v, want a ping comment", f)
	}
}

// Without Options.Tick, the heartbeat comes from a real ticker.
func TestServeHeartbeatTicker(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t)
	fx.opt = Options{Heartbeat: time.Millisecond}
	fx.start()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	if f := s.next(t); !f.isComment() || f.Comments[0] != "ping" {
		t.Fatalf("got %+v, want a ping comment", f)
	}
}

func TestServeEndsOnHubClose(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 1)
	fx.hub.Close()
	if err := fx.waitServed(t); !errors.Is(err, ErrHubClosed) {
		t.Fatalf("Serve = %v, want ErrHubClosed", err)
	}
	if _, err := s.p.readFrame(); err != io.EOF {
		t.Fatalf("client read after hub close: %v, want a clean EOF", err)
	}
}

// With the hub's Close registered as a shutdown hook, http.Server.Shutdown
// does not wait for open streams.
func TestServeShutdownDoesNotHang(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	fx.tick <- time.Now()
	s.next(t) // the stream is in its loop

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // hang guard
	defer cancel()
	if err := fx.srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := fx.waitServed(t); !errors.Is(err, ErrHubClosed) {
		t.Fatalf("Serve = %v, want ErrHubClosed", err)
	}
}

func TestServeReturnsWhenClientGoes(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 1)
	s.close()
	if err := fx.waitServed(t); err != nil {
		t.Fatalf("Serve = %v, want nil when the client goes", err)
	}
	if n := fx.hub.Subscribers(); n != 0 {
		t.Fatalf("Subscribers = %d after the client left", n)
	}
}

// A real HTTP client that stops reading its body is cut off, and the other
// subscriber of the same conversation receives every event meanwhile. Each
// publish waits only for the fast client to read that event; the total
// volume (25 MiB) is more than loopback socket buffers hold, so the slow
// stream must block in a write and its subscription must overflow.
func TestServeSlowHTTPSubscriberIsCutOff(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t, WithBuffer(4)).start()
	slow := dialStream(t, fx.srv.Client(), fx.url(), nil) // never read
	fast := dialStream(t, fx.srv.Client(), fx.url(), nil)
	if fx.hub.Subscribers() != 2 {
		t.Fatalf("Subscribers = %d, want 2", fx.hub.Subscribers())
	}

	// Publish until the slow stream, blocked in a write once the socket
	// buffers are full, overflows its subscription. Each event is 64 KiB,
	// so this takes as many events as the kernel buffers hold; 4096 (256
	// MiB) is far beyond any loopback buffer.
	big := strings.Repeat("x", 64<<10)
	publish := func(i int64) {
		e := fx.log.commitData(testConv, agentd.EventToolCallResult, map[string]any{"result": big})
		fx.hub.Publish(e)
		f := fast.nextEvent(t)
		if f.ID != fmt.Sprint(i) || len(f.Data) < len(big) {
			t.Fatalf("fast client got id %q (%d bytes), want %d", f.ID, len(f.Data), i)
		}
	}
	i := int64(1)
	for ; fx.hub.CutOffs() == 0; i++ {
		if i > 4096 {
			t.Fatal("slow subscriber never cut off")
		}
		publish(i)
	}
	for end := i + 10; i < end; i++ {
		publish(i)
	}
	if fx.hub.CutOffs() != 1 || fx.hub.Subscribers() != 1 {
		t.Fatalf("CutOffs = %d, Subscribers = %d; want 1 and 1", fx.hub.CutOffs(), fx.hub.Subscribers())
	}
	t.Logf("slow subscriber cut off after %d events of 64 KiB", i-11)
	// The slow stream is stuck in a write until its client goes.
	slow.close()
	fx.waitServed(t)
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventRunFinished)
	fast.expectSeqs(t, i)
}

// Server Read/WriteTimeouts do not end a stream: net/http clears the read
// deadline once the handler runs, and Serve sets its own write deadline per
// write.
func TestServeOutlivesServerTimeouts(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t)
	fx.srv.Config.ReadTimeout = 20 * time.Millisecond
	fx.srv.Config.WriteTimeout = 20 * time.Millisecond
	fx.start()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	time.Sleep(100 * time.Millisecond) // past both server timeouts
	fx.tick <- time.Now()
	if f := s.next(t); !f.isComment() {
		t.Fatalf("got %+v, want a ping", f)
	}
	commitAndPublish(fx.log, fx.hub, testConv, agentd.EventMessage)
	s.expectSeqs(t, 1)
}

func TestServeWritesNothingWhenRefused(t *testing.T) {
	checkLeaks(t)
	log := newMemLog()
	log.commit(testConv, agentd.EventMessage)
	ctx := context.Background()

	rec := httptest.NewRecorder()
	err := Serve(ctx, rec, NewHub(), log, testConv, -1, Options{})
	if agentd.ErrorCode(err) != agentd.EINVALID {
		t.Errorf("negative id: %v, want EINVALID", err)
	}
	assertUntouched(t, rec)

	closed := NewHub()
	closed.Close()
	rec = httptest.NewRecorder()
	if err := Serve(ctx, rec, closed, log, testConv, 0, Options{}); !errors.Is(err, ErrHubClosed) {
		t.Errorf("closed hub: %v, want ErrHubClosed", err)
	}
	assertUntouched(t, rec)

	boom := errors.New("disk on fire")
	log.err = boom
	hub := NewHub()
	rec = httptest.NewRecorder()
	if err := Serve(ctx, rec, hub, log, testConv, 0, Options{}); !errors.Is(err, boom) {
		t.Errorf("log error: %v, want %v", err, boom)
	}
	assertUntouched(t, rec)
	if hub.Subscribers() != 0 {
		t.Error("refused stream left a subscriber")
	}
}

// waitingLog is a log whose reads wait, as for a connection of a pool that
// is all in use, until their context ends.
type waitingLog struct{ entered chan struct{} }

func (l waitingLog) Events(ctx context.Context, _ string, _ int64, _ int) ([]agentd.Event, error) {
	l.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (l waitingLog) LastSeq(ctx context.Context, _ string) (int64, error) {
	return 0, errors.New("not reached: the replay read never returns")
}

// A client that goes away while its stream waits for the log ends the
// stream cleanly: no error to report, nothing written, no subscriber left.
func TestServeClientGoneWhileWaitingForLog(t *testing.T) {
	checkLeaks(t)
	log := waitingLog{entered: make(chan struct{})}
	hub := NewHub()
	rec := httptest.NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, rec, hub, log, testConv, 0, Options{}) }()
	select {
	case <-log.entered:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("Serve did not read the log")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("Serve did not return when its context ended")
	}
	assertUntouched(t, rec)
	if hub.Subscribers() != 0 {
		t.Error("the stream left a subscriber")
	}
}

func assertUntouched(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Body.Len() != 0 || rec.Flushed || len(rec.Header()) != 0 {
		t.Errorf("response was written: body %q flushed %v header %v", rec.Body.String(), rec.Flushed, rec.Header())
	}
}

// Every write is preceded by a fresh deadline from the injected clock and
// followed by a flush.
func TestServeSetsDeadlinePerWrite(t *testing.T) {
	checkLeaks(t)
	log := newMemLog()
	log.commit(testConv, agentd.EventMessage)
	log.commit(testConv, agentd.EventMessage)
	hub := NewHub()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	clock := &steppingClock{next: t0, step: time.Minute}
	w := &recordingWriter{header: http.Header{}}
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Serve(ctx, w, hub, log, testConv, 0, Options{Tick: tick, WriteTimeout: 5 * time.Second, Clock: clock})
	}()
	tick <- t0 // Serve has replayed and entered its loop
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}

	want := []string{
		"deadline 03:00:05",
		"header 200",
		"flush",
		"deadline 03:01:05",
		`write "id: 1\nevent: message\ndata: {\"conversation_id\":\"c1\",\"seq\":1,\"type\":\"message\"}\n\nid: 2\nevent: message\ndata: {\"conversation_id\":\"c1\",\"seq\":2,\"type\":\"message\"}\n\n"`,
		"flush",
		"deadline 03:02:05",
		`write ": ping\n\n"`,
		"flush",
		"deadline 03:03:05", // for the response's final chunk
	}
	if got := w.calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// steppingClock returns next, then advances it by step, on every call.
type steppingClock struct {
	mu   sync.Mutex
	next time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.next
	c.next = c.next.Add(c.step)
	return t
}

// recordingWriter is a ResponseWriter that supports flushing and deadlines
// through http.ResponseController and records what is done to it.
type recordingWriter struct {
	mu     sync.Mutex
	header http.Header
	log    []string
}

func (w *recordingWriter) add(s string) { w.mu.Lock(); defer w.mu.Unlock(); w.log = append(w.log, s) }
func (w *recordingWriter) calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}
func (w *recordingWriter) Header() http.Header  { return w.header }
func (w *recordingWriter) WriteHeader(code int) { w.add(fmt.Sprintf("header %d", code)) }
func (w *recordingWriter) Write(p []byte) (int, error) {
	w.add(fmt.Sprintf("write %q", p))
	return len(p), nil
}
func (w *recordingWriter) FlushError() error { w.add("flush"); return nil }
func (w *recordingWriter) SetWriteDeadline(t time.Time) error {
	w.add("deadline " + t.Format(time.TimeOnly))
	return nil
}
func (w *recordingWriter) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		w.add("read deadline cleared")
	} else {
		w.add("read deadline " + t.Format(time.TimeOnly))
	}
	return nil
}

// The stream's data is the event's JSON, byte for byte after compaction.
func TestServeDataIsCompactJSON(t *testing.T) {
	checkLeaks(t)
	fx := newFixture(t).start()
	fx.log.mu.Lock()
	fx.log.events[testConv] = []agentd.Event{{ConversationID: testConv, Seq: 1, Type: "message", Data: json.RawMessage("{\n \"content\": \"two\\nlines\"\n}")}}
	fx.log.mu.Unlock()
	s := dialStream(t, fx.srv.Client(), fx.url(), nil)
	if f := s.nextEvent(t); f.Data != `{"content":"two\nlines"}` {
		t.Fatalf("data = %q", f.Data)
	}
}

// Live events queued while a write is in flight go out together, in one
// write and one flush, in order.
func TestServeDrainsQueuedEventsIntoOneWrite(t *testing.T) {
	checkLeaks(t)
	log := newMemLog()
	hub := NewHub()
	w := &gatedWriter{recordingWriter: recordingWriter{header: http.Header{}}, entered: make(chan struct{}), release: make(chan struct{})}
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Serve(ctx, w, hub, log, testConv, 0, Options{Tick: tick}) }()
	tick <- time.Now() // Serve is in its loop
	hub.Publish(log.commit(testConv, agentd.EventMessage))
	<-w.entered // the first event's write is in flight
	for range 4 {
		hub.Publish(log.commit(testConv, agentd.EventMessage))
	}
	close(w.release)
	// Serve may take a tick before the queued events (select picks either
	// of two ready cases): wait for the events themselves, not for a tick.
	deadline := time.Now().Add(10 * time.Second)
	for eventsWritten(w.calls()) < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	var writes []string
	for _, c := range w.calls() {
		if strings.HasPrefix(c, "write ") && !strings.Contains(c, "ping") {
			writes = append(writes, c)
		}
	}
	if len(writes) != 2 || strings.Count(writes[0], "id: ") != 1 || strings.Count(writes[1], "id: ") != 4 {
		t.Fatalf("writes: %q, want the first event alone then the four queued in one", writes)
	}
	for i, id := range []string{"id: 2", "id: 3", "id: 4", "id: 5"} {
		if j := strings.Index(writes[1], id); j < 0 || (i > 0 && j < strings.Index(writes[1], "id: "+strconv.Itoa(i+1))) {
			t.Fatalf("second write %q lacks %q in order", writes[1], id)
		}
	}
}

// eventsWritten counts the events (their "id: " lines) in calls' writes.
func eventsWritten(calls []string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, "write ") {
			n += strings.Count(c, "id: ")
		}
	}
	return n
}

// gatedWriter is a recordingWriter whose first write blocks until release
// is closed, saying so on entered.
type gatedWriter struct {
	recordingWriter
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("id: ")) {
		w.once.Do(func() {
			close(w.entered)
			<-w.release
		})
	}
	return w.recordingWriter.Write(p)
}
