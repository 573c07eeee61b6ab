package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/storetest"
)

// openTest opens a new database file in t's temporary directory.
func openTest(t testing.TB) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) agentd.Store { return openTest(t) },
		Reopen: func(t *testing.T, s agentd.Store) agentd.Store {
			path := s.(*DB).Path()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		BeforeCommit: func(t *testing.T, s agentd.Store, h func(group int) error) {
			s.(*DB).group.hook.Store(&h)
		},
	})
}

func TestPragmas(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	for _, pool := range []struct {
		name string
		q    func(string) (string, error)
	}{
		{"writer", func(p string) (s string, err error) {
			err = db.writer.QueryRowContext(ctx, "PRAGMA "+p).Scan(&s)
			return
		}},
		{"reader", func(p string) (s string, err error) {
			err = db.reader.QueryRowContext(ctx, "PRAGMA "+p).Scan(&s)
			return
		}},
	} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"synchronous":  "2", // FULL
			"foreign_keys": "1",
			"busy_timeout": fmt.Sprint(BusyTimeout.Milliseconds()),
			"temp_store":   "2", // MEMORY
		} {
			got, err := pool.q(pragma)
			if err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", pool.name, pragma, err)
			}
			if !strings.EqualFold(got, want) {
				t.Errorf("%s: PRAGMA %s = %s, want %s", pool.name, pragma, got, want)
			}
		}
	}
	if _, err := db.reader.ExecContext(ctx, `INSERT INTO conversations (id, tenant_id, project_id, agent, delegated) VALUES ('x', '', '', '', 0)`); err == nil {
		t.Error("the read pool accepted a write")
	}
}

// TestReopen checks that everything committed survives Close and Open of
// the same file, that migrations are not applied twice, and that sequence
// numbers continue where they stopped.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentd.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	deadline := now.Add(15 * time.Minute)
	conv := &agentd.Conversation{ID: "conv_1", TenantID: "t", ProjectID: "p", Agent: "a", Metadata: json.RawMessage(`{"k": "v"}`), CreatedAt: now}
	run := &agentd.Run{ID: "run_1", ConversationID: conv.ID, Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	msg := &agentd.Message{ID: "msg_1", ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "hi", CreatedAt: now}
	parked := &agentd.ToolCall{ID: "call_parked", ConversationID: conv.ID, RunID: run.ID, Step: 1, Name: "deploy",
		Arguments: json.RawMessage(`{"env": "prod"}`), Status: agentd.StatusRequiresConfirmation, RequiresApprovalAt: &deadline, CreatedAt: now}
	approved := &agentd.ToolCall{ID: "call_approved", ConversationID: conv.ID, RunID: run.ID, Step: 1, Index: 1, Name: "deploy",
		Status: agentd.StatusRequiresConfirmation, RequiresApprovalAt: &deadline, CreatedAt: now}
	if err := db.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartRun(ctx, run, msg, []agentd.EventDraft{{ConversationID: conv.ID, Type: agentd.EventRunStarted, Data: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateToolCalls(ctx, []*agentd.ToolCall{parked, approved}, []agentd.EventDraft{{ConversationID: conv.ID, Type: agentd.EventConfirmationRequired}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.UpdateToolCall(ctx, agentd.CallUpdate{ID: approved.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusApproved, Now: now, Decision: &agentd.Decision{ID: "dec_1", Decision: agentd.DecisionApproved, DecidedBy: "k"}},
		[]agentd.EventDraft{{ConversationID: conv.ID, Type: agentd.EventConfirmationResolved}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()

	gotConv, err := db.Conversation(ctx, conv.ID)
	if err != nil || string(gotConv.Metadata) != `{"k": "v"}` || !gotConv.CreatedAt.Equal(now) {
		t.Fatalf("conversation after reopen = %+v, %v", gotConv, err)
	}
	active, err := db.RunsToDrive(ctx)
	if err != nil || len(active) != 1 || active[0].ID != run.ID {
		t.Fatalf("active runs after reopen = %+v, %v", active, err)
	}
	msgs, err := db.Messages(ctx, conv.ID)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "hi" {
		t.Fatalf("messages after reopen = %+v, %v", msgs, err)
	}
	// The parked call is still pending with its deadline; the approved one
	// is still approved, with its decision.
	due, err := db.DueToolCalls(ctx, deadline, 0)
	if err != nil || len(due) != 1 || due[0].ID != parked.ID || !due[0].RequiresApprovalAt.Equal(deadline) ||
		string(due[0].Arguments) != `{"env": "prod"}` {
		t.Fatalf("due calls after reopen = %+v, %v", due, err)
	}
	ready, err := db.ToolCallsByStatus(ctx, agentd.StatusApproved)
	if err != nil || len(ready) != 1 || ready[0].ID != approved.ID || len(ready[0].Decisions) != 1 || ready[0].Decisions[0].ID != "dec_1" {
		t.Fatalf("approved calls after reopen = %+v, %v", ready, err)
	}
	evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: conv.ID, Type: agentd.EventError}})
	if err != nil || len(evs) != 1 || evs[0].Seq != 4 {
		t.Fatalf("append after reopen = %+v, %v; want seq 4", evs, err)
	}

	var applied, version int
	if err := db.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if err := db.reader.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(ms) || version != ms[len(ms)-1].Version {
		t.Errorf("after reopen: %d migration rows, user_version %d; want %d and %d", applied, version, len(ms), ms[len(ms)-1].Version)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database\n", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"missing directory": {filepath.Join(dir, "no", "such", "dir", "agentd.db"), filepath.Join(dir, "no", "such", "dir", "agentd.db")},
		"a directory":       {dir, dir},
		"not a database":    {garbage, "not a database"},
		"empty":             {"", "must name a database file"},
		"memory":            {":memory:", "must name a database file"},
	} {
		t.Run(name, func(t *testing.T) {
			db, err := Open(tc.path)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sqlite: open") {
				t.Errorf("Open(%q) = %q, want an error starting with %q that mentions %q", tc.path, err, "sqlite: open", tc.want)
			}
		})
	}
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.writer.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path); err == nil {
		db.Close()
		t.Fatal("Open accepted a schema newer than the binary")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open = %v, want a newer-schema error", err)
	}
}

// TestPathWithURICharacters checks that '?', '#' and '%' in a path name a
// file rather than URI syntax.
func TestPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd ?name#x%41.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateConversation(context.Background(), &agentd.Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at the given path: %v", err)
	}
}

