package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
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
	if err := json.Unmarshal(ev.Data, &p); err != nil || p.Offset != "5m" || p.RemainingMS != (5*time.Minute).Milliseconds() ||
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
	g.clock.now = f.clock.now
	if n, _ := g.engine.RemindDue(ctx); n != 0 {
		t.Fatalf("after a restart the 5m reminder was sent again (%d)", n)
	}
	g.engine.Close()
	h := newGov(t, f.path, &rule, nil)
	h.clock.now = f.clock.now.Add(4*time.Minute + 30*time.Second)
	if n, _ := h.engine.RemindDue(ctx); n != 1 || h.rec.count(agentd.EventConfirmationReminder) != 1 {
		t.Fatalf("the 1m reminder that came due while down: %d sent, %d events", n, h.rec.count(agentd.EventConfirmationReminder))
	}

	// Extend by 2m at 30s before the deadline: the new deadline is 2m30s
	// ahead, so the 5m reminder is skipped and the 1m one armed again.
	if _, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{By: "bad"}); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("a bad duration: %v", err)
	}
	if _, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{By: "2h"}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
		t.Fatalf("past max_extension: %v", err)
	}
	up, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{By: "2m"})
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
	h.clock.now = h.clock.now.Add(90 * time.Second) // 1m before the new deadline
	if n, _ := h.engine.RemindDue(ctx); n != 1 {
		t.Fatalf("the 1m reminder of the new deadline: %d", n)
	}
	ev = h.rec.wait(t, agentd.EventConfirmationReminder, 2)
	if err := json.Unmarshal(ev.Data, &p); err != nil || p.Offset != "1m" || !p.RequiresApprovalAt.Equal(*up.RequiresApprovalAt) {
		t.Fatalf("reminder of the new deadline %s, %v", ev.Data, err)
	}
	if _, err := h.engine.Extend(ctx, govOwner, c.ID, agentd.ExtendRequest{By: "59m"}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
		t.Fatalf("the total past max_extension: %v", err)
	}
	if _, err := h.engine.Extend(ctx, agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "other"}, c.ID,
		agentd.ExtendRequest{By: "1m"}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatal("a key that may not decide extended")
	}
}

// Extensions are off by default (max_extension "0s").
func TestExtendOffByDefault(t *testing.T) {
	f := newGov(t, "", nil, nil)
	c := f.park(t, agentd.Principal{})
	if _, err := f.engine.Extend(context.Background(), govOp1, c.ID, agentd.ExtendRequest{By: "1m"}); agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX {
		t.Fatalf("%v", err)
	}
}
