package sse

import (
	"bufio"
	"bytes"
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

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// checkLeaks fails t if goroutines started during t outlive its cleanups.
// Call it first, so that its cleanup runs last.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// memLog is a behavioural in-memory event log: a mutex and a slice per
// conversation, with hooks that let a test commit events while a stream is
// reading.
type memLog struct {
	mu     sync.Mutex
	events map[string][]agentd.Event
	reads  int
	err    error

	// beforeRead and afterRead run (without the lock) around every Events
	// call, with the number of the call, starting at 1.
	beforeRead, afterRead func(n int)
}

func newMemLog() *memLog { return &memLog{events: make(map[string][]agentd.Event)} }

// commit appends an event with the next Seq of its conversation.
func (l *memLog) commit(conv, typ string) agentd.Event {
	return l.commitData(conv, typ, nil)
}

// commitData appends an event whose data carries type, conversation_id and
// extra fields.
func (l *memLog) commitData(conv, typ string, extra map[string]any) agentd.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := int64(len(l.events[conv]) + 1)
	d := map[string]any{"type": typ, "conversation_id": conv, "seq": seq}
	for k, v := range extra {
		d[k] = v
	}
	data, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	e := agentd.Event{ConversationID: conv, Seq: seq, Type: typ, Data: data}
	l.events[conv] = append(l.events[conv], e)
	return e
}

