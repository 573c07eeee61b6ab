package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
)

// Reminders (SPEC §11.3) over a real SQLite file: each is sent once per
// deadline, also across a restart; one that came due while no process ran
// is sent by the next; an extension arms them again from the new
// deadline and skips those already past it.
func TestRemindersOnceAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	rule := agentd.DefaultApprovalRule()
	rule.Reminders, rule.MaxExtension = []string{"5m", "1m"}, "1h"
	f := newGov(t, "", &rule, nil)
	c := f.park(t, agentd.Principal{})
	if n, err := f.engine.RemindDue(ctx); err != nil || n != 0 {
		t.Fatalf("at park: %d, %v", n, err)
	}
	f.clock.Advance(5 * time.Minute) // 5m before the 10m deadline
	if n, err := f.engine.RemindDue(ctx); err != nil || n != 1 {
		t.Fatalf("at 5m: %d, %v", n, err)
	}
	ev := f.rec.wait(t, agentd.EventConfirmationReminder, 1)
	var p agentd.ConfirmationReminderPayload
	if err := json.Unmarshal(ev.Data, &p); err != nil || p.Before != "5m" || p.RemainingMS != (5*time.Minute).Milliseconds() ||
		!p.RequiresApprovalAt.Equal(*c.RequiresApprovalAt) {
		t.Fatalf("reminder %s, %v", ev.Data, err)
	}
	if n, _ := f.engine.RemindDue(ctx); n != 0 {
		t.Fatalf("the 5m reminder was sent again (%d)", n)
	}

	// A restart on the same file: the sent reminder stays sent; the 1m one
	// comes due while no process runs and the next process sends it.
	f.engine.Close()
	g := newGov(t, f.path, &rule, nil)
	g.clock.Set(f.clock.Now())
	if n, _ := g.engine.RemindDue(ctx); n != 0 {
		t.Fatalf("after a restart the 5m reminder was sent again (%d)", n)
	}
	g.engine.Close()
	h := newGov(t, f.path, &rule, nil)
	h.clock.Set(f.clock.Now().Add(4*time.Minute + 30*time.Second))
	if n, _ := h.engine.RemindDue(ctx); n != 1 || h.rec.count(agentd.EventConfirmationReminder) != 1 {
		t.Fatalf("the 1m reminder that came due while down: %d sent, %d events", n, h.rec.count(agentd.EventConfirmationReminder))
	}

	// Extend by 2m at 30s before the deadline: the new deadline is 2m30s
	// ahead, so the 5m reminder is skipped and the 1m one armed again.
	if _, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{Extension: "bad"}); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("a bad duration: %v", err)
	}
	if _, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{Extension: "2h"}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
		t.Fatalf("past max_extension: %v", err)
	}
	up, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{Extension: "2m"})
	if err != nil || !up.RequiresApprovalAt.Equal(c.RequiresApprovalAt.Add(2*time.Minute)) || up.Extended != 2*time.Minute {
		t.Fatalf("extend: %+v, %v", up, err)
	}
	if n, _ := h.engine.RemindDue(ctx); n != 0 {
		t.Fatalf("a reminder past when the extension armed it was sent (%d)", n)
	}
	// The extension is audited (one entry per extension; the refused
	// ones above none).
	if es, _, err := h.engine.Audit(ctx, govOp1, agentd.AuditQuery{Kind: agentd.AuditExtension}); err != nil || len(es) != 1 ||
		es[0].ToolCallID != c.ID || es[0].KeyID != "owner" || es[0].Outcome != "2m" || es[0].ConversationID != c.ConversationID {
		t.Fatalf("extension audit: %+v, %v", es, err)
	}
	h.clock.Advance(90 * time.Second) // 1m before the new deadline
	if n, _ := h.engine.RemindDue(ctx); n != 1 {
		t.Fatalf("the 1m reminder of the new deadline: %d", n)
	}
	ev = h.rec.wait(t, agentd.EventConfirmationReminder, 2)
	if err := json.Unmarshal(ev.Data, &p); err != nil || p.Before != "1m" || !p.RequiresApprovalAt.Equal(*up.RequiresApprovalAt) {
		t.Fatalf("reminder of the new deadline %s, %v", ev.Data, err)
	}
	if _, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{Extension: "59m"}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
		t.Fatalf("the total past max_extension: %v", err)
	}
	if _, err := h.engine.Extend(ctx, agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "other"}, c.ID,
		agentd.ExtendRequest{Extension: "1m"}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatal("a key that may not decide extended")
	}
}

