package schedule_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/schedule"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/rs/zerolog"
)

// A bad expression gets an error that says what is wrong, and a good one
// keeps its text (trimmed).
func TestParse(t *testing.T) {
	for _, tt := range []struct{ expr, err string }{
		{"", "empty schedule"},
		{"   ", "empty schedule"},
		{"TZ=Europe/Paris 0 9 * * *", "time zones are not supported"},
		{"CRON_TZ=UTC 0 9 * * *", "time zones are not supported"},
		{"@every soon", `schedule "@every soon"`},
		{"@every 999ms", "whole seconds, at least 1s"},
		{"@every 1500ms", "whole seconds, at least 1s"},
		{"@every 0s", "whole seconds, at least 1s"},
		{"@every -5s", "whole seconds, at least 1s"},
		{"* * *", `schedule "* * *"`},
		{"0 0 * * * *", `schedule "0 0 * * * *"`}, // six fields: seconds are not accepted
	} {
		if s, err := schedule.Parse(tt.expr); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", tt.expr, s, err, tt.err)
		}
	}
	for expr, want := range map[string]string{"@every 1s": "@every 1s", "  @every 2m ": "@every 2m", "@hourly": "@hourly", " 0 9 * * 1 ": "0 9 * * 1"} {
		s, err := schedule.Parse(expr)
		if err != nil || s.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %q", expr, s, err, want)
		}
	}
}

// @every ticks before the epoch are multiples of the period too.
func TestNextBeforeEpoch(t *testing.T) {
	s := mustParse(t, "@every 1s")
	for _, tt := range []struct{ at, want time.Time }{
		{time.Unix(-1, -500), time.Unix(-1, 0)},
		{time.Unix(-2, 0), time.Unix(-1, 0)},
		{time.Unix(-1, 0), time.Unix(0, 0)},
		{time.Unix(0, -1), time.Unix(0, 0)},
		{time.Unix(0, 0), time.Unix(1, 0)},
	} {
		if got := s.Next(tt.at); !got.Equal(tt.want) {
			t.Errorf("Next(%v) = %v, want %v", tt.at.UTC(), got, tt.want.UTC())
		}
	}
}

// Missed counts up to its limit exactly.
func TestMissedLimit(t *testing.T) {
	s := mustParse(t, "@every 1s")
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ before, limit, want int }{{4, 3, 3}, {4, 2, 2}, {5, 3, 3}, {3, 3, 2}} {
		if got := s.Missed(t0, t0.Add(time.Duration(tt.before)*time.Second), tt.limit); got != tt.want {
			t.Errorf("Missed(%ds, limit %d) = %d, want %d", tt.before, tt.limit, got, tt.want)
		}
	}
}

// failing is a store whose operations fail when told to; only Fire,
// called by the test's goroutine, uses it.
type failing struct {
	*sqlite.DB
	claim, create, append_, audit error
}

func (f *failing) ClaimTick(ctx context.Context, tool string, at time.Time) (time.Time, bool, error) {
	if err := f.claim; err != nil {
		return time.Time{}, false, err
	}
	return f.DB.ClaimTick(ctx, tool, at)
}

func (f *failing) CreateConversation(ctx context.Context, c *agentd.Conversation) error {
	if err := f.create; err != nil {
		return err
	}
	return f.DB.CreateConversation(ctx, c)
}

func (f *failing) AppendEvents(ctx context.Context, d []agentd.EventDraft) ([]agentd.Event, error) {
	if err := f.append_; err != nil {
		return nil, err
	}
	return f.DB.AppendEvents(ctx, d)
}

func (f *failing) AppendAudit(ctx context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error) {
	if err := f.audit; err != nil {
		return agentd.AuditEntry{}, err
	}
	return f.DB.AppendAudit(ctx, e)
}

// counted is a RunFunc that counts its runs and refuses each.
type counted struct {
	mu sync.Mutex
	n  int
}