func (l *memLog) Events(ctx context.Context, conv string, after int64, limit int) ([]agentd.Event, error) {
	l.mu.Lock()
	l.reads++
	n := l.reads
	before, afterHook, err := l.beforeRead, l.afterRead, l.err
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if before != nil {
		before(n)
	}
	l.mu.Lock()
	var out []agentd.Event
	for _, e := range l.events[conv] {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	l.mu.Unlock()
	if afterHook != nil {
		afterHook(n)
	}
	return out, nil
}

// LastSeq returns the Seq of conv's newest event, 0 when it has none.
func (l *memLog) LastSeq(ctx context.Context, conv string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return int64(len(l.events[conv])), nil
}

// commitAndPublish does what the server does: commit, then announce.
func commitAndPublish(l *memLog, h *Hub, conv, typ string) agentd.Event {
	e := l.commit(conv, typ)
	h.Publish(e)
	return e
}

// frame is one parsed SSE block.
type frame struct {
	ID, Event, Data string
	HasID, HasData  bool
	Comments        []string
}

func (f frame) isComment() bool {
	return !f.HasID && !f.HasData && f.Event == "" && len(f.Comments) > 0
}

// parser reads an event stream as the WHATWG EventSource parser does:
// lines end at \r\n, \r or \n; a line starting with ':' is a comment; one
// space after the colon is dropped; data lines are joined with \n.
type parser struct {
	r       *bufio.Reader
	pending []string // lines split off a chunk by a lone \r
}

func newParser(r io.Reader) *parser { return &parser{r: bufio.NewReaderSize(r, 64<<10)} }

// readFrame returns the next non-empty block.
func (p *parser) readFrame() (frame, error) {
	var f frame
	var data bytes.Buffer
	seen := false
	for {
		line, err := p.readLine()
		if err != nil {
			if err == io.EOF && seen {
				return f, io.ErrUnexpectedEOF
			}
			return f, err
		}
		if line == "" {
			if !seen {
				continue
			}
			if f.HasData {
				f.Data = strings.TrimSuffix(data.String(), "\n")
			}
			return f, nil
		}
		seen = true
		if line[0] == ':' {
			f.Comments = append(f.Comments, strings.TrimPrefix(line[1:], " "))
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			f.ID, f.HasID = value, true
		case "event":
			f.Event = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			f.HasData = true
		}
	}
}

func (p *parser) readLine() (string, error) {
	if len(p.pending) > 0 {
		line := p.pending[0]
		p.pending = p.pending[1:]
		return line, nil
	}
	chunk, err := p.r.ReadString('\n')
	if err != nil {
		if err == io.EOF && chunk != "" {
			// An unterminated last line is not a line; a stream that
			// ends in a lone \r is still read up to it.
			if i := strings.LastIndexByte(chunk, '\r'); i >= 0 {
				p.pending = splitCR(chunk[:i])
				return p.readLine()
			}
			return "", io.ErrUnexpectedEOF
		}
		return "", err
	}
	chunk = strings.TrimSuffix(strings.TrimSuffix(chunk, "\n"), "\r")
	p.pending = splitCR(chunk)
	return p.readLine()
}

// splitCR splits s at lone \r line ends.
func splitCR(s string) []string { return strings.Split(s, "\r") }

// parseAll parses a whole stream.
func parseAll(b []byte) ([]frame, error) {
	p := newParser(bytes.NewReader(b))
	var out []frame
	for {
		f, err := p.readFrame()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

// fixture is a real HTTP server whose stream handler calls Serve.
type fixture struct {
	hubMu  sync.Mutex
	hub    *Hub // swapped only by swapHub
	log    *memLog
	srv    *httptest.Server
	served chan error // one value per finished Serve call
	tick   chan time.Time
	opt    Options
	// auth, when set, is the Authorization header the handler demands.
	auth string
}

const testConv = "c1"

func newFixture(t *testing.T, hubOpts ...HubOption) *fixture {
	t.Helper()
	fx := &fixture{
		hub:    NewHub(hubOpts...),
		log:    newMemLog(),
		served: make(chan error, 100),
		tick:   make(chan time.Time),
	}
	fx.opt = Options{Tick: fx.tick}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/conversations/{id}/events", fx.handle)
	fx.srv = httptest.NewUnstartedServer(mux)
	fx.srv.Config.RegisterOnShutdown(func() { fx.currentHub().Close() })
	t.Cleanup(func() {
		fx.currentHub().Close()
		fx.srv.CloseClientConnections()
		fx.srv.Close()
	})
	return fx
}

func (fx *fixture) start() *fixture { fx.srv.Start(); return fx }

func (fx *fixture) handle(w http.ResponseWriter, r *http.Request) {
	if fx.auth != "" && r.Header.Get("Authorization") != fx.auth {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad api key"}}`)
		return
	}
	last, err := ParseLastEventID(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	err = Serve(r.Context(), w, fx.currentHub(), fx.log, r.PathValue("id"), last, fx.opt)
	if err != nil && w.Header().Get("Content-Type") == "" {
		// Refused before the stream started: answer as the API does.
		writeError(w, err)
	}
	fx.served <- err
}

// writeError answers err in the API's error shape, with the status of its
// code.
func writeError(w http.ResponseWriter, err error) {
	status := map[string]int{agentd.EINVALID: http.StatusBadRequest, agentd.EUNAVAILABLE: http.StatusServiceUnavailable}[agentd.ErrorCode(err)]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": agentd.ErrorCode(err), "message": agentd.ErrorMessage(err)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func (fx *fixture) currentHub() *Hub {
	fx.hubMu.Lock()
	defer fx.hubMu.Unlock()
	return fx.hub
}

// swapHub makes new streams use h and returns the previous hub.
func (fx *fixture) swapHub(h *Hub) *Hub {
	fx.hubMu.Lock()
	defer fx.hubMu.Unlock()
	old := fx.hub
	fx.hub = h
	return old
}

func (fx *fixture) url() string { return fx.srv.URL + "/v1/conversations/" + testConv + "/events" }

// waitServed returns the result of the next Serve call to finish.
func (fx *fixture) waitServed(t *testing.T) error {
	t.Helper()
	select {
	case err := <-fx.served:
		return err
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("Serve did not return")
		return nil
	}
}

// sseConn is a raw client of one SSE response.
type sseConn struct {
	resp   *http.Response
	p      *parser
	cancel context.CancelFunc
}

func dialStream(t *testing.T, client *http.Client, url string, header http.Header) *sseConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sseConn{resp: resp, p: newParser(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *sseConn) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next frame, events and comments alike.
func (s *sseConn) next(t *testing.T) frame {
	t.Helper()
	f, err := s.p.readFrame()
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	return f
}

// nextEvent returns the next frame that is not a comment.
func (s *sseConn) nextEvent(t *testing.T) frame {
	t.Helper()
	for {
		if f := s.next(t); !f.isComment() {
			return f
		}
	}
}

// expectSeqs reads events and checks they are exactly seqs, in order.
func (s *sseConn) expectSeqs(t *testing.T, seqs ...int64) {
	t.Helper()
	for _, want := range seqs {
		f := s.nextEvent(t)
		if f.ID != fmt.Sprint(want) {
			t.Fatalf("got event id %q, want %d", f.ID, want)
		}
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

var errStop = errors.New("stop")
