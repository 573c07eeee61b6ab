// Package storetest is the contract every agentd.Store implementation must
// pass: one suite, run by each backend's own tests against a real database
// (SQLite always, PostgreSQL when one is available). The suite is organised
// by the store's roles (roles.go): RunConversations, RunRuns, RunToolCalls,
// RunEventLog, RunAudit, RunThreads, RunWebhookOutbox, RunSchedules,
// RunChildJournal, RunLinks, RunGrants, RunInputs and RunHealth, so a new backend can
// pass it role by role; Run runs them all.
//
//	func TestStore(t *testing.T) {
//		open := func(t *testing.T, path string) agentd.Store {
//			db, err := sqlite.Open(path)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { db.Close() })
//			return db
//		}
//		storetest.Run(t, storetest.Backend{
//			Open: func(t *testing.T) agentd.Store {
//				return open(t, filepath.Join(t.TempDir(), "agentd.db"))
//			},
//			Reopen: func(t *testing.T, s agentd.Store) agentd.Store {
//				s.Close()
//				return open(t, s.(*sqlite.DB).Path())
//			},
//		})
//	}
//
// A backend that implements the roles one at a time runs their suites
// alone meanwhile: storetest.RunConversations(t, open), and so on.
//
// Beyond the doc comments of agentd.Store and its roles, the suite pins
// down what callers rely on:
//
//   - Times round-trip to the nanosecond and come back in UTC; the zero time
//     round-trips as the zero time.
//   - JSON fields (Conversation.Metadata, ToolCall.Arguments and Result,
//     Event.Data) come back byte for byte as given, whitespace and key order
//     included; nil comes back as nil; invalid JSON is EINVALID.
//   - Inserting an id that exists is ECONFLICT; referring to a conversation
//     or run that does not exist is ENOTFOUND.
//   - Every method is one transaction: when it fails, nothing it would have
//     written (rows or events) is visible, and sequence numbers stay
//     gapless.
//   - Event sequence numbers start at 1 per conversation and increase by
//     exactly 1, also under concurrent writers.
//   - Group commit: writes that arrive while a commit is in flight share
//     the next one; each caller is told only its own events, its events of
//     one conversation with consecutive seqs; a failed commit fails every
//     caller in it and stores nothing of theirs; a caller's own failure
//     (ECONFLICT, ENOTFOUND) fails no other caller of its group, and of
//     concurrent conditional transitions of one call exactly one wins
//     (group.go).
//   - Events with limit <= 0 returns every event after afterSeq.
//   - LastSeq is the Seq of the newest event of that conversation, 0 for
//     none or no such conversation.
//   - UpdateToolCall with an empty From is EINVALID: a call's transitions
//     are always conditional.
//   - Every event a method returns carries its feed Position, as Events
//     and EventsAfter return it later. Positions are unique and strictly increase in the
//     order appends commit, across conversations and under concurrent
//     writers; within a conversation their order is Seq order. They need not
//     be gapless.
//   - EventsAfter returns exactly the events after its cursor that match
//     its filter, in position order, at most its limit.
//   - A feed consumer's position survives closing and reopening the store
//     and never moves backwards.
//   - A protocol thread binding is scoped by tenant, project, API key and
//     protocol, and the first binding of a thread wins, also under
//     concurrent binders.
//   - Webhook deliveries keep their body byte for byte; enqueueing an id
//     again changes nothing; a claimed delivery is claimed by no one else
//     until its lease lapses; attempts come back in order; a tenant's
//     project's queue depth counts its own pending deliveries only.
//   - A scheduled tool's tick is claimed once, also under concurrent
//     claimers (replicas); each claim is told the tool's previous tick.
//   - A run's lease goes to one owner at a time, also under concurrent
//     owners, until it expires or is released; a finished run has none.
//   - A durable tool's journaled child is recorded once per tenant, call
//     and ordinal; the first entry stays.
//   - The link secret is the first one stored; a link is spent once, also
//     under concurrent spenders.
//   - A grant commits with the approval that makes it, and is found only
//     while live, in its tenant, project, tool and scope; it is revoked once.
//   - An input is created with its call's park and resolved once, also
//     under concurrent answers (the losers get ECONFLICT with the stored
//     answer); a run waiting on one is not a run to drive.
//   - A filter naming another tenant's or project's conversation or call
//     (the pending list, the audit log) reads nothing of it.
package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// Backend opens the stores the suite runs against.
type Backend struct {
	// Open must return a new, empty, usable store for each call and
	// arrange for it to be closed when t ends (t.Cleanup).
	Open func(t *testing.T) agentd.Store
	// Reopen must close s, a store Open returned, and return a new handle
	// on the same database (as a restarted process would open it),
	// likewise closed when t ends. Only RunEventLog uses it.
	Reopen func(t *testing.T, s agentd.Store) agentd.Store
	// BeforeCommit, when set, installs h on s, a store Open returned: the
	// backend calls h before each commit it makes of a group of writes
	// (see agentd.Store's group commit), with the number of callers in the
	// group, and when h returns an error it fails that commit as a failed
	// COMMIT would — nothing of the group is written and every caller in
	// it gets an error wrapping h's (errors.Is). h may block: writes that
	// arrive meanwhile wait for the next commit. The group-commit cases of
	// RunEventLog and RunToolCalls use it to queue writers behind a held
	// commit and to fail one on purpose; without it they run unheld and
	// the forced failure is skipped.
	BeforeCommit func(t *testing.T, s agentd.Store, h func(group int) error)
}

