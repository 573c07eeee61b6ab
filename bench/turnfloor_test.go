package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// turnFloor is BenchmarkTurn's floor: the three requests of a chat turn
// on a bare net/http server that does only what a turn must. Creating a
// conversation takes an id; the stream waits for its conversation's
// events; posting a message writes the whole turn — the conversation, the
// run (finished), the user's message and the one-word reply, the four
// events of the stream (run_started, text_delta, message, run_finished) —
// in one hand-written SQLite transaction (four statements, one fsync,
// SQLite as sqlite.Open sets it), then hands the events to the stream,
// which writes them as SSE frames.
type turnFloor struct {
	db   *sql.DB
	base string

	mu      sync.Mutex
	next    int
	streams map[string]chan []floorEvent
}

// floorEvent is one event of a floor turn.
type floorEvent struct {
	seq  int
	typ  string
	data []byte
}

// floorTurnStatements is what a floor turn runs: the conversation, the
// run, the two messages, the four events.
const floorTurnStatements = 4

func startTurnFloor(b *testing.B, path string) *turnFloor {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.ToSlash(path)}).EscapedPath()+
		"?_pragma=synchronous(FULL)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE conversations (id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) STRICT`,
		`CREATE TABLE runs (id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversations, status TEXT NOT NULL) STRICT`,
		`CREATE TABLE messages (id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversations, role TEXT NOT NULL,
			content TEXT NOT NULL) STRICT`,
		`CREATE TABLE events (position INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL REFERENCES conversations, seq INTEGER NOT NULL,
			type TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (conversation_id, seq)) STRICT`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	f := &turnFloor{db: db, streams: map[string]chan []floorEvent{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/conversations", f.create)
	mux.HandleFunc("GET /v1/conversations/{id}/events", f.stream)
	mux.HandleFunc("POST /v1/conversations/{id}/messages", f.send)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	f.base = "http://" + ln.Addr().String()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		db.Close()
	})
	return f
}

func (f *turnFloor) create(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	f.next++
	id := "conv_" + strconv.Itoa(f.next)
	f.streams[id] = make(chan []floorEvent, 1)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%q}`, id)
}

func (f *turnFloor) stream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ch := f.streams[r.PathValue("id")]
	f.mu.Unlock()
	if ch == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	select {
	case evs := <-ch:
		for _, e := range evs {
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.seq, e.typ, e.data)
		}
		_ = rc.Flush()
	case <-r.Context().Done():
	}
}

func (f *turnFloor) send(w http.ResponseWriter, r *http.Request) {
	conv := r.PathValue("id")
	var in struct {
		Content string `json:"content"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Content == "" {
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	ch := f.streams[conv]
	delete(f.streams, conv)
	f.mu.Unlock()
	if ch == nil {
		http.NotFound(w, r)
		return
	}
	evs, err := f.write(r.Context(), conv, in.Content)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ch <- evs
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"run_id":%q}`, "run_"+conv)
}

// write commits the whole turn of conv in one transaction.
func (f *turnFloor) write(ctx context.Context, conv, content string) ([]floorEvent, error) {
	run, user, reply := "run_"+conv, "msg_u_"+conv, "msg_a_"+conv
	evs := []floorEvent{
		{1, "run_started", []byte(`{"run_id":"` + run + `"}`)},
		{2, "text_delta", []byte(`{"run_id":"` + run + `","message_id":"` + reply + `","delta":"hello"}`)},
		{3, "message", []byte(`{"run_id":"` + run + `","id":"` + reply + `","role":"assistant","content":"hello"}`)},
		{4, "run_finished", []byte(`{"run_id":"` + run + `","status":"completed","reason":"model_stop"}`)},
	}
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	stmts := []struct {
		q    string
		args []any
	}{
		{`INSERT INTO conversations (id, last_seq) VALUES (?, 4)`, []any{conv}},
		{`INSERT INTO runs (id, conversation_id, status) VALUES (?, ?, 'completed')`, []any{run, conv}},
		{`INSERT INTO messages (id, conversation_id, role, content) VALUES (?, ?, 'user', ?), (?, ?, 'assistant', 'hello')`,
			[]any{user, conv, content, reply, conv}},
		{`INSERT INTO events (conversation_id, seq, type, data) VALUES (?, 1, ?, ?), (?, 2, ?, ?), (?, 3, ?, ?), (?, 4, ?, ?)`,
			[]any{conv, evs[0].typ, string(evs[0].data), conv, evs[1].typ, string(evs[1].data),
				conv, evs[2].typ, string(evs[2].data), conv, evs[3].typ, string(evs[3].data)}},
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
			return nil, err
		}
	}
	return evs, tx.Commit()
}

// turn is instance.turn's three requests against the floor.
func (f *turnFloor) turn(tb testing.TB, c *http.Client) {
	tb.Helper()
	status, body := post(tb, c, f.base+"/v1/conversations", `{}`)
	var conv struct {
		ID string `json:"id"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &conv) != nil {
		tb.Fatalf("floor: create: %d %s", status, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/v1/conversations/"+conv.ID+"/events", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("floor: stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	if status, body := post(tb, c, f.base+"/v1/conversations/"+conv.ID+"/messages", `{"content":"hi"}`); status != http.StatusAccepted {
		tb.Fatalf("floor: send: %d %s", status, body)
	}
	r := newSSEReader(resp.Body)
	for {
		_, typ, _, err := r.next()
		if err != nil {
			tb.Fatalf("floor: stream: %v", err)
		}
		if typ == "run_finished" {
			return
		}
	}
}

// processCPU returns the user + system CPU time this process has used.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
