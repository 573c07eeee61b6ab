package storetest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// testLinkSecret: the first candidate is stored and every later caller
// gets it, not its own; a short candidate is EINVALID.
func testLinkSecret(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	first, second := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	got, err := s.LinkSecret(ctx, first)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("first LinkSecret = %x, %v; want the candidate", got, err)
	}
	if got, err = s.LinkSecret(ctx, second); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("second LinkSecret = %x, %v; want the first secret", got, err)
	}
	if _, err := s.LinkSecret(ctx, []byte("short")); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("short candidate: %v, want EINVALID", err)
	}
}

// testSpendLink: a link is spent once, also under concurrent spenders;
// LinkSpent says so; an empty id is EINVALID.
func testSpendLink(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	if spent, err := s.LinkSpent(ctx, "n1"); err != nil || spent {
		t.Fatalf("LinkSpent before use = %v, %v", spent, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 4 {
		wg.Go(func() {
			ok, err := s.SpendLink(ctx, "n1", "call_1", time.Now())
			if err != nil {
				t.Errorf("SpendLink: %v", err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent spends won, want 1", wins)
	}
	if spent, err := s.LinkSpent(ctx, "n1"); err != nil || !spent {
		t.Fatalf("LinkSpent after use = %v, %v", spent, err)
	}
	if spent, _ := s.LinkSpent(ctx, "n2"); spent {
		t.Fatal("another link is spent")
	}
	if _, err := s.SpendLink(ctx, "", "call_1", time.Now()); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("empty id: %v, want EINVALID", err)
	}
}
