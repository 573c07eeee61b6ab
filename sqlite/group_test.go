package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
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
			if _, err := db.appendEvents(ctx, tx, []agentd.EventDraft{{ConversationID: conv, Type: "lost", Data: json.RawMessage(`{}`)}}); err != nil {
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
