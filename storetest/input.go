package storetest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// This file is the contract of input requests (SPEC §12): an input is
// created with its call's park, in the step's transaction; a run waiting
// on one is held (RunsToDrive leaves it); it is resolved once, with its
// call, by conditional updates — of concurrent answers exactly one
// commits and the rest get ECONFLICT with the stored answer; a cancelled
// run cancels its pending inputs; the list is a tenant's and project's.

// RunInputs tests the InputStore role and StepRecord.Inputs.
func RunInputs(t *testing.T, open func(t *testing.T) agentd.Store) {
	runCases(t, open, []testCase{
		{"Input/WithStep", testInputWithStep},
		{"Input/StepErrors", testInputStepErrors},
		{"Input/HoldsRun", testInputHoldsRun},
		{"Input/Resolve", testInputResolve},
		{"Input/ResolveConcurrent", testInputResolveConcurrent},
		{"Input/CancelRun", testInputCancelRun},
		{"Input/List", testInputList},
		{"Input/Due", testInputDue},
	})
}

var inputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)

// newInput is an unsaved pending input of call c.
func newInput(c *agentd.ToolCall) *agentd.Input {
	return &agentd.Input{ID: agentd.NewID(agentd.PrefixInput), ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID,
		Status: agentd.InputPending, Source: agentd.InputSourceAskUser, Key: "ask_user", Round: 1, Mode: agentd.InputModeForm,
		Message: "How many?", Schema: inputSchema, Answerers: []string{agentd.ApproverOwner},
		ExpiresAt: at(15 * time.Minute), CreatedAt: t0}
}

// askStep records step 1 of a new run of conv with one call waiting on
// an input, and sets the run waiting. It returns the run, call and input.
func askStep(t *testing.T, s agentd.Store, conv *agentd.Conversation) (*agentd.Run, *agentd.ToolCall, *agentd.Input) {
	t.Helper()
	ctx := context.Background()
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresInput)
	in := newInput(c)
	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Calls: []*agentd.ToolCall{c}, Inputs: []*agentd.Input{in}, Now: t0},
		[]agentd.EventDraft{draft(conv.ID, agentd.EventInputRequired, `{"n":1}`)})
	noErr(t, err, "RecordStep with an input")
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting, Now: t0}, nil)
	noErr(t, err, "UpdateRun to waiting")
	return run, c, in
}

// accept is the resolution of in accepted with content by key.
func accept(in *agentd.Input, key, content string) agentd.InputResolution {
	return agentd.InputResolution{InputID: in.ID, Status: agentd.InputAnswered, Action: agentd.InputAccept,
		Content: json.RawMessage(content), AnsweredBy: key, Via: agentd.ViaSingle, At: at(time.Minute),
		CallStatus: agentd.StatusCompleted, Result: json.RawMessage(`{"action":"accept","content":` + content + `}`)}
}

// testInputWithStep: the input comes back as created, with its call's
// tenant, project, conversation and run, in UTC; the call is requires_input.
func testInputWithStep(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run, c, in := askStep(t, s, conv)
	got, err := s.Input(ctx, in.ID)
	noErr(t, err, "Input")
	if got.TenantID != conv.TenantID || got.ProjectID != conv.ProjectID || got.ConversationID != conv.ID || got.RunID != run.ID ||
		got.ToolCallID != c.ID || got.Status != agentd.InputPending || got.Source != agentd.InputSourceAskUser || got.Key != "ask_user" ||
		got.Round != 1 || got.Mode != agentd.InputModeForm || got.Message != "How many?" || len(got.Answerers) != 1 ||
		got.Answerers[0] != agentd.ApproverOwner || got.Action != "" || got.AnsweredAt != nil {
		t.Errorf("Input = %+v", got)
	}
	sameJSON(t, "schema", got.Schema, inputSchema)
	sameJSON(t, "content", got.Content, nil)
	sameTime(t, "expires_at", got.ExpiresAt, in.ExpiresAt)
	sameTime(t, "created_at", got.CreatedAt, t0)
	call, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if call.Status != agentd.StatusRequiresInput {
		t.Errorf("call status = %s, want requires_input", call.Status)
	}
	_, err = s.Input(ctx, agentd.NewID(agentd.PrefixInput))
	wantCode(t, err, agentd.ENOTFOUND)
}

