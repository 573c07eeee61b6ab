package sse

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
)

// hangGuard bounds how long a test waits for something that must happen; it
// is a failure deadline, never a performance assertion.
const hangGuard = 30 * time.Second

// sqliteLog opens a real SQLite store with the given read pool bound and a
// conversation holding n events.
func sqliteLog(t *testing.T, maxOpen, maxIdle, n int) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"), sqlite.WithReadPool(maxOpen, maxIdle, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if err := db.CreateConversation(ctx, &agentd.Conversation{ID: testConv}); err != nil {
		t.Fatal(err)
	}
	data := fmt.Sprintf(`{"type":"text_delta","delta":%q}`, strings.Repeat("x", 200))
	drafts := make([]agentd.EventDraft, n)
	for i := range drafts {
		drafts[i] = agentd.EventDraft{ConversationID: testConv, Type: agentd.EventTextDelta, Data: []byte(data)}
	}
	if _, err := db.AppendEvents(ctx, drafts); err != nil {
		t.Fatal(err)
	}
	return db
}

// peakSampler records the most read connections db has open, from start
// until stop.
type peakSampler struct {
	once  sync.Once
	stopc chan struct{}
	done  chan int
	peak  int
}

func samplePeak(db *sqlite.DB) *peakSampler {
	p := &peakSampler{stopc: make(chan struct{}), done: make(chan int)}
	go func() {
		peak := 0
		for {
			peak = max(peak, db.ReadStats().OpenConnections)
			select {
			case <-p.stopc:
				p.done <- peak
				return
			default:
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	return p
}

// stop ends the sampling and returns the peak; it is idempotent.
func (p *peakSampler) stop() int {
	p.once.Do(func() { close(p.stopc); p.peak = <-p.done })
	return p.peak
}

// followOne reads one stream from the start: it reports nil on replayed
// once it has received events 1..logged in order, then nil on live once the
// next event is logged+1, or the first error on whichever comes next.
func followOne(ctx context.Context, client *http.Client, url string, logged int64, replayed, live chan<- error) {
	fail := func(err error) { replayed <- err; live <- err }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fail(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail(fmt.Errorf("status %s", resp.Status))
		return
	}
	p := newParser(resp.Body)
	for want := int64(1); want <= logged+1; want++ {
		f, err := p.readFrame()
		if err == nil && f.ID != fmt.Sprint(want) {
			err = fmt.Errorf("event id %q, want %d", f.ID, want)
		}
		if err != nil {
			if want <= logged {
				replayed <- err
			}
			live <- err
			return
		}
		if want == logged {
			replayed <- nil
		}
	}
	live <- nil
}

// await receives n results, failing t on the first error.
func await(t *testing.T, what string, n int, ch <-chan error) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: stream %d: %v", what, i, err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("%s: only %d of %d streams got there", what, i, n)
		}
	}
}

// Many more concurrent streams than the read pool's bound, on a real SQLite
// log over real HTTP: each replays the whole log, in pages, and then gets a
// live event while all of them are open. The pool never has more
// connections open than its bound, no live stream holds one, and once the
// replays are done at most the idle bound stay open.
func TestServeManyStreamsShareBoundedReadPool(t *testing.T) {
	checkLeaks(t)
	const maxOpen, maxIdle, streams, logged = 2, 1, 24, 300
	db := sqliteLog(t, maxOpen, maxIdle, logged)
	hub := NewHub()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/conversations/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		_ = Serve(r.Context(), w, hub, db, r.PathValue("id"), 0, Options{PageSize: 16})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { hub.Close(); srv.CloseClientConnections(); srv.Close() })
	client := &http.Client{Timeout: hangGuard}
	url := srv.URL + "/v1/conversations/" + testConv + "/events"

	var wg sync.WaitGroup
	defer wg.Wait() // after cancel
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	peak := samplePeak(db)
	defer peak.stop()
	replayed, live := make(chan error, streams), make(chan error, streams)
	for range streams {
		wg.Add(1)
		go func() { defer wg.Done(); followOne(ctx, client, url, logged, replayed, live) }()
	}
	await(t, "replay", streams, replayed)

	// Every stream is open and live, none holds a read connection.
	if st := db.ReadStats(); st.InUse != 0 || st.OpenConnections > maxIdle {
		t.Errorf("with %d live streams: %d read connections in use, %d open; want 0 in use, at most %d open",
			streams, st.InUse, st.OpenConnections, maxIdle)
	}
	if n := hub.Subscribers(); n != streams {
		t.Errorf("%d subscribers, want %d", n, streams)
	}
	evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: testConv, Type: agentd.EventMessage, Data: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	hub.Publish(evs[0])
	await(t, "live event", streams, live)
	if got := peak.stop(); got > maxOpen {
		t.Errorf("the read pool had %d connections open at once, want at most %d", got, maxOpen)
	}
}
