package loop

import (
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// TestSkippedReminders: an extension records as sent exactly the
// reminders whose time under the new deadline is at or before now.
func TestSkippedReminders(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	rule := agentd.ApprovalRule{Reminders: []string{"10m", "1m"}}
	for _, tc := range []struct {
		name string
		next time.Time
		want []string
	}{
		{"both ahead", now.Add(11 * time.Minute), nil},
		{"the 10m one exactly now", now.Add(10 * time.Minute), []string{"10m"}},
		{"the 10m one passed", now.Add(5 * time.Minute), []string{"10m"}},
		{"both passed", now.Add(time.Minute), []string{"10m", "1m"}},
		{"deadline now", now, []string{"10m", "1m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range skippedReminders(rule, tc.next, now) {
				if !r.Deadline.Equal(tc.next) {
					t.Errorf("reminder %s recorded for %v, want the new deadline %v", r.Before, r.Deadline, tc.next)
				}
				got = append(got, r.Before)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("skipped %v, want %v", got, tc.want)
			}
		})
	}
	if got := skippedReminders(agentd.ApprovalRule{}, now, now); got != nil {
		t.Errorf("a rule without reminders skipped %v", got)
	}
}