// testInputStepErrors: an input of a call that is not the step's, or not
// requires_input, or not pending is EINVALID and nothing of the step is
// written; an input id that exists is ECONFLICT.
func testInputStepErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	c := newCall(run, 1, 0, agentd.StatusRequiresInput)
	other := newCall(run, 1, 1, agentd.StatusApproved)
	answered := newInput(c)
	answered.Status = agentd.InputAnswered
	for name, in := range map[string]*agentd.Input{"foreign call": newInput(newCall(run, 1, 5, agentd.StatusRequiresInput)),
		"approved call": newInput(other), "not pending": answered} {
		_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Calls: []*agentd.ToolCall{c, other}, Inputs: []*agentd.Input{in}, Now: t0}, nil)
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("%s: error = %v, want invalid", name, err)
		}
	}
	if cur, err := s.Run(ctx, run.ID); err != nil || cur.Step != 0 {
		t.Fatalf("run after refused steps = %+v, %v; want step 0", cur, err)
	}
	_, _, in := askStep(t, s, newConversation(t, s))
	run2 := startRun(t, s, newConversation(t, s))
	c2 := newCall(run2, 1, 0, agentd.StatusRequiresInput)
	dup := newInput(c2)
	dup.ID = in.ID
	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run2.ID, Step: 1, Calls: []*agentd.ToolCall{c2}, Inputs: []*agentd.Input{dup}, Now: t0}, nil)
	wantCode(t, err, agentd.ECONFLICT)
}

// testInputHoldsRun: a waiting run whose step waits on an input is not a
// run to drive (runs.parked counts requires_input); once the input is
// answered it is, and a running run with one is too.
func testInputHoldsRun(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run, _, in := askStep(t, s, newConversation(t, s))
	wantIDs(t, "RunsToDrive while the input is pending", runsToDrive(t, s))
	_, _, err := s.ResolveInput(ctx, accept(in, "c1", `{"n":3}`), nil)
	noErr(t, err, "ResolveInput")
	wantIDs(t, "RunsToDrive after the answer", runsToDrive(t, s), run.ID)
}