// TestExtendToExactlyMax: extensions whose total reaches max_extension
// exactly are allowed; one nanosecond more is refused, and so is a "by"
// so large that adding it would overflow.
func TestExtendToExactlyMax(t *testing.T) {
	rule := agentd.DefaultApprovalRule()
	rule.MaxExtension = "3m"
	f := newGov(t, "", &rule, nil)
	c := f.park(t, agentd.Principal{})
	ctx := context.Background()
	if _, err := f.engine.Extend(ctx, govOp1, c.ID, agentd.ExtendRequest{Extension: "1m"}); err != nil {
		t.Fatal(err)
	}
	up, err := f.engine.Extend(ctx, govOp1, c.ID, agentd.ExtendRequest{Extension: "2m"})
	if err != nil || up.Extended != 3*time.Minute || !up.RequiresApprovalAt.Equal(c.RequiresApprovalAt.Add(3*time.Minute)) {
		t.Fatalf("an extension to exactly max_extension: %+v, %v", up, err)
	}
	for _, by := range []string{"1ns", "2562047h47m16s"} {
		if _, err := f.engine.Extend(ctx, govOp1, c.ID, agentd.ExtendRequest{Extension: by}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
			t.Fatalf("by %s past max_extension: %v", by, err)
		}
	}
}

// Extensions are off by default (max_extension "0s").
func TestExtendOffByDefault(t *testing.T) {
	f := newGov(t, "", nil, nil)
	c := f.park(t, agentd.Principal{})
	if _, err := f.engine.Extend(context.Background(), govOp1, c.ID, agentd.ExtendRequest{Extension: "1m"}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
		t.Fatalf("%v", err)
	}
}

// Reminders of a call another engine parked on the same store, that
// engine gone (a replica killed): the engines that started before the park
// (so their start-up read missed it) find it by the sweep each lease tick
// does, a read of the deadlines near, and send each reminder once between
// them.
func TestRemindersOfAnotherEnginesCall(t *testing.T) {
	ctx := context.Background()
	rule := agentd.DefaultApprovalRule()
	rule.Reminders = []string{"5m", "1m"}
	f := newGov(t, "", &rule, nil)
	g, h := newGov(t, f.path, &rule, nil), newGov(t, f.path, &rule, nil)
	tick := 2 * time.Minute
	for _, e := range []*govFixture{g, h} {
		if n, err := loop.SweepAndRemind(ctx, e.engine, tick); err != nil || n != 0 {
			t.Fatalf("before the park: %d, %v", n, err)
		}
	}
	c := f.park(t, agentd.Principal{}) // its deadline: 10m from now
	f.engine.Close()

	at := func(d time.Duration) {
		g.clock.Set(f.clock.Now().Add(d))
		h.clock.Set(f.clock.Now().Add(d))
	}
	sweep := func(what string, want int) {
		t.Helper()
		sent := 0
		for _, e := range []*govFixture{g, h} {
			n, err := loop.SweepAndRemind(ctx, e.engine, tick)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			sent += n
		}
		if sent != want {
			t.Fatalf("%s: %d calls reminded, want %d", what, sent, want)
		}
	}
	at(time.Minute)
	sweep("at 1m", 0)
	at(4 * time.Minute)
	sweep("at 4m (noted, not yet due)", 0)
	at(5 * time.Minute)
	sweep("at 5m", 1)
	at(5*time.Minute + time.Second)
	sweep("just after", 0)
	at(9 * time.Minute)
	sweep("at 9m", 1)
	if n := g.rec.count(agentd.EventConfirmationReminder) + h.rec.count(agentd.EventConfirmationReminder); n != 2 {
		t.Fatalf("%d confirmation_reminder events, want 2", n)
	}
	got, err := g.store.ToolCall(ctx, c.ID)
	if err != nil || len(got.Reminded) != 2 {
		t.Fatalf("reminded %+v, %v", got, err)
	}
}