func (c *counted) run(context.Context, schedule.Run) schedule.Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return schedule.Outcome{ToolCallID: "call_1"}
}

func (c *counted) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

var errDown = errors.New("store down")

// A tick whose claim fails, or whose conversation cannot be created, is
// not run; one whose events cannot be recorded still runs.
func TestFireStoreFailures(t *testing.T) {
	f := &failing{DB: openStore(t, filepath.Join(t.TempDir(), "agentd.db"))}
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	var runs counted
	var published int
	var log syncBuffer
	s := schedule.New(f, []schedule.Job{job}, runs.run, schedule.Options{Publish: func(agentd.Event) { published++ }, Logger: zerolog.New(&log)})
	ctx := context.Background()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

	f.claim = errDown
	if s.Fire(ctx, job, t0) || runs.count() != 0 {
		t.Fatalf("a tick whose claim failed ran (%d runs)", runs.count())
	}
	f.claim, f.create = nil, errDown
	if s.Fire(ctx, job, t0.Add(time.Second)) || runs.count() != 0 {
		t.Fatalf("a tick whose conversation was not created ran (%d runs)", runs.count())
	}
	f.create, f.append_ = nil, errDown
	if !s.Fire(ctx, job, t0.Add(2*time.Second)) || runs.count() != 1 || published != 0 {
		t.Fatalf("a tick whose events could not be recorded: %d runs, %d published; want it run, nothing published", runs.count(), published)
	}
	f.append_ = nil
	if s.Fire(ctx, job, t0.Add(2*time.Second)) || runs.count() != 1 {
		t.Fatalf("a tick claimed twice ran again (%d runs)", runs.count())
	}
	// The audit of missed ticks failing does not stop the run.
	f.audit = errDown
	if !s.Fire(ctx, job, t0.Add(10*time.Second)) || runs.count() != 2 || published != 1 {
		t.Fatalf("after a failed missed-tick audit: %d runs, %d published; want the run", runs.count(), published)
	}
	if !strings.Contains(log.String(), "missed ticks not recorded in the audit log") {
		t.Errorf("a failed missed-tick audit was not logged: %s", log.String())
	}
}

// A run refused with no tier and no reason (the tool was not found) is a
// tool_call_refused of tier never with reason "refused"; the conversation
// carries the scheduler's clock.
func TestFireRefusedDefaults(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "agentd.db"))
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	now := time.Date(2026, 12, 2, 10, 0, 1, 500, time.FixedZone("x", 3600))
	var seen []schedule.Run
	s := schedule.New(db, []schedule.Job{job}, func(_ context.Context, r schedule.Run) schedule.Outcome {
		seen = append(seen, r)
		return schedule.Outcome{ToolCallID: "call_9"}
	}, schedule.Options{Now: func() time.Time { return now }})
	at := time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC)
	if !s.Fire(context.Background(), job, at) || len(seen) != 1 || !seen[0].At.Equal(at) || seen[0].Tool != "report" {
		t.Fatalf("runs %+v", seen)
	}
	c, err := db.Conversation(context.Background(), seen[0].ConversationID)
	if err != nil || !c.CreatedAt.Equal(now) || c.CreatedAt.Location() != time.UTC {
		t.Fatalf("conversation %+v, %v; created at %v UTC wanted", c, err, now)
	}
	evs, err := db.Events(context.Background(), seen[0].ConversationID, 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v, %v", evs, err)
	}
	p, err := agentd.DecodeEvent(evs[0])
	r, ok := p.(*agentd.ToolCallRefusedPayload)
	if err != nil || !ok || r.Tier != agentd.TierNever || r.Reason != "refused" || r.ToolCallID != "call_9" || r.RunID != seen[0].RunID || r.ToolName != "report" {
		t.Fatalf("event %T %+v, %v; want tool_call_refused of tier never, reason refused", p, p, err)
	}
}