// testInputResolve: the answer is stored with the input, the call
// completes with the result, the events are appended; a second
// resolution is ECONFLICT with the stored answer and writes nothing; a
// bad resolution is EINVALID; an unknown input ENOTFOUND.
func testInputResolve(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	_, c, in := askStep(t, s, conv)
	r := accept(in, "c1", `{"n":3}`)
	got, evs, err := s.ResolveInput(ctx, r, []agentd.EventDraft{draft(conv.ID, agentd.EventInputResolved, `{"ok":true}`)})
	noErr(t, err, "ResolveInput")
	if got.Status != agentd.InputAnswered || got.Action != agentd.InputAccept || got.AnsweredBy != "c1" || got.Via != agentd.ViaSingle ||
		got.AnsweredAt == nil || len(evs) != 1 {
		t.Fatalf("ResolveInput = %+v, %d events", got, len(evs))
	}
	sameJSON(t, "content", got.Content, r.Content)
	sameTime(t, "answered_at", *got.AnsweredAt, r.At)
	call, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if call.Status != agentd.StatusCompleted {
		t.Errorf("call status = %s, want completed", call.Status)
	}
	sameJSON(t, "result", call.Result, r.Result)

	again := accept(in, "c2", `{"n":4}`)
	stored, evs, err := s.ResolveInput(ctx, again, []agentd.EventDraft{draft(conv.ID, agentd.EventInputResolved, `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	if stored == nil || stored.AnsweredBy != "c1" || string(stored.Content) != `{"n":3}` || evs != nil {
		t.Errorf("second ResolveInput = %+v, %v; want the stored answer", stored, evs)
	}
	if n := len(allEvents(t, s, conv.ID)); n != 2 {
		t.Errorf("events after the refused answer = %d, want 2", n)
	}
	_, _, err = s.ResolveInput(ctx, agentd.InputResolution{InputID: in.ID, Status: agentd.InputPending, CallStatus: agentd.StatusCompleted, At: t0}, nil)
	wantCode(t, err, agentd.EINVALID)
	_, _, err = s.ResolveInput(ctx, agentd.InputResolution{InputID: in.ID, Status: agentd.InputAnswered, CallStatus: agentd.StatusExecuting, At: t0}, nil)
	wantCode(t, err, agentd.EINVALID)
	_, _, err = s.ResolveInput(ctx, accept(&agentd.Input{ID: agentd.NewID(agentd.PrefixInput)}, "c1", `{}`), nil)
	wantCode(t, err, agentd.ENOTFOUND)
}

// testInputResolveConcurrent: of 20 concurrent answers exactly one
// commits; each other gets ECONFLICT naming the winner's answer.
func testInputResolveConcurrent(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	_, _, in := askStep(t, s, conv)
	const n = 20
	errs := make([]error, n)
	got := make([]*agentd.Input, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := "k" + string(rune('a'+i))
			got[i], _, errs[i] = s.ResolveInput(ctx, accept(in, key, `{"n":1}`),
				[]agentd.EventDraft{draft(conv.ID, agentd.EventInputResolved, `{}`)})
		})
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two answers committed: %s and %s", winner, got[i].AnsweredBy)
			}
			winner = got[i].AnsweredBy
		}
	}
	if winner == "" {
		t.Fatal("no answer committed")
	}
	for i, err := range errs {
		if err != nil && (agentd.ErrorCode(err) != agentd.ECONFLICT || got[i] == nil || got[i].AnsweredBy != winner) {
			t.Errorf("answer %d: %v, %+v; want conflict naming %s", i, err, got[i], winner)
		}
	}
	// input_required with the step, and one input_resolved.
	if n := len(allEvents(t, s, conv.ID)); n != 2 {
		t.Errorf("events = %d, want 2", n)
	}
}

// testInputCancelRun: cancelling the run cancels its call and its
// pending input (reason run_cancelled); the plan sees the call with the
// input as it was; the input can no longer be answered.
func testInputCancelRun(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	run, c, in := askStep(t, s, newConversation(t, s))
	var seen []agentd.ToolCall
	_, _, err := s.CancelRun(ctx, run.ID, "cancelled", agentd.Actor{KeyID: "c1", Role: agentd.RoleClient}, at(time.Minute),
		func(_ *agentd.Run, calls []agentd.ToolCall) []agentd.EventDraft {
			seen = calls
			return nil
		})
	noErr(t, err, "CancelRun")
	if len(seen) != 1 || seen[0].ID != c.ID || len(seen[0].Inputs) != 1 || seen[0].Inputs[0].ID != in.ID ||
		seen[0].Inputs[0].Status != agentd.InputPending {
		t.Fatalf("plan saw %+v", seen)
	}
	got, err := s.Input(ctx, in.ID)
	noErr(t, err, "Input")
	if got.Status != agentd.InputCancelled || got.Reason != agentd.InputReasonRunCancelled || got.Via != agentd.ViaCancel {
		t.Errorf("input after cancel = %+v", got)
	}
	call, err := s.ToolCall(ctx, c.ID)
	noErr(t, err, "ToolCall")
	if call.Status != agentd.StatusCancelled {
		t.Errorf("call status = %s, want cancelled", call.Status)
	}
	_, _, err = s.ResolveInput(ctx, accept(in, "c1", `{"n":1}`), nil)
	wantCode(t, err, agentd.ECONFLICT)
}

// testInputList: the list is one tenant's and project's, in id order,
// paged by cursor, filtered by status, conversation, tool and creator.
func testInputList(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	a := newConversation(t, s)
	b := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "tenant", ProjectID: "project",
		Agent: "agent", CreatedBy: "c2", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, b), "CreateConversation")
	other := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "other", ProjectID: "project",
		Agent: "agent", CreatedAt: t0}
	noErr(t, s.CreateConversation(ctx, other), "CreateConversation")
	_, _, ia := askStep(t, s, a)
	_, _, ib := askStep(t, s, b)
	_, _, io := askStep(t, s, other)
	_, _, err := s.ResolveInput(ctx, accept(ia, "c1", `{"n":1}`), nil)
	noErr(t, err, "ResolveInput")

	list := func(f agentd.InputFilter) []string {
		t.Helper()
		f.TenantID, f.ProjectID = "tenant", "project"
		ins, err := s.Inputs(ctx, f)
		noErr(t, err, "Inputs")
		out := make([]string, len(ins))
		for i, in := range ins {
			out[i] = in.ID
		}
		return out
	}
	wantIDs(t, "all", list(agentd.InputFilter{}), ia.ID, ib.ID)
	wantIDs(t, "pending", list(agentd.InputFilter{Status: agentd.InputPending}), ib.ID)
	wantIDs(t, "answered", list(agentd.InputFilter{Status: agentd.InputAnswered}), ia.ID)
	wantIDs(t, "conversation", list(agentd.InputFilter{ConversationID: a.ID}), ia.ID)
	wantIDs(t, "another tenant's conversation", list(agentd.InputFilter{ConversationID: other.ID}))
	wantIDs(t, "tool", list(agentd.InputFilter{ToolName: "tool"}), ia.ID, ib.ID)
	wantIDs(t, "no such tool", list(agentd.InputFilter{ToolName: "nope"}))
	wantIDs(t, "created by c2", list(agentd.InputFilter{CreatedBy: "c2"}), ib.ID)
	wantIDs(t, "page 1", list(agentd.InputFilter{Limit: 1}), ia.ID)
	wantIDs(t, "page 2", list(agentd.InputFilter{Limit: 1, After: ia.ID}), ib.ID)
	ins, err := s.Inputs(ctx, agentd.InputFilter{TenantID: "other", ProjectID: "project"})
	noErr(t, err, "Inputs of the other tenant")
	if len(ins) != 1 || ins[0].ID != io.ID {
		t.Errorf("other tenant's inputs = %v", ins)
	}
	_, err = s.Inputs(ctx, agentd.InputFilter{})
	wantCode(t, err, agentd.EINVALID)
}

// testInputDue: NextInputDeadline is the earliest pending input's
// deadline (zero for none); DueInputs pages the pending inputs due at
// now, earliest first; a resolved input is neither.
func testInputDue(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	next, err := s.NextInputDeadline(ctx)
	noErr(t, err, "NextInputDeadline")
	sameTime(t, "next deadline of none", next, time.Time{})
	_, _, late := askStep(t, s, newConversation(t, s)) // expires at t0+15m
	run := startRun(t, s, newConversation(t, s))
	c := newCall(run, 1, 0, agentd.StatusRequiresInput)
	early := newInput(c)
	early.ExpiresAt = at(5 * time.Minute)
	_, err = s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Calls: []*agentd.ToolCall{c}, Inputs: []*agentd.Input{early}, Now: t0}, nil)
	noErr(t, err, "RecordStep")

	next, err = s.NextInputDeadline(ctx)
	noErr(t, err, "NextInputDeadline")
	sameTime(t, "next deadline", next, early.ExpiresAt)
	due := func(now time.Time, limit int) []string {
		t.Helper()
		ins, err := s.DueInputs(ctx, now, limit)
		noErr(t, err, "DueInputs")
		out := make([]string, len(ins))
		for i, in := range ins {
			out[i] = in.ID
		}
		return out
	}
	wantIDs(t, "due before either", due(at(time.Minute), 10))
	wantIDs(t, "due at the early one", due(early.ExpiresAt, 10), early.ID)
	wantIDs(t, "due at both", due(at(time.Hour), 10), early.ID, late.ID)
	wantIDs(t, "a page of one", due(at(time.Hour), 1), early.ID)
	_, _, err = s.ResolveInput(ctx, accept(early, "c1", `{"n":1}`), nil)
	noErr(t, err, "ResolveInput")
	wantIDs(t, "due after the answer", due(at(time.Hour), 10), late.ID)
	next, err = s.NextInputDeadline(ctx)
	noErr(t, err, "NextInputDeadline")
	sameTime(t, "next deadline after the answer", next, late.ExpiresAt)
}
