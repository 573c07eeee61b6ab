package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/sqlstore"
)

// TestRunsToDrivePlan: RunsToDrive's condition is the predicate of the
// partial index runs_to_drive word for word, so PostgreSQL can read that
// index, which holds no run that waits for a decision, instead of the
// runs. On an empty table the planner prefers a sequential scan; with it
// turned off, the plan shows whether the index can serve the query at all.
func TestRunsToDrivePlan(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.NewSchema(t, pgtest.NewDatabase(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `EXPLAIN `+sqlstore.PlanQueries(sqlstore.Postgres)["RunsToDrive"])
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(plan, "\n"); !strings.Contains(got, "Index Scan using runs_to_drive") {
		t.Errorf("RunsToDrive does not read runs_to_drive:\n%s", got)
	}
}
