package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// testLeaseRun: a free lease is taken, renewed by its owner, refused to
// another owner while live and taken by it once expired; a released lease
// is free again; a finished run and an unknown one give no lease; bad
// input is EINVALID.
func testLeaseRun(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	lease := func(owner string, now, until time.Duration) bool {
		t.Helper()
		ok, err := s.LeaseRun(ctx, run.ID, owner, at(now), at(until))
		noErr(t, err, "LeaseRun")
		return ok
	}
	if !lease("a", 0, 15*time.Second) {
		t.Fatal("a free lease was refused")
	}
	if !lease("a", 5*time.Second, 20*time.Second) {
		t.Fatal("its owner could not renew it")
	}
	if lease("b", 19*time.Second, 34*time.Second) {
		t.Fatal("another owner took a live lease")
	}
	if !lease("b", 20*time.Second, 35*time.Second) {
		t.Fatal("another owner could not take an expired lease")
	}
	if lease("a", 21*time.Second, 36*time.Second) {
		t.Fatal("the old owner took it back while b's was live")
	}
	noErr(t, s.ReleaseRun(ctx, run.ID, "a"), "ReleaseRun of a lease a does not hold")
	if lease("a", 22*time.Second, 37*time.Second) {
		t.Fatal("a's release freed b's lease")
	}
	noErr(t, s.ReleaseRun(ctx, run.ID, "b"), "ReleaseRun")
	if !lease("a", 23*time.Second, 38*time.Second) {
		t.Fatal("a released lease was not free")
	}

	_, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunCompleted, Now: at(time.Minute)}, nil)
	noErr(t, err, "UpdateRun")
	if lease("a", time.Minute, 2*time.Minute) {
		t.Fatal("a finished run was leased")
	}
	if ok, err := s.LeaseRun(ctx, "run_missing", "a", at(0), at(time.Second)); ok || err != nil {
		t.Fatalf("LeaseRun of an unknown run = %v, %v; want false, nil", ok, err)
	}
	_, err = s.LeaseRun(ctx, run.ID, "", at(0), at(time.Second))
	wantCode(t, err, agentd.EINVALID)
	_, err = s.LeaseRun(ctx, run.ID, "a", at(time.Second), at(time.Second))
	wantCode(t, err, agentd.EINVALID)
	wantCode(t, s.ReleaseRun(ctx, run.ID, ""), agentd.EINVALID)
}

// testLeaseRunConcurrent: of many owners racing for one free lease,
// exactly one gets it.
func testLeaseRunConcurrent(t *testing.T, s agentd.Store) {
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	var won atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ok, err := s.LeaseRun(context.Background(), run.ID, string(rune('a'+i)), at(0), at(time.Minute))
			if err != nil {
				t.Errorf("LeaseRun: %v", err)
			} else if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d owners got the lease, want 1", n)
	}
}
