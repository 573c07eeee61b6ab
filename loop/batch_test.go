package loop_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
)

// parkPays parks n pay calls, each in a run of its own conversation, and
// returns their ids and run ids.
func parkPays(t *testing.T, f *parkFixture, n int) (calls, runs []string) {
	t.Helper()
	for i := range n {
		runs = append(runs, f.send(t, "pay"))
		calls = append(calls, f.parked(t, i+1))
	}
	return calls, runs
}

func approveItem(id string) agentd.BatchDecisionItem {
	return agentd.BatchDecisionItem{ToolCallID: id, Approve: true}
}

// wantResults fails unless the results are, in order, of the calls ids with
// the statuses (and, for failures, the error codes) want: "applied",
// "not_applied" or the code of a failed item.
func wantResults(t *testing.T, got []agentd.BatchDecisionResult, ids []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		status := r.Status
		if r.Status == agentd.BatchFailed {
			status = r.Error.Code
		}
		if r.ToolCallID != ids[i] || status != want[i] {
			t.Errorf("result %d = %s %s %+v, want %s %s", i, r.ToolCallID, r.Status, r.Error, ids[i], want[i])
		}
		if (r.Status == agentd.BatchApplied) != (r.Decision != nil) || (r.Status != agentd.BatchApplied) != (r.Error != nil) {
			t.Errorf("result %d: status %s with decision %v and error %v", i, r.Status, r.Decision, r.Error)
		}
	}
}

func callStatus(t *testing.T, f *parkFixture, id string) agentd.CallStatus {
	t.Helper()
	c, err := f.engine.ToolCall(context.Background(), f.p, id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Status
}

// A batch without atomic applies each good item and reports each bad one
// with the error the single route gives it; another tenant's call reads
// exactly as a call that does not exist.
func TestDecideBatchAppliesEachItem(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	calls, runs := parkPays(t, f, 3)
	other := agentd.Principal{TenantID: "t2", ProjectID: "p1", Role: agentd.RoleOperator, KeyID: "k2"}
	conv, err := f.engine.CreateConversation(context.Background(), other, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Send(context.Background(), other, conv.ID, "pay"); err != nil {
		t.Fatal(err)
	}
	foreign := f.parked(t, 4)
	ghost := agentd.NewID(agentd.PrefixToolCall)
	items := []agentd.BatchDecisionItem{
		approveItem(calls[0]),
		{ToolCallID: calls[1], Approve: false, Reason: "not today"},
		{ToolCallID: calls[2], Approve: true, ArgumentsSHA256: strings.Repeat("0", 64)},
		approveItem(ghost),
		approveItem(foreign),
		approveItem("not-an-id"),
	}
	ids := []string{calls[0], calls[1], calls[2], ghost, foreign, "not-an-id"}
	got, err := f.engine.DecideBatch(context.Background(), f.p, items, false)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, got, ids, agentd.BatchApplied, agentd.BatchApplied, agentd.ESTALE, agentd.ENOTFOUND, agentd.ENOTFOUND, agentd.EINVALID)
	if got[3].Error.Message != got[4].Error.Message {
		t.Errorf("another tenant's call reads %q, a ghost %q: they must read the same", got[4].Error.Message, got[3].Error.Message)
	}
	if d := got[0].Decision; d.Via != agentd.ViaBulk || d.Role != agentd.RoleClient || d.DecidedBy != "k1" {
		t.Errorf("bulk decision = %+v, want via bulk by k1 (client)", d)
	}
	f.finished(t, 2, runs[0], calls[0], agentd.StatusCompleted) // both runs finished
	f.finished(t, 2, runs[1], calls[1], agentd.StatusDenied)
	if st := callStatus(t, f, calls[2]); st != agentd.StatusRequiresConfirmation {
		t.Errorf("stale item: %s, want still pending", st)
	}
	// The same batch again: the applied items answer the same decisions
	// (idempotent), nothing runs twice.
	again, err := f.engine.DecideBatch(context.Background(), f.p, items[:2], false)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, again, ids[:2], agentd.BatchApplied, agentd.BatchApplied)
	if again[0].Decision.ID != got[0].Decision.ID || again[1].Decision.ID != got[1].Decision.ID {
		t.Errorf("repeat answered other decisions: %s %s, want %s %s", again[0].Decision.ID, again[1].Decision.ID, got[0].Decision.ID, got[1].Decision.ID)
	}
	// A different decision on a decided call is a conflict.
	flip, err := f.engine.DecideBatch(context.Background(), f.p, []agentd.BatchDecisionItem{{ToolCallID: calls[0]}}, false)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, flip, calls[:1], agentd.ECONFLICT)
	if n := f.tool.count(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// An atomic batch with one bad item applies nothing and says which item
// failed; the same batch without the bad item applies all of it in one
// transaction, and repeating it changes nothing.
func TestDecideBatchAtomic(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	calls, runs := parkPays(t, f, 3)
	resolvedBefore := f.rec.count(agentd.EventConfirmationResolved)
	bad := []agentd.BatchDecisionItem{approveItem(calls[0]), approveItem(calls[1]),
		{ToolCallID: calls[2], Approve: true, ArgumentsSHA256: strings.Repeat("a", 64)}}
	got, err := f.engine.DecideBatch(context.Background(), f.p, bad, true)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, got, calls, agentd.BatchNotApplied, agentd.BatchNotApplied, agentd.ESTALE)
	if got[0].Error.Code != agentd.ENOTAPPLIED || !strings.Contains(got[0].Error.Message, "approvals[2]") {
		t.Errorf("not applied item says %+v, want it to name approvals[2]", got[0].Error)
	}
	for _, id := range calls {
		if st := callStatus(t, f, id); st != agentd.StatusRequiresConfirmation {
			t.Errorf("after a failed atomic batch %s is %s", id, st)
		}
	}
	if n := f.rec.count(agentd.EventConfirmationResolved); n != resolvedBefore {
		t.Errorf("a failed atomic batch published %d confirmation_resolved", n-resolvedBefore)
	}

	good := []agentd.BatchDecisionItem{approveItem(calls[0]), approveItem(calls[1]), {ToolCallID: calls[2], Reason: "no"}}
	got, err = f.engine.DecideBatch(context.Background(), f.p, good, true)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, got, calls, agentd.BatchApplied, agentd.BatchApplied, agentd.BatchApplied)
	f.rec.wait(t, agentd.EventRunFinished, 3)
	for i, want := range []agentd.CallStatus{agentd.StatusCompleted, agentd.StatusCompleted, agentd.StatusDenied} {
		f.finished(t, 3, runs[i], calls[i], want)
	}
	again, err := f.engine.DecideBatch(context.Background(), f.p, good, true)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, again, calls, agentd.BatchApplied, agentd.BatchApplied, agentd.BatchApplied)
	if again[2].Decision.ID != got[2].Decision.ID {
		t.Errorf("repeat of an atomic batch answered decision %s, want %s", again[2].Decision.ID, got[2].Decision.ID)
	}
	if n := f.tool.count(); n != 2 {
		t.Errorf("the tool ran %d times, want 2", n)
	}
}

