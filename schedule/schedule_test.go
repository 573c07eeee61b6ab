package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/schedule"
	"github.com/agentd-dev/agentd/sqlite"
)

func mustParse(t *testing.T, expr string) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// @every ticks are multiples of the period since the epoch, so every
// replica computes the same ticks whenever it started; cron ticks are wall
// clock times in UTC.
func TestNext(t *testing.T) {
	base := time.Date(2026, 12, 2, 10, 7, 30, 500, time.UTC)
	for _, tt := range []struct {
		expr     string
		at, want time.Time
	}{
		{"@every 1s", base, time.Date(2026, 12, 2, 10, 7, 31, 0, time.UTC)},
		{"@every 1s", time.Date(2026, 12, 2, 10, 7, 31, 0, time.UTC), time.Date(2026, 12, 2, 10, 7, 32, 0, time.UTC)},
		{"@every 1h", base, time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)},
		{"@every 90s", base, time.Date(2026, 12, 2, 10, 9, 0, 0, time.UTC)},
		{"*/15 * * * *", base, time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC)},
		{"0 9 * * 1", base, time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}, // the next Monday
		{"@hourly", base, time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)},
		{"@every 1s", base.In(time.FixedZone("x", 3600)), time.Date(2026, 12, 2, 10, 7, 31, 0, time.UTC)},
	} {
		if got := mustParse(t, tt.expr).Next(tt.at); !got.Equal(tt.want) {
			t.Errorf("%q.Next(%v) = %v, want %v", tt.expr, tt.at, got, tt.want)
		}
	}
}

func TestMissed(t *testing.T) {
	s := mustParse(t, "@every 1s")
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		after, before time.Time
		limit, want   int
	}{
		{t0, t0.Add(time.Second), 10, 0},
		{t0, t0.Add(4 * time.Second), 10, 3},
		{t0, t0.Add(time.Hour), 100, 100},
	} {
		if got := s.Missed(tt.after, tt.before, tt.limit); got != tt.want {
			t.Errorf("Missed(%v, %v, %d) = %d, want %d", tt.after, tt.before, tt.limit, got, tt.want)
		}
	}
}

// run records the ticks a scheduler ran.
type runs struct {
	mu    sync.Mutex
	ticks []time.Time
}

func (r *runs) run(_ context.Context, run schedule.Run) schedule.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ticks = append(r.ticks, run.At)
	return schedule.Outcome{ToolCallID: "call_1", Status: agentd.StatusCompleted}
}

func openStore(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Two replicas over one database firing the same ticks run each once; a
// gap in the ticks is reported once (log and audit), by the replica that
// claimed the tick after it, and the missed ticks are not run.
func TestFireOncePerTickAcrossReplicas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	a, b := openStore(t, path), openStore(t, path)
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	var ra, rb runs
	sa := schedule.New(a, []schedule.Job{job}, ra.run, schedule.Options{})
	sb := schedule.New(b, []schedule.Job{job}, rb.run, schedule.Options{})
	ctx := context.Background()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ticks := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(7 * time.Second)}
	for _, at := range ticks {
		var wg sync.WaitGroup
		ran := make([]bool, 2)
		for i, s := range []*schedule.Scheduler{sa, sb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ran[i] = s.Fire(ctx, job, at)
			}()
		}
		wg.Wait()
		if ran[0] == ran[1] {
			t.Fatalf("tick %v: replica a ran %v, b ran %v; want exactly one", at, ran[0], ran[1])
		}
	}
	if got := len(ra.ticks) + len(rb.ticks); got != len(ticks) {
		t.Fatalf("%d runs for %d ticks", got, len(ticks))
	}
	entries, err := a.Audit(ctx, agentd.AuditFilter{TenantID: "t1", ProjectID: "p1", Kind: agentd.AuditScheduleMissed})
	if err != nil {
		t.Fatal(err)
	}
	want := "4 ticks missed between 2026-12-02T10:00:02Z and 2026-12-02T10:00:07Z: not run"
	if len(entries) != 1 || entries[0].Reason != want || entries[0].ToolName != "report" || entries[0].KeyID != agentd.ScheduleKeyID {
		t.Fatalf("missed-tick entries = %+v, want one with reason %q", entries, want)
	}
}

// Started, the scheduler runs the job at its next ticks and never at one
// already past; Close stops it.
func TestStartRunsNextTicksOnly(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "agentd.db"))
	// Ticks claimed an hour ago: the scheduler reports the gap and does
	// not run it.
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	hourAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	if _, ok, err := db.ClaimTick(context.Background(), "report", hourAgo); err != nil || !ok {
		t.Fatal(ok, err)
	}
	started := time.Now()
	got := make(chan time.Time, 10)
	s := schedule.New(db, []schedule.Job{job}, func(_ context.Context, r schedule.Run) schedule.Outcome {
		got <- r.At
		return schedule.Outcome{ToolCallID: "call_1", Status: agentd.StatusCompleted}
	},
		schedule.Options{})
	s.Start(context.Background())
	var first time.Time
	select {
	case first = <-got:
	case <-time.After(30 * time.Second): // a failure deadline, not a measure
		t.Fatal("no tick ran")
	}
	s.Close()
	if !first.After(started) || first.Nanosecond() != 0 {
		t.Errorf("first run at tick %v, want a whole second after the start %v", first, started)
	}
	entries, err := db.Audit(context.Background(), agentd.AuditFilter{TenantID: "t1", ProjectID: "p1", Kind: agentd.AuditScheduleMissed})
	if err != nil || len(entries) != 1 {
		t.Fatalf("missed-tick entries = %+v, %v; want one", entries, err)
	}
}

