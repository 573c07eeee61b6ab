package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlstore"
)

// holdNext makes db's next commit wait at the hook until the returned
// release is called; held is closed when it does.
func holdNext(db *DB) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(int) error {
		once.Do(func() {
			close(h)
			<-r
		})
		return nil
	}
	db.group.hook.Store(&hook)
	return h, func() { close(r) }
}

// groupConv creates a conversation and starts a held commit on it, so
// that the writes started next queue for the following group.
func groupConv(t *testing.T, db *DB) (conv string, release func(), done <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a"}
	if err := db.CreateConversation(ctx, c); err != nil {
		t.Fatal(err)
	}
	held, release := holdNext(db)
	d := make(chan struct{})
	go func() {
		defer close(d)
		if _, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: c.ID, Type: "held", Data: json.RawMessage(`{}`)}}); err != nil {
			t.Errorf("held append: %v", err)
		}
	}()
	<-held
	return c.ID, release, d
}

// A caller whose context ends while it waits for a group writes nothing
// and gets the context's error; the group's other callers commit.
func TestGroupCancelledCaller(t *testing.T) {
	db := openTest(t)
	conv, release, heldDone := groupConv(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() {
		_, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: conv, Type: "cancelled", Data: json.RawMessage(`{}`)}})
		errc <- err
	}()
	cancel()
	go func() {
		_, err := db.AppendEvents(context.Background(), []agentd.EventDraft{{ConversationID: conv, Type: "kept", Data: json.RawMessage(`{}`)}})
		errc <- err
	}()
	release()
	<-heldDone
	var errs []error
	for range 2 {
		errs = append(errs, <-errc)
	}
	if !(errors.Is(errs[0], context.Canceled) && errs[1] == nil || errors.Is(errs[1], context.Canceled) && errs[0] == nil) {
		t.Fatalf("errors %v, want context.Canceled and nil", errs)
	}
	evs, err := db.Events(context.Background(), conv, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Type != "held" || evs[1].Type != "kept" || evs[1].Seq != 2 {
		t.Fatalf("events %+v, want held then kept at seq 2", evs)
	}
}

// A body that panics re-panics in its caller; the other callers of its
// group commit.
func TestGroupPanickingBody(t *testing.T) {
	db := openTest(t)
	conv, release, heldDone := groupConv(t, db)
	panicked := make(chan any, 1)
	appended := make(chan error, 1)
	go func() {
		defer func() { panicked <- recover() }()
		db.writeTx(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
			if _, err := sqlstore.AppendEventsIn(ctx, &wtx{db.w(tx), db}, []agentd.EventDraft{{ConversationID: conv, Type: "lost", Data: json.RawMessage(`{}`)}}); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	go func() {
		_, err := db.AppendEvents(context.Background(), []agentd.EventDraft{{ConversationID: conv, Type: "kept", Data: json.RawMessage(`{}`)}})
		appended <- err
	}()
	release()
	<-heldDone
	if v := <-panicked; v != "boom" {
		t.Fatalf("recovered %v, want boom", v)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(context.Background(), conv, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Type != "kept" || evs[1].Seq != 2 {
		t.Fatalf("events %+v, want held then kept at seq 2 (the panicking body's event rolled back)", evs)
	}
}

// A write after Close fails at once instead of waiting for a committer
// that is gone.
func TestWriteAfterClose(t *testing.T) {
	db := openTest(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	err := db.CreateConversation(context.Background(), &agentd.Conversation{ID: "c", TenantID: "t", ProjectID: "p", Agent: "a"})
	if !errors.Is(err, errClosed) {
		t.Fatalf("write after Close: %v, want %v", err, errClosed)
	}
}

// 255 single-event appends to 255 conversations queued behind a held
// commit (with one to a missing conversation: a group of maxGroup) are
// written by one batch — its counters advanced in chunks of 128, 64, … 1
// conversations — and each gets its conversation's next sequence number;
// the append to the missing conversation fails alone.
func TestBatchOfManyConversations(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	const n = maxGroup - 1
	convs := make([]string, n)
	for i := range convs {
		c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a"}
		if err := db.CreateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // every other one starts from seq 2
			if _, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: c.ID, Type: "first", Data: json.RawMessage(`{}`)}}); err != nil {
				t.Fatal(err)
			}
		}
		convs[i] = c.ID
	}
	_, release, heldDone := groupConv(t, db)
	var sizes []int
	var mu sync.Mutex
	hook := func(group int) error {
		mu.Lock()
		sizes = append(sizes, group)
		mu.Unlock()
		return nil
	}
	got := make([][]agentd.Event, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		conv := "conv_missing"
		if i < n {
			conv = convs[i]
		}
		wg.Go(func() {
			got[i], errs[i] = db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: conv, Type: "batched", Data: json.RawMessage(`{"i":1}`)}})
		})
	}
	waitQueued(t, db, n+1)
	db.group.hook.Store(&hook)
	release()
	<-heldDone
	wg.Wait()
	if !slices.Contains(sizes, n+1) {
		t.Fatalf("group sizes %v, want one of %d", sizes, n+1)
	}
	if agentd.ErrorCode(errs[n]) != agentd.ENOTFOUND {
		t.Fatalf("append to a missing conversation: %v, want ENOTFOUND", errs[n])
	}
	for i, conv := range convs {
		want := int64(1 + (i+1)%2)
		if errs[i] != nil || len(got[i]) != 1 || got[i][0].Seq != want {
			t.Fatalf("append %d: %+v %v, want seq %d", i, got[i], errs[i], want)
		}
		evs, err := db.Events(ctx, conv, 0, 0)
		if err != nil || len(evs) != int(want) || evs[want-1].Type != "batched" || evs[want-1].Position != got[i][0].Position {
			t.Fatalf("log of %d: %+v %v", i, evs, err)
		}
		if last, err := db.LastSeq(ctx, conv); err != nil || last != want {
			t.Fatalf("last seq of %d: %d %v, want %d", i, last, err, want)
		}
	}
}

// waitQueued waits until n bodies are queued for db's next group.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		db.group.mu.Lock()
		q := len(db.group.queue)
		db.group.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bodies queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}