// TestTwoHandles writes through two DBs on one file at once, as two
// processes would: busy_timeout and IMMEDIATE transactions keep sequence
// numbers gapless, feed positions unique and in commit order, and nothing
// fails with SQLITE_BUSY.
func TestTwoHandles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentd.db")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.CreateConversation(ctx, &agentd.Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	for _, db := range []*DB{a, b, a, b} {
		wg.Go(func() {
			for range n {
				if _, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "c", Type: agentd.EventTextDelta}}); err != nil {
					t.Errorf("AppendEvents: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	evs, err := b.Events(ctx, "c", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4*n {
		t.Fatalf("%d events, want %d", len(evs), 4*n)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if i > 0 && e.Position <= evs[i-1].Position {
			t.Fatalf("seq %d has position %d, after position %d", e.Seq, e.Position, evs[i-1].Position)
		}
	}
}

func TestDecisionsImmutable(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if err := db.CreateConversation(ctx, &agentd.Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateToolCalls(ctx, []*agentd.ToolCall{{ID: "call", ConversationID: "c", Status: agentd.StatusRequiresConfirmation}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.UpdateToolCall(ctx, agentd.CallUpdate{ID: "call", From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusDenied, Decision: &agentd.Decision{Decision: agentd.DecisionDenied, DecidedBy: "k"}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE decisions SET decision = 'approved'`, `DELETE FROM decisions`} {
		if _, err := db.writer.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded", q)
		}
	}
	c, err := db.ToolCall(ctx, "call")
	if err != nil || len(c.Decisions) != 1 || c.Decisions[0].Decision != agentd.DecisionDenied || c.Decisions[0].ToolCallID != "call" || c.Decisions[0].ID == "" {
		t.Fatalf("call = %+v, %v", c, err)
	}
}

// FuzzEventData checks that any valid JSON event payload comes back byte
// for byte and that anything else is refused with EINVALID.
func FuzzEventData(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": [1, 2.50, "\u00e9"]}`, " [ ] ", `"x"`, `{"a":`, `null`, "\x00", `1e400`} {
		f.Add([]byte(s))
	}
	db := openTest(f)
	ctx := context.Background()
	if err := db.CreateConversation(ctx, &agentd.Conversation{ID: "c"}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := db.AppendEvents(ctx, []agentd.EventDraft{{ConversationID: "c", Type: agentd.EventTextDelta, Data: data}})
		if len(data) > 0 && !json.Valid(data) {
			if agentd.ErrorCode(err) != agentd.EINVALID {
				t.Fatalf("invalid JSON %q: error %v, want EINVALID", data, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.Events(ctx, "c", evs[0].Seq-1, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("Events = %v, %v", got, err)
		}
		if string(got[0].Data) != string(data) {
			t.Fatalf("data = %q, want %q", got[0].Data, data)
		}
	})
}

// A migration below the newest applied one that a database lacks (branches
// that each added one, merged out of number order) is applied at the next
// open, and the newest version stays in user_version.
func TestMigrateAppliesAMissingLowerVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var newest int
	if err := db.writer.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	// As if 0017 (the runs' trace columns) had not been there when the
	// newer ones were applied.
	for _, q := range []string{`ALTER TABLE runs DROP COLUMN trace_parent`, `ALTER TABLE runs DROP COLUMN trace_caller`,
		`DELETE FROM schema_migrations WHERE version = 17`} {
		if _, err := db.writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if newest <= 17 {
		t.Fatalf("the newest migration is %d: the test needs one above 17", newest)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, uv int
	if err := db.writer.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = 17`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 17 recorded %d times (%v), want once", n, err)
	}
	if _, err := db.writer.ExecContext(ctx, `SELECT trace_parent, trace_caller FROM runs`); err != nil {
		t.Fatalf("the runs' trace columns after reopening: %v", err)
	}
	if err := db.writer.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&uv); err != nil || uv != newest {
		t.Fatalf("user_version = %d (%v), want the newest %d", uv, err, newest)
	}
}
