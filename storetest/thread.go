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
	key := agentd.ThreadKey{TenantID: "t1", ProjectID: "p1", KeyID: "k1", Protocol: "ag-ui", ThreadID: "thread-1"}
	bind := func(k agentd.ThreadKey, conv string) string {
		t.Helper()
		got, err := s.BindThread(ctx, agentd.ThreadBinding{ThreadKey: k, ConversationID: conv, CreatedAt: t0})
		noErr(t, err, "BindThread")
		return got
	}
	if got := bind(key, a.ID); got != a.ID {
		t.Fatalf("first BindThread = %q, want %q", got, a.ID)
	}
	// The first binding wins: the thread is never rebound.
	if got := bind(key, b.ID); got != a.ID {
		t.Errorf("second BindThread = %q, want the first binding %q", got, a.ID)
	}
	// Another tenant, project, key or protocol with the same thread id is
	// another thread.
	others := []agentd.ThreadKey{key, key, key, key}
	others[0].TenantID, others[1].ProjectID, others[2].KeyID, others[3].Protocol = "t2", "p2", "k2", "ai-sdk"
	for _, k := range others {
		if got := bind(k, b.ID); got != b.ID {
			t.Errorf("BindThread %+v = %q, want its own binding %q", k, got, b.ID)
		}
		got, err := s.ThreadConversation(ctx, k)
		noErr(t, err, "ThreadConversation")
		if got != b.ID {
			t.Errorf("ThreadConversation %+v = %q, want %q", k, got, b.ID)
		}
	}
	got, err := s.ThreadConversation(ctx, key)
	noErr(t, err, "ThreadConversation")
	if got != a.ID {
		t.Errorf("ThreadConversation = %q, want %q", got, a.ID)
	}
	// A key that has not used the name, and a key with an empty field,
	// find no thread.
	for _, k := range []agentd.ThreadKey{{TenantID: "t1", ProjectID: "p1", KeyID: "k3", Protocol: "ag-ui", ThreadID: "thread-1"},
		{TenantID: "t3", ProjectID: "p1", KeyID: "k1", Protocol: "ag-ui", ThreadID: "thread-1"},
		{TenantID: "t1", ProjectID: "p1", Protocol: "ag-ui", ThreadID: "thread-1"}} {
		_, err = s.ThreadConversation(ctx, k)
		wantCode(t, err, agentd.ENOTFOUND)
	}
}

func testBindThreadErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	c := newConversation(t, s)
	full := agentd.ThreadBinding{ThreadKey: agentd.ThreadKey{TenantID: "t", ProjectID: "p", KeyID: "k", Protocol: "ag-ui", ThreadID: "x"},
		ConversationID: c.ID, CreatedAt: t0}
	for _, blank := range []func(*agentd.ThreadBinding){
		func(b *agentd.ThreadBinding) { b.TenantID = "" },
		func(b *agentd.ThreadBinding) { b.ProjectID = "" },
		func(b *agentd.ThreadBinding) { b.KeyID = "" },
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
	_, err = s.ThreadConversation(ctx, full.ThreadKey)
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
			got[i], err = s.BindThread(ctx, agentd.ThreadBinding{ThreadKey: agentd.ThreadKey{TenantID: "t", ProjectID: "p",
				KeyID: "k", Protocol: "ai-sdk", ThreadID: "race"}, ConversationID: convs[i].ID, CreatedAt: t0})
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
