package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// The queries that keep start-up and deadlines proportional to what must
// happen now (docs/loop.md): RunsToDrive and NextDeadline.

// stepRun records step of run with one call per status and then sets the
// run to waiting, as the loop leaves a run whose step has unresolved calls.
// It returns the calls.
func stepRun(t *testing.T, s agentd.Store, run *agentd.Run, step int, statuses ...agentd.CallStatus) []*agentd.ToolCall {
	t.Helper()
	ctx := context.Background()
	calls := make([]*agentd.ToolCall, len(statuses))
	for i, st := range statuses {
		calls[i] = newCall(run, step, i, st)
	}
	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: step, Calls: calls, Now: t0}, nil)
	noErr(t, err, "RecordStep")
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting, Now: t0}, nil)
	noErr(t, err, "UpdateRun to waiting")
	return calls
}

// runsToDrive returns the ids of RunsToDrive, sorted.
func runsToDrive(t *testing.T, s agentd.Store) []string {
	t.Helper()
	runs, err := s.RunsToDrive(context.Background())
	noErr(t, err, "RunsToDrive")
	got := make([]string, len(runs))
	for i, r := range runs {
		if !r.Status.Active() {
			t.Errorf("RunsToDrive returned run %s in status %s", r.ID, r.Status)
		}
		got[i] = r.ID
	}
	slices.Sort(got)
	return got
}

func sorted(ids ...string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func testRunsToDrive(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	wantIDs(t, "RunsToDrive on an empty store", runsToDrive(t, s))

	run := func() *agentd.Run { return startRun(t, s, newConversation(t, s)) }
	P, C, D, E, X := agentd.StatusRequiresConfirmation, agentd.StatusCompleted, agentd.StatusDenied, agentd.StatusExpired, agentd.StatusCancelled

	// Returned: a running run, also one with a parked call (it must be
	// marked waiting); a waiting run whose current step has no parked call
	// left; a waiting run without calls.
	running := run()
	runningParked := run()
	stepRun(t, s, runningParked, 1, P)
	_, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: runningParked.ID, Status: agentd.RunRunning, Now: t0}, nil)
	noErr(t, err, "UpdateRun to running")
	resolved := run()
	stepRun(t, s, resolved, 1, C, D, E, X)
	bare := run()
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: bare.ID, Status: agentd.RunWaiting, Now: t0}, nil)
	noErr(t, err, "UpdateRun to waiting")
	// Only the current step counts: a parked call of an earlier step does
	// not hold the run.
	stale := run()
	stepRun(t, s, stale, 1, P)
	_, err = s.RecordStep(ctx, agentd.StepRecord{RunID: stale.ID, Step: 2, Calls: []*agentd.ToolCall{newCall(stale, 2, 0, C)}, Now: t0}, nil)
	noErr(t, err, "RecordStep 2")
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: stale.ID, Status: agentd.RunWaiting, Now: t0}, nil)
	noErr(t, err, "UpdateRun to waiting")

	// Not returned: waiting runs with a parked call at their current step,
	// alone or beside resolved and executing calls; finished runs, even
	// with a parked call.
	parked := run()
	parkedCalls := stepRun(t, s, parked, 1, P)
	mixed := run()
	stepRun(t, s, mixed, 1, C, P, agentd.StatusExecuting)
	for _, end := range []agentd.RunStatus{agentd.RunCompleted, agentd.RunFailed, agentd.RunCancelled} {
		r := run()
		stepRun(t, s, r, 1, P)
		_, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: r.ID, Status: end, Now: t0}, nil)
		noErr(t, err, "UpdateRun to "+string(end))
	}

	want := []string{running.ID, runningParked.ID, resolved.ID, bare.ID, stale.ID}
	wantIDs(t, "RunsToDrive", runsToDrive(t, s), sorted(want...)...)

	// Once its last parked call is decided, the waiting run is returned.
	_, _, err = s.UpdateToolCall(ctx, agentd.CallUpdate{ID: parkedCalls[0].ID, From: []agentd.CallStatus{P}, Status: D, Now: t0}, nil)
	noErr(t, err, "UpdateToolCall")
	wantIDs(t, "RunsToDrive after the decision", runsToDrive(t, s), sorted(append(want, parked.ID)...)...)

	// The runs come back whole.
	runs, err := s.RunsToDrive(ctx)
	noErr(t, err, "RunsToDrive")
	for _, r := range runs {
		if r.ID == resolved.ID && (r.Step != 1 || r.Status != agentd.RunWaiting || r.ConversationID != resolved.ConversationID || r.CorrelationID != resolved.CorrelationID) {
			t.Errorf("RunsToDrive returned %+v", r)
		}
	}
}

