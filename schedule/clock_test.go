package schedule_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/schedule"
)

// fakeClock is the scheduler's clock (Options.Now and Options.After) in
// tests: it moves only when Set, and each wait armed on it is announced
// on armed with the time it waits for.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	armed   chan time.Time
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, armed: make(chan time.Time, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := waiter{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.waiters = append(c.waiters, w)
	c.armed <- w.at
	c.fireLocked()
	return w.ch
}

// Set moves the clock to now and ends the waits due by then.
func (c *fakeClock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	c.fireLocked()
}

func (c *fakeClock) fireLocked() {
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			keep = append(keep, w)
		} else {
			w.ch <- c.now
		}
	}
	c.waiters = keep
}

// gatedRuns is a RunFunc that announces each tick it runs on ran and
// returns when the test sends on release.
type gatedRuns struct {
	ran     chan time.Time
	release chan struct{}
}

func (g *gatedRuns) run(ctx context.Context, r schedule.Run) schedule.Outcome {
	g.ran <- r.At
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return schedule.Outcome{ToolCallID: "call_1", Status: agentd.StatusCompleted}
}

// startClocked starts a scheduler of an "@every 1m" job on a fake clock at
// start; it returns the clock, the runs and the store.
func startClocked(t *testing.T, start time.Time) (*fakeClock, *gatedRuns, *schedule.Scheduler, schedule.TickStore) {
	t.Helper()
	db := openStore(t, filepath.Join(t.TempDir(), "agentd.db"))
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1m"), TenantID: "t1", ProjectID: "p1"}
	clock := newFakeClock(start)
	g := &gatedRuns{ran: make(chan time.Time, 16), release: make(chan struct{})}
	s := schedule.New(db, []schedule.Job{job}, g.run, schedule.Options{Now: clock.Now, After: clock.After})
	s.Start(context.Background())
	t.Cleanup(s.Close)
	return clock, g, s, db
}

// waitArmed waits for the scheduler's next wait and checks it is for
// want; a tick run instead fails the test.
func waitArmed(t *testing.T, c *fakeClock, g *gatedRuns, want time.Time) {
	t.Helper()
	select {
	case at := <-c.armed:
		if !at.Equal(want) {
			t.Fatalf("the scheduler waits for %v, want %v", at, want)
		}
	case at := <-g.ran:
		t.Fatalf("tick %v ran; want a wait for %v", at, want)
	case <-time.After(30 * time.Second): // a failure deadline, not a measure
		t.Fatalf("no wait for %v", want)
	}
}

// waitRan waits for the run of tick want.
func waitRan(t *testing.T, g *gatedRuns, want time.Time) {
	t.Helper()
	select {
	case at := <-g.ran:
		if !at.Equal(want) {
			t.Fatalf("tick %v ran, want %v", at, want)
		}
	case <-time.After(30 * time.Second): // a failure deadline, not a measure
		t.Fatalf("tick %v did not run", want)
	}
}

// checkMissed checks the one schedule_missed audit entry.
func checkMissed(t *testing.T, db schedule.TickStore, want string) {
	t.Helper()
	entries, err := db.(interface {
		Audit(context.Context, agentd.AuditFilter) ([]agentd.AuditEntry, error)
	}).Audit(context.Background(), agentd.AuditFilter{TenantID: "t1", ProjectID: "p1", Kind: agentd.AuditScheduleMissed})
	if err != nil || len(entries) != 1 || entries[0].Reason != want {
		t.Fatalf("missed-tick entries = %+v, %v; want one with reason %q", entries, err, want)
	}
}

// A run that outlasts several ticks is followed by the first tick after
// it ended, computed from the clock then: the ticks that passed during it
// are reported as missed once and never run, in a burst or at all.
func TestSlowRunSkipsThePassedTicks(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 30, 0, time.UTC)
	clock, g, s, db := startClocked(t, t0)
	waitArmed(t, clock, g, t0.Add(30*time.Second))
	clock.Set(t0.Add(30 * time.Second))
	waitRan(t, g, t0.Add(30*time.Second)) // 10:01
	clock.Set(t0.Add(11 * time.Minute))   // the run lasts until 10:11:30
	g.release <- struct{}{}
	waitArmed(t, clock, g, t0.Add(11*time.Minute+30*time.Second)) // 10:12, not 10:02
	clock.Set(t0.Add(11*time.Minute + 30*time.Second))
	waitRan(t, g, t0.Add(11*time.Minute+30*time.Second))
	g.release <- struct{}{}
	waitArmed(t, clock, g, t0.Add(12*time.Minute+30*time.Second))
	s.Close()
	checkMissed(t, db, "10 ticks missed between 2026-12-02T10:01:00Z and 2026-12-02T10:12:00Z: not run")
}

// A pause while the scheduler waits (the process stopped, the machine
// slept) runs the tick it waited for once, late, and then the first tick
// after the clock: the ticks that passed during the pause are reported as
// missed, never run in a burst.
func TestPauseSkipsThePassedTicks(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 30, 0, time.UTC)
	clock, g, s, db := startClocked(t, t0)
	waitArmed(t, clock, g, t0.Add(30*time.Second))
	clock.Set(t0.Add(30 * time.Minute)) // 10:30:30: a half-hour pause
	waitRan(t, g, t0.Add(30*time.Second))
	g.release <- struct{}{}
	waitArmed(t, clock, g, t0.Add(30*time.Minute+30*time.Second)) // 10:31
	clock.Set(t0.Add(30*time.Minute + 30*time.Second))
	waitRan(t, g, t0.Add(30*time.Minute+30*time.Second))
	g.release <- struct{}{}
	waitArmed(t, clock, g, t0.Add(31*time.Minute+30*time.Second))
	s.Close()
	checkMissed(t, db, "29 ticks missed between 2026-12-02T10:01:00Z and 2026-12-02T10:31:00Z: not run")
}
