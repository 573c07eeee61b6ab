package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
)

func testBindThread(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	a, b := newConversation(t, s), newConversation(t, s)
	bind := func(tenant, project, protocol, thread, conv string) string {
		t.Helper()
		got, err := s.BindThread(ctx, agentd.ThreadBinding{TenantID: tenant, ProjectID: project, Protocol: protocol,
			ThreadID: thread, ConversationID: conv, CreatedAt: t0})
		noErr(t, err, "BindThread")
		return got
	}
	if got := bind("t1", "p1", "ag-ui", "thread-1", a.ID); got != a.ID {
		t.Fatalf("first BindThread = %q, want %q", got, a.ID)
	}
	// The first binding wins: the thread is never rebound.
	if got := bind("t1", "p1", "ag-ui", "thread-1", b.ID); got != a.ID {
		t.Errorf("second BindThread = %q, want the first binding %q", got, a.ID)
	}
	// Another tenant, project or protocol with the same thread id is another thread.
	for _, k := range [][3]string{{"t2", "p1", "ag-ui"}, {"t1", "p2", "ag-ui"}, {"t1", "p1", "ai-sdk"}} {
		if got := bind(k[0], k[1], k[2], "thread-1", b.ID); got != b.ID {
			t.Errorf("BindThread %v = %q, want its own binding %q", k, got, b.ID)
		}
	}
	got, err := s.ThreadConversation(ctx, "t1", "p1", "ag-ui", "thread-1")
	noErr(t, err, "ThreadConversation")
	if got != a.ID {
		t.Errorf("ThreadConversation = %q, want %q", got, a.ID)
	}
	got, err = s.ThreadConversation(ctx, "t2", "p1", "ag-ui", "thread-1")
	noErr(t, err, "ThreadConversation t2")
	if got != b.ID {
		t.Errorf("ThreadConversation t2 = %q, want %q", got, b.ID)
	}
	_, err = s.ThreadConversation(ctx, "t3", "p1", "ag-ui", "thread-1")
	wantCode(t, err, agentd.ENOTFOUND)
}

func testBindThreadErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	c := newConversation(t, s)
	full := agentd.ThreadBinding{TenantID: "t", ProjectID: "p", Protocol: "ag-ui", ThreadID: "x", ConversationID: c.ID, CreatedAt: t0}
	for _, blank := range []func(*agentd.ThreadBinding){
		func(b *agentd.ThreadBinding) { b.TenantID = "" },
		func(b *agentd.ThreadBinding) { b.ProjectID = "" },
		func(b *agentd.ThreadBinding) { b.Protocol = "" },
		func(b *agentd.ThreadBinding) { b.ThreadID = "" },
		func(b *agentd.ThreadBinding) { b.ConversationID = "" },
	} {
		b := full
		blank(&b)
		_, err := s.BindThread(ctx, b)
		wantCode(t, err, agentd.EINVALID)
	}
	ghost := full
	ghost.ConversationID = "conv_missing"
	_, err := s.BindThread(ctx, ghost)
	wantCode(t, err, agentd.ENOTFOUND)
	// The failed binding left nothing behind.
	_, err = s.ThreadConversation(ctx, "t", "p", "ag-ui", "x")
	wantCode(t, err, agentd.ENOTFOUND)
}

// testBindThreadConcurrent: of concurrent first bindings one wins, and all
// callers get it.
func testBindThreadConcurrent(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	const n = 8
	convs := make([]*agentd.Conversation, n)
	for i := range convs {
		convs[i] = newConversation(t, s)
	}
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			got[i], err = s.BindThread(ctx, agentd.ThreadBinding{TenantID: "t", ProjectID: "p", Protocol: "ai-sdk",
				ThreadID: "race", ConversationID: convs[i].ID, CreatedAt: t0})
			if err != nil {
				t.Errorf("BindThread %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] || got[i] == "" {
			t.Fatalf("concurrent BindThread answered %q, want one conversation for all", got)
		}
	}
}