// A missed-tick report counts up to 100000 ticks; that many reads "at
// least". The entry is the schedule principal's, as a delegate, at the
// scheduler's clock. A tick claimed after a later one reports nothing.
func TestMissedReport(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "agentd.db"))
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var runs counted
	var log syncBuffer
	s := schedule.New(db, []schedule.Job{job}, runs.run, schedule.Options{Now: func() time.Time { return now }, Logger: zerolog.New(&log)})
	ctx := context.Background()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(100000 * time.Second) // 99999 missed
	t2 := t1.Add(100001 * time.Second) // 100000 missed
	for _, at := range []time.Time{t0, t1, t2, t1.Add(time.Second)} {
		s.Fire(ctx, job, at)
	}
	if runs.count() != 4 {
		t.Fatalf("%d runs, want 4", runs.count())
	}
	entries, err := db.Audit(ctx, agentd.AuditFilter{TenantID: "t1", ProjectID: "p1", Kind: agentd.AuditScheduleMissed})
	if err != nil || len(entries) != 2 {
		t.Fatalf("missed-tick entries %+v, %v; want 2", entries, err)
	}
	reasons := map[string]bool{}
	for _, e := range entries {
		reasons[e.Reason] = true
		if e.KeyID != agentd.ScheduleKeyID || e.Role != agentd.RoleDelegate || e.Outcome != "missed" || e.ToolName != "report" || !e.CreatedAt.Equal(now) {
			t.Errorf("entry %+v", e)
		}
	}
	if strings.Contains(log.String(), "not recorded") {
		t.Errorf("recorded entries logged as not recorded: %s", log.String())
	}
	for _, want := range []string{
		"99999 ticks missed between 2026-12-02T10:00:00Z and " + t1.Format(time.RFC3339Nano) + ": not run",
		"at least 100000 ticks missed between " + t1.Format(time.RFC3339Nano) + " and " + t2.Format(time.RFC3339Nano) + ": not run",
	} {
		if !reasons[want] {
			t.Errorf("no entry %q in %v", want, reasons)
		}
	}
}

// syncBuffer is a log destination safe for the scheduler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A schedule with no next tick (February 30th) is logged and not
// scheduled: nothing runs. Close without Start returns.
func TestNoNextTick(t *testing.T) {
	schedule.New(nil, nil, nil, schedule.Options{}).Close()
	db := openStore(t, filepath.Join(t.TempDir(), "agentd.db"))
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "0 0 30 2 *"), TenantID: "t1", ProjectID: "p1"}
	clock := newFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	var runs counted
	var log syncBuffer
	s := schedule.New(db, []schedule.Job{job}, runs.run, schedule.Options{Now: clock.Now, After: clock.After, Logger: zerolog.New(&log)})
	s.Start(context.Background())
	deadline := time.Now().Add(30 * time.Second) // a failure deadline, not a measure
	for !strings.Contains(log.String(), "schedule has no next tick") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning; log: %s", log.String())
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
	if runs.count() != 0 || len(clock.armed) != 0 {
		t.Fatalf("%d runs, %d waits of a schedule with no tick", runs.count(), len(clock.armed))
	}
}

// A failed claim is logged as an error, except when the scheduler is
// stopping (the claim failed because its context ended).
func TestFailedClaimLog(t *testing.T) {
	f := &failing{DB: openStore(t, filepath.Join(t.TempDir(), "agentd.db")), claim: errDown}
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	var runs counted
	var log syncBuffer
	s := schedule.New(f, []schedule.Job{job}, runs.run, schedule.Options{Logger: zerolog.New(&log)})
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if s.Fire(stopped, job, t0) || strings.Contains(log.String(), "not claimed") {
		t.Fatalf("a claim that failed on shutdown: logged %q", log.String())
	}
	if s.Fire(context.Background(), job, t0) || !strings.Contains(log.String(), `"level":"error","error":"store down"`) {
		t.Fatalf("a claim that failed: logged %q, want the error", log.String())
	}
	if runs.count() != 0 {
		t.Fatalf("%d runs of unclaimed ticks", runs.count())
	}
}
