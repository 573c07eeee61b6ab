package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// hangGuard bounds how long a test waits for something that must happen; it
// is a failure deadline, never a performance assertion.
const hangGuard = 30 * time.Second

// waitUntil polls cond until it holds, failing t after hangGuard.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holders starts n reads that each hold a read transaction until release
// is closed. inside reports how many hold one now; peakOpen the most open
// read connections any of them saw; wait waits for all n and returns their
// errors.
type holders struct {
	mu       sync.Mutex
	inside   int
	peakOpen int
	release  chan struct{}
	errs     chan error
}

func holdReads(ctx context.Context, db *DB, n int) *holders {
	h := &holders{release: make(chan struct{}), errs: make(chan error, n)}
	for range n {
		go func() {
			h.errs <- db.readTx(ctx, func(tx *sql.Tx) error {
				h.mu.Lock()
				h.inside++
				h.peakOpen = max(h.peakOpen, db.ReadStats().OpenConnections)
				h.mu.Unlock()
				<-h.release
				var one int
				return tx.QueryRowContext(ctx, "SELECT 1").Scan(&one)
			})
		}()
	}
	return h
}

func (h *holders) counts() (inside, peakOpen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inside, h.peakOpen
}

func (h *holders) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := <-h.errs; err != nil {
			t.Errorf("a read failed: %v", err)
		}
	}
}

// More concurrent reads than the pool's bound never open more connections
// than the bound: the reads beyond it wait, and all of them finish once
// connections come free. Released connections beyond the idle bound are
// closed.
func TestReadPoolIsBounded(t *testing.T) {
	const maxOpen, maxIdle, readers = 3, 1, 12
	db, err := Open(filepath.Join(t.TempDir(), "agentd.db"), WithReadPool(maxOpen, maxIdle, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	h := holdReads(ctx, db, readers)
	// Every reader either holds a transaction or waits for a connection.
	waitUntil(t, "every reader to hold a connection or wait for one", func() bool {
		inside, _ := h.counts()
		return inside+int(db.ReadStats().WaitCount) >= readers
	})
	inside, _ := h.counts()
	if inside > maxOpen {
		t.Errorf("%d reads hold a connection at once, want at most %d", inside, maxOpen)
	}
	if open := db.ReadStats().OpenConnections; open > maxOpen {
		t.Errorf("%d read connections open, want at most %d", open, maxOpen)
	}
	close(h.release)
	h.wait(t, readers)
	if _, peak := h.counts(); peak > maxOpen {
		t.Errorf("a read saw %d open read connections, want at most %d", peak, maxOpen)
	}
	st := db.ReadStats()
	if st.InUse != 0 || st.OpenConnections > maxIdle || st.Idle > maxIdle {
		t.Errorf("after the reads: %d in use, %d open, %d idle; want 0 in use and at most %d open", st.InUse, st.OpenConnections, st.Idle, maxIdle)
	}
}

// A read that finds every connection in use waits for one until its context
// ends, and then fails with the context's error; once connections come free,
// the store answers again.
func TestReadWaitEndsWithContext(t *testing.T) {
	const maxOpen = 2
	db, err := Open(filepath.Join(t.TempDir(), "agentd.db"), WithReadPool(maxOpen, maxOpen, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	guard, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.CreateConversation(guard, &agentd.Conversation{ID: "c1"}))

	h := holdReads(guard, db, maxOpen)
	waitUntil(t, "the pool to be taken", func() bool { inside, _ := h.counts(); return inside == maxOpen })
	waitsBefore := db.ReadStats().WaitCount

	ctx, stop := context.WithCancel(guard)
	got := make(chan error, 1)
	go func() {
		_, err := db.Events(ctx, "c1", 0, 10)
		got <- err
	}()
	waitUntil(t, "the read to wait for a connection", func() bool {
		select {
		case err := <-got:
			got <- err // finished without waiting: checked below
			return true
		default:
			return db.ReadStats().WaitCount > waitsBefore
		}
	})
	stop()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("read while the pool was taken = %v, want context.Canceled", err)
	}

	close(h.release)
	h.wait(t, maxOpen)
	must(db.Ping(guard))
	if _, err := db.Events(guard, "c1", 0, 10); err != nil {
		t.Fatalf("read after the pool came free: %v", err)
	}
}

// Open bounds the read pool by default; WithReadPool changes the bound and
// keeps the default for a value <= 0.
func TestReadPoolDefaults(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, DefaultMaxReadConns},
		{"configured", []Option{WithReadPool(3, 1, time.Second)}, 3},
		{"zero keeps default", []Option{WithReadPool(0, 0, 0)}, DefaultMaxReadConns},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "agentd.db"), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := db.ReadStats().MaxOpenConnections; got != tt.want {
				t.Errorf("read pool bound = %d, want %d", got, tt.want)
			}
		})
	}
}