// Twenty concurrent batches, atomic and not, naming the same call: exactly
// one execution, and every batch answers the one stored decision.
func TestDecideBatchConcurrent(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	calls, runs := parkPays(t, f, 1)
	const n = 20
	results := make([][]agentd.BatchDecisionResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f.engine.DecideBatch(context.Background(), f.p, []agentd.BatchDecisionItem{approveItem(calls[0])}, i%2 == 0)
		})
	}
	close(start)
	wg.Wait()
	f.finished(t, 1, runs[0], calls[0], agentd.StatusCompleted)
	decision := ""
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("batch %d: %v", i, errs[i])
		}
		r := results[i][0]
		if r.Status != agentd.BatchApplied {
			t.Fatalf("batch %d: %+v", i, r)
		}
		if decision == "" {
			decision = r.Decision.ID
		} else if r.Decision.ID != decision {
			t.Errorf("batch %d answered decision %s, another %s", i, r.Decision.ID, decision)
		}
	}
	if c := f.tool.count(); c != 1 {
		t.Fatalf("the tool ran %d times, want exactly 1", c)
	}
}

func TestDecideBatchRefusesBadBatches(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	calls, _ := parkPays(t, f, 1)
	many := make([]agentd.BatchDecisionItem, agentd.MaxBatchDecisions+1)
	for i := range many {
		many[i] = approveItem(agentd.NewID(agentd.PrefixToolCall))
	}
	delegate := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleDelegate, KeyID: "kd"}
	for _, c := range []struct {
		name  string
		p     agentd.Principal
		items []agentd.BatchDecisionItem
		code  string
		msg   string
	}{
		{"empty", f.p, nil, agentd.EINVALID, "at least one"},
		{"too many", f.p, many, agentd.EINVALID, fmt.Sprintf("at most %d", agentd.MaxBatchDecisions)},
		{"duplicate", f.p, []agentd.BatchDecisionItem{approveItem(calls[0]), {ToolCallID: calls[0]}}, agentd.EINVALID, "approvals[1]"},
		{"delegate", delegate, []agentd.BatchDecisionItem{approveItem(calls[0])}, agentd.EFORBIDDEN, "delegate"},
	} {
		for _, atomic := range []bool{false, true} {
			_, err := f.engine.DecideBatch(context.Background(), c.p, c.items, atomic)
			if agentd.ErrorCode(err) != c.code || !strings.Contains(agentd.ErrorMessage(err), c.msg) {
				t.Errorf("%s (atomic %v): %v, want %s mentioning %q", c.name, atomic, err, c.code, c.msg)
			}
		}
	}
	if st := callStatus(t, f, calls[0]); st != agentd.StatusRequiresConfirmation {
		t.Errorf("a refused batch changed the call: %s", st)
	}
}