// Each claimed tick is run in a delegated conversation of its own, of the
// job's tenant and project, created by the schedule principal; its log
// holds the call's start and result, published as they commit. A call
// refused before it ran is a tool_call_refused.
func TestFireRecordsTheRunInAConversation(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "agentd.db"))
	ctx := context.Background()
	job := schedule.Job{Tool: "report", Schedule: mustParse(t, "@every 1s"), TenantID: "t1", ProjectID: "p1"}
	var published []agentd.Event
	var seen []schedule.Run
	refuse := false
	run := func(_ context.Context, r schedule.Run) schedule.Outcome {
		seen = append(seen, r)
		id := fmt.Sprintf("call_%d", len(seen))
		if refuse {
			return schedule.Outcome{ToolCallID: id, Tier: agentd.TierReview, Status: agentd.StatusFailed, Error: "refused (tier review)"}
		}
		r.Started(agentd.ToolCall{ID: id, Name: r.Tool, Arguments: json.RawMessage(`{"n":1}`)})
		return schedule.Outcome{ToolCallID: id, Tier: agentd.TierAuto, Status: agentd.StatusCompleted, Result: json.RawMessage(`{"ok":true}`)}
	}
	s := schedule.New(db, []schedule.Job{job}, run, schedule.Options{Agent: "assistant",
		Publish: func(e agentd.Event) { published = append(published, e) }})
	at := time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC)
	if !s.Fire(ctx, job, at) {
		t.Fatal("tick not run")
	}
	refuse = true
	if !s.Fire(ctx, job, at.Add(time.Second)) {
		t.Fatal("second tick not run")
	}
	if len(seen) != 2 || seen[0].ConversationID == seen[1].ConversationID || seen[0].RunID == seen[1].RunID {
		t.Fatalf("runs = %+v, want two, each in a conversation and run of its own", seen)
	}
	c, err := db.Conversation(ctx, seen[0].ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Title    string `json:"title"`
		Schedule struct {
			Tool string    `json:"tool"`
			Tick time.Time `json:"tick"`
		} `json:"schedule"`
	}
	if err := json.Unmarshal(c.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if c.TenantID != "t1" || c.ProjectID != "p1" || !c.Delegated || c.CreatedBy != agentd.ScheduleKeyID || c.Agent != "assistant" ||
		meta.Title != "schedule: report @ 2026-12-02T10:00:01Z" || meta.Schedule.Tool != "report" || !meta.Schedule.Tick.Equal(at) {
		t.Errorf("conversation = %+v, metadata %s", c, c.Metadata)
	}
	want := [][]string{
		{agentd.EventToolCallStarted, agentd.EventToolCallResult},
		{agentd.EventToolCallRefused},
	}
	n := 0
	for i, r := range seen {
		evs, err := db.Events(ctx, r.ConversationID, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(want[i]) {
			t.Fatalf("run %d: %d events, want %v", i, len(evs), want[i])
		}
		for j, e := range evs {
			p, err := agentd.DecodeEvent(e)
			if err != nil || e.Type != want[i][j] {
				t.Fatalf("run %d event %d: %s %v, want %s", i, j, e.Type, err, want[i][j])
			}
			checkPayload(t, p, r.RunID)
			n++
		}
	}
	if len(published) != n {
		t.Errorf("%d events published, %d appended", len(published), n)
	}
}

// checkPayload checks one event of a scheduled run of "report".
func checkPayload(t *testing.T, p agentd.EventPayload, runID string) {
	t.Helper()
	switch p := p.(type) {
	case *agentd.ToolCallStartedPayload:
		if p.RunID != runID || p.ToolCallID != "call_1" || p.ToolName != "report" || string(p.Arguments) != `{"n":1}` {
			t.Errorf("tool_call_started = %+v", p)
		}
	case *agentd.ToolCallResultPayload:
		if p.RunID != runID || p.ToolCallID != "call_1" || p.Status != agentd.StatusCompleted || string(p.Result) != `{"ok":true}` {
			t.Errorf("tool_call_result = %+v", p)
		}
	case *agentd.ToolCallRefusedPayload:
		if p.RunID != runID || p.ToolCallID != "call_2" || p.Tier != agentd.TierReview || p.Reason != "refused (tier review)" {
			t.Errorf("tool_call_refused = %+v", p)
		}
	default:
		t.Errorf("unexpected event %T", p)
	}
}
