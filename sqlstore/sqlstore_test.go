package sqlstore

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentd-dev/agentd"
)

// The entries of both audit tables merge in id order, up to the limit.
func TestMergeAudit(t *testing.T) {
	ids := func(es []agentd.AuditEntry) (out []int64) {
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	entries := func(ids ...int64) (out []agentd.AuditEntry) {
		for _, id := range ids {
			out = append(out, agentd.AuditEntry{ID: id})
		}
		return out
	}
	for _, c := range []struct {
		a, b  []agentd.AuditEntry
		limit int
		want  []int64
	}{
		{entries(1, 3), nil, 10, []int64{1, 3}},
		{nil, entries(2), 10, []int64{2}},
		{entries(1, 4, 5), entries(2, 3, 6), 10, []int64{1, 2, 3, 4, 5, 6}},
		{entries(1, 4, 5), entries(2, 3, 6), 4, []int64{1, 2, 3, 4}},
	} {
		if got := ids(mergeAudit(c.a, c.b, c.limit)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("mergeAudit(%v, %v, %d) = %v, want %v", ids(c.a), ids(c.b), c.limit, got, c.want)
		}
	}
}

// Migrations come in version order; a name without a version, or two
// files of one version, are refused.
func TestMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_b.sql":  {Data: []byte("B")},
		"m/0010_c.sql":  {Data: []byte("C")},
		"m/0001_a.sql":  {Data: []byte("A")},
		"m/notes.txt":   {Data: []byte("not a migration")},
		"other/9_x.sql": {Data: []byte("X")},
	}
	ms, err := Migrations(fsys, "m/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name+"="+m.SQL)
	}
	if want := []string{"0001_a.sql=A", "0002_b.sql=B", "0010_c.sql=C"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("migrations %v, want %v", got, want)
	}
	for name, bad := range map[string]fstest.MapFS{
		"no version": {"m/a.sql": {}},
		"zero":       {"m/0_a.sql": {}},
		"twice":      {"m/1_a.sql": {}, "m/01_b.sql": {}},
	} {
		if _, err := Migrations(bad, "m/*.sql"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A list parameter is a JSON array in SQLite and a text[] in PostgreSQL;
// a list of integers is one parameter each in SQLite.
func TestDialectLists(t *testing.T) {
	statuses := []agentd.CallStatus{agentd.StatusApproved, agentd.StatusDenied}
	if got := listOf(SQLite, statuses); got != `["approved","denied"]` {
		t.Errorf("SQLite list %v", got)
	}
	if got := listOf(Postgres, statuses); !reflect.DeepEqual(got, []string{"approved", "denied"}) {
		t.Errorf("PostgreSQL list %v", got)
	}
	if cond, args := SQLite.inInt64s("seq", []int64{4, 5, 6}); cond != "seq IN (?, ?, ?)" || len(args) != 3 {
		t.Errorf("SQLite int list %q %v", cond, args)
	}
	if cond, args := Postgres.inInt64s("seq", []int64{4, 5, 6}); cond != "seq = ANY(?)" || len(args) != 1 {
		t.Errorf("PostgreSQL int list %q %v", cond, args)
	}
}

// Every statement of both dialects has as many placeholders as its
// arguments: PendingToolCalls' with each filter set.
func TestPendingQueryPlaceholders(t *testing.T) {
	f := agentd.PendingFilter{TenantID: "t", ProjectID: "p", ToolName: "n", ServerID: "s", ConversationID: "c", CreatedBy: "k", After: "x"}
	for _, d := range []*Dialect{SQLite, Postgres} {
		q, args := PendingQuery(d, f)
		if n := strings.Count(q, "?"); n != len(args)+1 {
			t.Errorf("%s: %d placeholders for %d arguments and the limit:\n%s", d.Name, n, len(args), q)
		}
		if d == Postgres && strings.Contains(q, "+") {
			t.Errorf("PostgreSQL query holds SQLite's planner hint:\n%s", q)
		}
	}
}
