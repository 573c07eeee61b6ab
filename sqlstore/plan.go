package sqlstore

import "github.com/agentd-dev/agentd"

// PlanQueries are the reads in dialect d whose query plans a backend's
// tests pin (their cost must not grow with the number of rows they skip),
// by the name of what runs each.
func PlanQueries(d *Dialect) map[string]string {
	q, runs := newToolCallSQL(d), newRunStore(nil, d, nil)
	return map[string]string{
		"RunsToDrive":              `SELECT ` + runColumns + ` FROM runs WHERE ` + runs.runsToDriveWhere,
		"ParkedCount":              q.parkedCount,
		"NextDeadline":             q.nextDeadline,
		"MessageToolCalls":         selectToolCalls + q.ofMessagesWhere,
		"ToolCallsAfter":           selectToolCalls + q.afterMessageWhere,
		"ToolCallsDueBetween":      selectToolCalls + q.dueBetweenWhere,
		"WebhookQueueDepth/tenant": tenantQueueDepthQuery,
		"MessagesAfter":            messagesAfterQuery,
		"ActiveGrants":             activeGrantsQuery,
		"EventsAfter":              feedQueries[0],
		"EventsAfter tenant":       feedQueries[1],
		"EventsAfter project":      feedQueries[2],
		"Events":                   eventsQuery,
		"DueInputs":                dueInputsQuery,
		"NextInputDeadline":        nextInputDeadlineQuery,
	}
}

// InputsQuery is Inputs' statement for f and its arguments but for the
// last: the limit.
func InputsQuery(f agentd.InputFilter) (string, []any) { return inputsQuery(f) }

// PendingQuery is PendingToolCalls' statement for f in dialect d, and its
// arguments but for the last: the limit.
func PendingQuery(d *Dialect, f agentd.PendingFilter) (string, []any) {
	where, args := pendingWhere(d, f)
	return selectToolCalls + where + ` LIMIT ?`, args
}

// AuditQuery is Audit's read of the audit table for f and its arguments
// but for the last: the limit.
func AuditQuery(f agentd.AuditFilter) (string, []any) { return auditQuery(f) }