// The audit log is for operator and admin keys; it lists the decisions of
// their tenant and project only.
func TestAuditRoles(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	calls, _ := parkPays(t, f, 1)
	f.approve(t, calls[0])
	op := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator, KeyID: "op"}
	if _, _, err := f.engine.Audit(context.Background(), f.p, agentd.AuditQuery{}); agentd.ErrorCode(err) != agentd.EFORBIDDEN {
		t.Errorf("a client key reads the audit log: %v", err)
	}
	es, next, err := f.engine.Audit(context.Background(), op, agentd.AuditQuery{Kind: agentd.AuditDecision})
	if err != nil || len(es) != 1 || next != 0 {
		t.Fatalf("operator audit: %+v %d %v", es, next, err)
	}
	if e := es[0]; e.ToolCallID != calls[0] || e.KeyID != "k1" || e.Role != agentd.RoleClient || e.Via != agentd.ViaSingle || e.Decision != agentd.DecisionApproved {
		t.Errorf("audit entry = %+v", e)
	}
	otherTenant := agentd.Principal{TenantID: "t2", ProjectID: "p1", Role: agentd.RoleAdmin, KeyID: "a2"}
	if es, _, err := f.engine.Audit(context.Background(), otherTenant, agentd.AuditQuery{}); err != nil || len(es) != 0 {
		t.Errorf("another tenant's admin reads %d entries (%v)", len(es), err)
	}
	for _, q := range []agentd.AuditQuery{{Kind: "nope"}, {Limit: 101}, {ToolCallID: "x"}, {ConversationID: "x"}, {Cursor: -1}} {
		if _, _, err := f.engine.Audit(context.Background(), op, q); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("audit %+v: %v, want invalid", q, err)
		}
	}
}

// Edited arguments in a batch are re-validated and re-classified as in a
// single approval: an edit that escalates fails its item (and, atomic, the
// whole batch, refusal included); without atomic it refuses that call
// only, and the good edit runs as edited.
func TestDecideBatchEdits(t *testing.T) {
	f := newPark(t, "", parkOpts{})
	calls := []string{}
	for i := range 2 {
		f.send(t, "refund")
		calls = append(calls, f.parked(t, i+1))
	}
	edit := func(id, amount string) agentd.BatchDecisionItem {
		return agentd.BatchDecisionItem{ToolCallID: id, Approve: true, Arguments: []byte(
			`{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"amount":` + amount + `},"intent":"write"}`)}
	}
	items := []agentd.BatchDecisionItem{edit(calls[0], "7"), edit(calls[1], "500")}
	got, err := f.engine.DecideBatch(context.Background(), f.p, items, true)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, got, calls, agentd.BatchNotApplied, agentd.EFORBIDDEN)
	for _, id := range calls {
		if st := callStatus(t, f, id); st != agentd.StatusRequiresConfirmation {
			t.Fatalf("after a failed atomic batch of edits %s is %s", id, st)
		}
	}
	got, err = f.engine.DecideBatch(context.Background(), f.p, items, false)
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, got, calls, agentd.BatchApplied, agentd.EFORBIDDEN)
	if got[0].Decision.EditedArgumentsSHA256 == "" {
		t.Errorf("the edited approval records no edited digest: %+v", got[0].Decision)
	}
	f.rec.wait(t, agentd.EventRunFinished, 2)
	if st := callStatus(t, f, calls[1]); st != agentd.StatusRefused {
		t.Errorf("the escalating edit left the call %s, want refused", st)
	}
	c, err := f.engine.ToolCall(context.Background(), f.p, calls[0])
	if err != nil || c.Status != agentd.StatusCompleted || !strings.Contains(string(c.Arguments), `"amount":7`) {
		t.Errorf("the edited call: %+v %v, want completed with amount 7", c, err)
	}
}