// The deadline ranges a pass reads: one per reminder offset, (from+o,
// to+o] but never a deadline at or before to (now), those that overlap
// merged; from zero (the first pass): every deadline ahead with a reminder
// due.
func TestReminderWindows(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		offsets []time.Duration
		from    time.Duration
		to      time.Duration
		want    [][2]time.Time
	}{
		{nil, 0, time.Second, nil},
		{[]time.Duration{time.Minute}, 0, 5 * time.Second, [][2]time.Time{{at(time.Minute), at(time.Minute + 5*time.Second)}}},
		{[]time.Duration{10 * time.Minute, time.Minute}, 0, 5 * time.Second,
			[][2]time.Time{{at(time.Minute), at(time.Minute + 5*time.Second)}, {at(10 * time.Minute), at(10*time.Minute + 5*time.Second)}}},
		// A deadline at or before now is past: no reminder.
		{[]time.Duration{3 * time.Second, time.Second}, 0, 5 * time.Second, [][2]time.Time{{at(5 * time.Second), at(8 * time.Second)}}},
		{[]time.Duration{time.Second}, 5 * time.Second, 5 * time.Second, nil},
		{[]time.Duration{2 * time.Second, time.Second}, 0, time.Second, [][2]time.Time{{at(time.Second), at(3 * time.Second)}}},
	} {
		got := loop.ReminderWindows(tc.offsets, at(tc.from), at(tc.to))
		if len(got) != len(tc.want) {
			t.Fatalf("%v: %v, want %v", tc.offsets, got, tc.want)
		}
		for i := range got {
			if !got[i][0].Equal(tc.want[i][0]) || !got[i][1].Equal(tc.want[i][1]) {
				t.Fatalf("%v: %v, want %v", tc.offsets, got, tc.want)
			}
		}
	}
	if got := loop.ReminderWindows([]time.Duration{time.Minute}, time.Time{}, t0); len(got) != 1 ||
		!got[0][0].Equal(t0) || !got[0][1].Equal(at(time.Minute)) {
		t.Fatalf("the first pass: %v", got)
	}
}

// A reminder is per deadline, not per call (issue 37.2): after an
// extension each offset fires again before the new deadline, once per
// offset per deadline, also across restarts.
func TestRemindersPerDeadline(t *testing.T) {
	ctx := context.Background()
	rule := agentd.DefaultApprovalRule()
	rule.Reminders, rule.MaxExtension = []string{"5m", "1m"}, "1h"
	f := newGov(t, "", &rule, nil)
	c := f.park(t, agentd.Principal{}) // its deadline: 10m from now
	remind := func(g *govFixture, what string, want int) {
		t.Helper()
		if n, err := g.engine.RemindDue(ctx); err != nil || n != want {
			t.Fatalf("%s: %d calls reminded (%v), want %d", what, n, err, want)
		}
	}
	f.clock.Advance(5 * time.Minute)
	remind(f, "5m before the first deadline", 1)
	f.clock.Advance(4 * time.Minute)
	remind(f, "1m before the first deadline", 1)
	up, err := f.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{Extension: "30m"}) // the new deadline: 40m
	if err != nil {
		t.Fatal(err)
	}
	remind(f, "right after the extension", 0)
	f.clock.Advance(26 * time.Minute)
	remind(f, "5m before the new deadline", 1)
	remind(f, "again", 0)
	f.engine.Close()

	g := newGov(t, f.path, &rule, nil)
	g.clock.Set(f.clock.Now())
	remind(g, "after a restart", 0)
	g.clock.Advance(4 * time.Minute)
	remind(g, "1m before the new deadline", 1)
	g.engine.Close()
	h := newGov(t, f.path, &rule, nil)
	h.clock.Set(g.clock.Now())
	remind(h, "after another restart", 0)

	var sent []string
	for _, ev := range append(f.rec.all(agentd.EventConfirmationReminder), g.rec.all(agentd.EventConfirmationReminder)...) {
		var p agentd.ConfirmationReminderPayload
		if err := json.Unmarshal(ev.Data, &p); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, p.Before+" before "+p.RequiresApprovalAt.Sub(*c.RequiresApprovalAt).String())
	}
	if want := []string{"5m before 0s", "1m before 0s", "5m before 30m0s", "1m before 30m0s"}; !slices.Equal(sent, want) {
		t.Fatalf("reminders sent %q, want %q (deadlines after the first)", sent, want)
	}
	// The store keeps the markers of the current deadline.
	got, err := h.store.ToolCall(ctx, c.ID)
	if err != nil || len(got.Reminded) != 2 || !got.Reminded[0].Deadline.Equal(*up.RequiresApprovalAt) ||
		!got.Reminded[1].Deadline.Equal(*up.RequiresApprovalAt) {
		t.Fatalf("reminded %+v, %v", got.Reminded, err)
	}
}
