package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/pgtest"
)

// TestListenEvents: a listener on one store handle is woken once when it
// starts listening, then by each commit of events through another handle
// (another replica), not by a transaction that rolled back; after its
// connection is killed it tells onErr, connects again and wakes once more.
func TestListenEvents(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	a, b := open(t, u), open(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv := &agentd.Conversation{ID: "cv_1", TenantID: "t", ProjectID: "p", Agent: "a"}
	if err := b.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	wakes := make(chan struct{}, 16)
	errs := make(chan error, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.ListenEvents(ctx, func() { wakes <- struct{}{} }, time.Millisecond, func(err error) { errs <- err })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(30 * time.Second):
			t.Fatalf("no wake-up %s", what)
		}
	}
	wait("on listening")
	// A failed append (an unknown conversation) rolls back and notifies nobody;
	// the append after it does.
	if _, err := b.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "cv_nope", Type: "x"}}); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Fatalf("append to an unknown conversation: %v", err)
	}
	if _, err := b.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "cv_1", Type: "x"}, {ConversationID: "cv_1", Type: "y"}}); err != nil {
		t.Fatal(err)
	}
	wait("after a commit on another handle")
	// One commit of two events is one notification.
	select {
	case <-wakes:
		t.Fatal("a second wake-up for one commit (or one for the rolled-back append)")
	default:
	}

	other := pgtest.Conn(t, u)
	if _, err := other.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("onErr(nil)")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the killed connection was not reported")
	}
	wait("after reconnecting")
	if _, err := b.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "cv_1", Type: "z"}}); err != nil {
		t.Fatal(err)
	}
	wait("after a commit once reconnected")
	cancel()
	<-done
}
