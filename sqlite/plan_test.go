package sqlite

import (
	"context"
	"strings"
	"testing"
)

// TestQueryPlans pins the indexes of the queries whose cost must not grow
// with the number of parked calls or finished runs: NextDeadline reads one
// entry of tool_calls_status; RunsToDrive walks runs_active (active runs
// only) and decides each waiting run from tool_calls_parked, without
// reading a call row; the event log's reads each search one b-tree, in the
// order they return rows (no sort).
func TestQueryPlans(t *testing.T) {
	db := openTest(t)
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"NextDeadline", nextDeadlineQuery, []string{"SEARCH tool_calls USING COVERING INDEX tool_calls_status"}},
		{"RunsToDrive", `SELECT ` + runColumns + ` FROM runs WHERE ` + runsToDriveWhere,
			[]string{"SEARCH runs USING INDEX runs_active", "SEARCH c USING COVERING INDEX tool_calls_parked"}},
		// The event log is stored in position order (0011): the feed reads
		// it by row id, a tenant's feed by its index, a stream's replay by
		// the conversation's.
		{"EventsAfter", feedQueries[0], []string{"SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"}},
		{"EventsAfter tenant", feedQueries[1], []string{"SEARCH events USING INDEX events_tenant (tenant_id=? AND rowid>?)"}},
		{"EventsAfter project", feedQueries[2], []string{"SEARCH events USING INDEX events_tenant (tenant_id=? AND rowid>?)"}},
		{"Events", `SELECT ` + eventColumns + ` FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
			[]string{"SEARCH events USING INDEX events_conversation_seq (conversation_id=? AND seq>?)"}},
	} {
		args := make([]any, strings.Count(c.query, "?"))
		rows, err := db.reader.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+c.query, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, w, got)
			}
		}
		if strings.Contains(got, "SCAN ") || strings.Contains(c.name, "Events") && strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan scans a table:\n%s", c.name, got)
		}
	}
}
