package sqlstore

import "github.com/agentd-dev/agentd"

// PlanQueries are the role's reads whose query plans a backend's tests
// pin (their cost must not grow with the number of calls), by the name of
// the method that runs each.
func (s *ToolCallStore) PlanQueries() map[string]string {
	return map[string]string{
		"ParkedCount":         s.q.parkedCount,
		"NextDeadline":        s.q.nextDeadline,
		"MessageToolCalls":    selectToolCalls + s.q.ofMessagesWhere,
		"ToolCallsAfter":      selectToolCalls + s.q.afterMessageWhere,
		"ToolCallsDueBetween": selectToolCalls + s.q.dueBetweenWhere,
	}
}

// PendingQuery is PendingToolCalls' statement for f and its arguments,
// but for the last: the limit.
func (s *ToolCallStore) PendingQuery(f agentd.PendingFilter) (string, []any) {
	where, args := pendingWhere(s.d, f)
	return selectToolCalls + where + ` LIMIT ?`, args
}