// testRunsToDriveCountsParked: a waiting run is held by the number of its
// parked calls at its step, kept by every write that parks a call, takes
// one out of requires_confirmation or moves the run to another step.
func testRunsToDriveCountsParked(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run := func() *agentd.Run { return startRun(t, s, newConversation(t, s)) }
	P, A := agentd.StatusRequiresConfirmation, agentd.StatusApproved
	update := func(what string, u agentd.CallUpdate) {
		t.Helper()
		u.Now = t0
		_, _, err := s.UpdateToolCall(ctx, u, nil)
		noErr(t, err, what)
	}
	moveTo := func(r *agentd.Run, step int) {
		t.Helper()
		_, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: r.ID, Status: agentd.RunWaiting, Step: &step, Now: t0}, nil)
		noErr(t, err, "UpdateRun to step")
	}

	// Two parked calls: deciding one leaves the run waiting for the other;
	// deciding both, in one transaction, lets it go.
	two, three := run(), run()
	twoCalls := stepRun(t, s, two, 1, P, P)
	threeCalls := stepRun(t, s, three, 1, P, P, P)
	update("decide the first of two", agentd.CallUpdate{ID: twoCalls[0].ID, From: []agentd.CallStatus{P}, Status: A})
	_, _, err := s.UpdateToolCalls(ctx, []agentd.CallUpdate{
		{ID: threeCalls[0].ID, From: []agentd.CallStatus{P}, Status: agentd.StatusDenied, Now: t0},
		{ID: threeCalls[1].ID, From: []agentd.CallStatus{P}, Status: agentd.StatusExpired, Now: t0},
	}, nil)
	noErr(t, err, "UpdateToolCalls")
	wantIDs(t, "RunsToDrive with one call of each run still parked", runsToDrive(t, s))
	update("decide the second of two", agentd.CallUpdate{ID: twoCalls[1].ID, From: []agentd.CallStatus{P}, Status: A})
	wantIDs(t, "RunsToDrive after the last of two was decided", runsToDrive(t, s), two.ID)

	// A call parked again (into requires_confirmation from another
	// status), and a parked call created at the run's step, hold it.
	update("park an approved call again", agentd.CallUpdate{ID: twoCalls[0].ID, From: []agentd.CallStatus{A}, Status: P})
	wantIDs(t, "RunsToDrive after a call was parked again", runsToDrive(t, s))
	update("decide it", agentd.CallUpdate{ID: twoCalls[0].ID, From: []agentd.CallStatus{P}, Status: A})
	// requires_input holds a run as requires_confirmation does, whichever
	// write moves a call into or out of it.
	I := agentd.StatusRequiresInput
	update("make a call wait for input", agentd.CallUpdate{ID: twoCalls[0].ID, From: []agentd.CallStatus{A}, Status: I})
	wantIDs(t, "RunsToDrive after a call waits for input", runsToDrive(t, s))
	update("end its wait", agentd.CallUpdate{ID: twoCalls[0].ID, From: []agentd.CallStatus{I}, Status: agentd.StatusCompleted})
	wantIDs(t, "RunsToDrive after the call's wait ended", runsToDrive(t, s), two.ID)
	created := run()
	stepRun(t, s, created, 1, agentd.StatusCompleted)
	wantIDs(t, "RunsToDrive", runsToDrive(t, s), sorted(two.ID, created.ID)...)
	createCalls(t, s, newCall(created, 1, 1, P))
	wantIDs(t, "RunsToDrive after a parked call was created", runsToDrive(t, s), two.ID)

	// Moved to another step, a run counts that step's parked calls.
	moveTo(created, 2)
	wantIDs(t, "RunsToDrive after moving to a step with nothing parked", runsToDrive(t, s), sorted(two.ID, created.ID)...)
	moveTo(created, 1)
	wantIDs(t, "RunsToDrive after moving back to the parked step", runsToDrive(t, s), two.ID)

	// A cancelled run is never returned, and a run started anew in its
	// conversation is not held by the cancelled run's calls.
	_, _, err = s.CancelRun(ctx, three.ID, "stop", agentd.Actor{KeyID: "key"}, t0, nil)
	noErr(t, err, "CancelRun")
	wantIDs(t, "RunsToDrive after a cancel", runsToDrive(t, s), two.ID)
}

func testNextDeadline(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	next := func(what string, want time.Time) {
		t.Helper()
		got, err := s.NextDeadline(ctx, time.Time{})
		noErr(t, err, "NextDeadline")
		sameTime(t, "NextDeadline "+what, got, want)
	}
	after := func(what string, after, want time.Time) {
		t.Helper()
		got, err := s.NextDeadline(ctx, after)
		noErr(t, err, "NextDeadline")
		sameTime(t, "NextDeadline after "+what, got, want)
	}
	next("on an empty store", time.Time{})

	run := startRun(t, s, newConversation(t, s))
	call := func(index int, deadline *time.Time, status agentd.CallStatus) *agentd.ToolCall {
		return deadlineCall(t, s, run, index, deadline, status)
	}
	call(0, nil, agentd.StatusRequiresConfirmation)
	next("with a parked call without a deadline", time.Time{})

	// Only parked calls count, not calls that were decided or expired.
	call(1, ptr(at(-2*time.Hour)), agentd.StatusApproved)
	call(2, ptr(at(-time.Hour)), agentd.StatusExpired)
	later := call(3, ptr(at(time.Hour)), agentd.StatusRequiresConfirmation)
	soon := call(4, ptr(at(time.Second+1)), agentd.StatusRequiresConfirmation)
	call(5, ptr(at(2*time.Hour)), agentd.StatusRequiresConfirmation)
	next("", at(time.Second+1))
	// After an instant: strictly after it (the next reminder at an offset).
	after("one before the earliest", at(time.Second), at(time.Second+1))
	after("the earliest", at(time.Second+1), at(time.Hour))
	after("the last", at(2*time.Hour), time.Time{})

	// When the earliest leaves requires_confirmation, the next one is due.
	_, _, err := s.UpdateToolCall(ctx, agentd.CallUpdate{ID: soon.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation},
		Status: agentd.StatusExpired, Now: t0}, nil)
	noErr(t, err, "UpdateToolCall")
	next("after the earliest expired", later.RequiresApprovalAt.UTC())

	// A past deadline is returned as it is: the caller expires it.
	call(6, ptr(at(-time.Minute)), agentd.StatusRequiresConfirmation)
	next("with a past deadline", at(-time.Minute))
}