// t0 has nanoseconds and a zone other than UTC, so a store that drops
// either fails the round trips.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("UTC+05:30", 5*3600+30*60))

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func testPing(t *testing.T, s agentd.Store) {
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// wantCode fails unless err carries code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := agentd.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// noErr fails on a non-nil error.
func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// sameTime fails unless got is the instant want, in UTC.
func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %s, want %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
	if !got.IsZero() && got.Location() != time.UTC {
		t.Errorf("%s location = %s, want UTC", what, got.Location())
	}
}

// sameJSON fails unless got is byte for byte want.
func sameJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if string(got) != string(want) || (got == nil) != (want == nil) {
		t.Errorf("%s = %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}

// newConversation stores a new conversation.
func newConversation(t *testing.T, s agentd.Store) *agentd.Conversation {
	t.Helper()
	c := &agentd.Conversation{
		ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant", ProjectID: "project", Agent: "agent",
		CreatedAt: t0,
	}
	noErr(t, s.CreateConversation(context.Background(), c), "CreateConversation")
	return c
}

// startRun starts a new running run on conv with a user message.
func startRun(t *testing.T, s agentd.Store, conv *agentd.Conversation) *agentd.Run {
	t.Helper()
	run := &agentd.Run{
		ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: conv.TenantID, ProjectID: conv.ProjectID,
		CorrelationID: "corr-" + conv.ID, Status: agentd.RunRunning, CreatedAt: t0, UpdatedAt: t0,
	}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID,
		Role: agentd.RoleUser, Content: "hello", CreatedAt: t0}
	_, err := s.StartRun(context.Background(), run, msg, nil)
	noErr(t, err, "StartRun")
	return run
}

// finishRun moves run to completed.
func finishRun(t *testing.T, s agentd.Store, run *agentd.Run) {
	t.Helper()
	_, _, err := s.UpdateRun(context.Background(), agentd.RunUpdate{
		ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning, agentd.RunWaiting}, Status: agentd.RunCompleted, Now: t0,
	}, nil)
	noErr(t, err, "UpdateRun to completed")
}

// newCall returns an unsaved call of run at (step, index) in status.
func newCall(run *agentd.Run, step, index int, status agentd.CallStatus) *agentd.ToolCall {
	return &agentd.ToolCall{
		ID: agentd.NewID(agentd.PrefixToolCall), TenantID: run.TenantID, ProjectID: run.ProjectID,
		ConversationID: run.ConversationID, RunID: run.ID, CorrelationID: run.CorrelationID,
		Step: step, Index: index, Name: "tool", ServerID: "server",
		Arguments: json.RawMessage(`{"x":1}`), ArgumentsSHA256: "digest", Tier: agentd.TierConfirm,
		Status: status, Method: "TOOL", Endpoint: "tool", CreatedAt: t0, UpdatedAt: t0,
	}
}

// deadlineCall stores the call of run at (1, index) in status with deadline
// (nil: none).
func deadlineCall(t *testing.T, s agentd.Store, run *agentd.Run, index int, deadline *time.Time, status agentd.CallStatus) *agentd.ToolCall {
	t.Helper()
	c := newCall(run, 1, index, status)
	c.RequiresApprovalAt = deadline
	createCalls(t, s, c)
	return c
}

// ptr is a pointer to a copy of tm.
func ptr(tm time.Time) *time.Time { return &tm }

// createCalls stores calls.
func createCalls(t *testing.T, s agentd.Store, calls ...*agentd.ToolCall) {
	t.Helper()
	_, err := s.CreateToolCalls(context.Background(), calls, nil)
	noErr(t, err, "CreateToolCalls")
}

// draft returns an event draft for conv with the given data.
func draft(conv, typ, data string) agentd.EventDraft {
	return agentd.EventDraft{ConversationID: conv, Type: typ, Data: json.RawMessage(data)}
}

// allEvents returns every event of conv.
func allEvents(t *testing.T, s agentd.Store, conv string) []agentd.Event {
	t.Helper()
	evs, err := s.Events(context.Background(), conv, 0, 0)
	noErr(t, err, "Events")
	return evs
}

// wantSeqs fails unless evs have exactly the sequence numbers want.
func wantSeqs(t *testing.T, what string, evs []agentd.Event, want ...int64) {
	t.Helper()
	got := make([]int64, len(evs))
	for i, e := range evs {
		got[i] = e.Seq
	}
	if len(got) != len(want) {
		t.Fatalf("%s: seqs %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: seqs %v, want %v", what, got, want)
		}
	}
}

// ids returns the ids of calls, in order.
func ids(calls []agentd.ToolCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.ID
	}
	return out
}

// wantIDs fails unless got is exactly want, in order.
func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}
