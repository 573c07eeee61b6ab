package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// testClaimTick: the first claim of (tool, tick) wins and is told the
// tool's previous tick; a repeat does not; tools are independent; bad
// input is EINVALID.
func testClaimTick(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 123, time.UTC)
	claim := func(tool string, at time.Time) (time.Time, bool) {
		t.Helper()
		prev, ok, err := s.ClaimTick(ctx, tool, at)
		if err != nil {
			t.Fatalf("ClaimTick(%s, %s): %v", tool, at, err)
		}
		return prev, ok
	}
	if prev, ok := claim("report", t0); !ok || !prev.IsZero() {
		t.Fatalf("first claim: claimed %v, prev %v; want true and zero", ok, prev)
	}
	if _, ok := claim("report", t0); ok {
		t.Fatal("a second claim of the same tick was claimed")
	}
	if prev, ok := claim("other", t0); !ok || !prev.IsZero() {
		t.Fatalf("another tool's tick: claimed %v, prev %v", ok, prev)
	}
	t3 := t0.Add(3 * time.Hour)
	if prev, ok := claim("report", t3); !ok || !prev.Equal(t0) || prev.Location() != time.UTC {
		t.Fatalf("later tick: claimed %v, prev %v; want true and %v (UTC)", ok, prev, t0)
	}
	// A tick older than the latest is still claimed once (a replica whose
	// clock lags), told the latest.
	if prev, ok := claim("report", t0.Add(time.Hour)); !ok || !prev.Equal(t3) {
		t.Fatalf("older tick: claimed %v, prev %v; want true and %v", ok, prev, t3)
	}
	for _, bad := range []struct {
		tool string
		at   time.Time
	}{{"", t0}, {"report", time.Time{}}} {
		if _, _, err := s.ClaimTick(ctx, bad.tool, bad.at); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("ClaimTick(%q, %v) = %v, want EINVALID", bad.tool, bad.at, err)
		}
	}
}

// testClaimTickConcurrent: of many concurrent claims of one tick (as
// replicas make them), exactly one wins.
func testClaimTickConcurrent(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.ClaimTick(ctx, "report", at)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims of one tick won, want 1", won, n)
	}
}
