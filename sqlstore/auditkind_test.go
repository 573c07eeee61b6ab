package sqlstore

import (
	"testing"

	"github.com/agentd-dev/agentd"
)

// Each audit kind a decisions row holds selects its own decisions; a kind
// no decisions row is, none.
func TestDecisionKindCondition(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want string
		ok   bool
	}{
		{"", "", true},
		{agentd.AuditDecision, ` AND d.decision NOT IN ('expired', 'cancelled')`, true},
		{agentd.AuditExpiry, ` AND d.decision = 'expired'`, true},
		{agentd.AuditCancellation, ` AND d.decision = 'cancelled'`, true},
		{agentd.AuditToolEval, "", false},
		{"nonsense", "", false},
	} {
		got, ok := DecisionKindCondition(tc.kind)
		if got != tc.want || ok != tc.ok {
			t.Errorf("DecisionKindCondition(%q) = %q, %v; want %q, %v", tc.kind, got, ok, tc.want, tc.ok)
		}
	}
}
