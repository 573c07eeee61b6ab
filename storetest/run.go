package storetest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

func testConversationRoundTrip(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	want := &agentd.Conversation{
		ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t1", ProjectID: "p1", Agent: "helper",
		Metadata:  json.RawMessage("{\"b\": 2,\n  \"a\": [1, 2.50, \"\\u00e9\"], \"z\": null}"),
		Delegated: true, CreatedBy: "key-1", CreatedAt: t0,
	}
	noErr(t, s.CreateConversation(ctx, want), "CreateConversation")
	got, err := s.Conversation(ctx, want.ID)
	noErr(t, err, "Conversation")
	if got.ID != want.ID || got.TenantID != want.TenantID || got.ProjectID != want.ProjectID ||
		got.Agent != want.Agent || got.Delegated != want.Delegated || got.CreatedBy != want.CreatedBy {
		t.Errorf("Conversation = %+v, want %+v", got, want)
	}
	sameJSON(t, "Metadata", got.Metadata, want.Metadata)
	sameTime(t, "CreatedAt", got.CreatedAt, want.CreatedAt)

	// Empty metadata and zero time round-trip as nil and zero.
	bare := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation)}
	noErr(t, s.CreateConversation(ctx, bare), "CreateConversation bare")
	got, err = s.Conversation(ctx, bare.ID)
	noErr(t, err, "Conversation bare")
	sameJSON(t, "Metadata", got.Metadata, nil)
	if !got.CreatedAt.IsZero() || got.Delegated {
		t.Errorf("bare conversation = %+v, want zero CreatedAt and not delegated", got)
	}
}

func testConversationErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	wantCode(t, s.CreateConversation(ctx, &agentd.Conversation{}), agentd.EINVALID)
	wantCode(t, s.CreateConversation(ctx, &agentd.Conversation{
		ID: agentd.NewID(agentd.PrefixConversation), Metadata: json.RawMessage(`{"a":`),
	}), agentd.EINVALID)

	c := newConversation(t, s)
	err := s.CreateConversation(ctx, &agentd.Conversation{ID: c.ID, Agent: "other"})
	wantCode(t, err, agentd.ECONFLICT)
	got, err := s.Conversation(ctx, c.ID)
	noErr(t, err, "Conversation")
	if got.Agent != c.Agent {
		t.Errorf("duplicate insert changed the conversation: agent %q, want %q", got.Agent, c.Agent)
	}

	_, err = s.Conversation(ctx, "conv_missing")
	wantCode(t, err, agentd.ENOTFOUND)
}

func testStartRunRoundTrip(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := &agentd.Run{
		ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t1", ProjectID: "p1",
		CorrelationID: "corr-1", Status: agentd.RunRunning, Step: 0, Reason: "",
		Usage: agentd.Usage{InputTokens: 3, OutputTokens: 4}, CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Second),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceCaller: "53995c3f42cd8ad8",
	}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID,
		Role: agentd.RoleUser, Content: "hi there", CreatedAt: at(time.Second)}
	evs, err := s.StartRun(ctx, run, msg, []agentd.EventDraft{
		draft(conv.ID, agentd.EventRunStarted, `{"run_id": "r"}`),
		draft(conv.ID, agentd.EventMessage, `{"n":2}`),
	})
	noErr(t, err, "StartRun")
	wantSeqs(t, "StartRun events", evs, 1, 2)
	if evs[0].Type != agentd.EventRunStarted || evs[0].ConversationID != conv.ID {
		t.Errorf("StartRun event = %+v", evs[0])
	}
	sameJSON(t, "event data", evs[0].Data, json.RawMessage(`{"run_id": "r"}`))

	got, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.ID != run.ID || got.ConversationID != conv.ID || got.TenantID != "t1" || got.ProjectID != "p1" ||
		got.CorrelationID != "corr-1" || got.Status != agentd.RunRunning || got.Step != 0 || got.Usage != run.Usage ||
		got.TraceParent != run.TraceParent || got.TraceCaller != run.TraceCaller {
		t.Errorf("Run = %+v, want %+v", got, run)
	}
	sameTime(t, "CreatedAt", got.CreatedAt, run.CreatedAt)
	sameTime(t, "UpdatedAt", got.UpdatedAt, run.UpdatedAt)

	msgs, err := s.Messages(ctx, conv.ID)
	noErr(t, err, "Messages")
	if len(msgs) != 1 || msgs[0].ID != msg.ID || msgs[0].RunID != run.ID || msgs[0].ConversationID != conv.ID ||
		msgs[0].Role != agentd.RoleUser || msgs[0].Content != "hi there" {
		t.Fatalf("Messages = %+v, want the user message", msgs)
	}
	sameTime(t, "message CreatedAt", msgs[0].CreatedAt, msg.CreatedAt)
	wantSeqs(t, "stored events", allEvents(t, s, conv.ID), 1, 2)
}

func testStartRunOneActive(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	first := startRun(t, s, conv)
	before := allEvents(t, s, conv.ID)

	try := func() (*agentd.Run, *agentd.Message, error) {
		run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, Status: agentd.RunRunning, CreatedAt: t0}
		msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "again"}
		_, err := s.StartRun(ctx, run, msg, []agentd.EventDraft{draft(conv.ID, agentd.EventRunStarted, `{}`)})
		return run, msg, err
	}

	// Running: refused, and nothing of the refused run is written.
	run, _, err := try()
	wantCode(t, err, agentd.ERUNACTIVE)
	_, err = s.Run(ctx, run.ID)
	wantCode(t, err, agentd.ENOTFOUND)
	if msgs, _ := s.Messages(ctx, conv.ID); len(msgs) != 1 {
		t.Fatalf("refused StartRun left %d messages, want 1", len(msgs))
	}
	if evs := allEvents(t, s, conv.ID); len(evs) != len(before) {
		t.Fatalf("refused StartRun appended events: %d, want %d", len(evs), len(before))
	}

	// Waiting: still active.
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: first.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting, Now: t0}, nil)
	noErr(t, err, "UpdateRun to waiting")
	_, _, err = try()
	wantCode(t, err, agentd.ERUNACTIVE)

	// Another conversation is not blocked.
	startRun(t, s, newConversation(t, s))

	// Completed: a new run may start, and its event follows gaplessly.
	finishRun(t, s, first)
	run, _, err = try()
	noErr(t, err, "StartRun after completion")
	got, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.Status != agentd.RunRunning {
		t.Errorf("new run status = %s, want running", got.Status)
	}
	wantSeqs(t, "events", allEvents(t, s, conv.ID), 1)

	// And with that one running, the conversation is blocked again.
	_, _, err = try()
	wantCode(t, err, agentd.ERUNACTIVE)

	// A run made active again by UpdateRun while another is active is refused.
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: first.ID, Status: agentd.RunRunning, Now: t0}, nil)
	wantCode(t, err, agentd.ERUNACTIVE)
	active, err := s.RunsToDrive(ctx)
	noErr(t, err, "RunsToDrive")
	n := 0
	for _, r := range active {
		if r.ConversationID == conv.ID {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("conversation has %d active runs, want 1", n)
	}
}

func testStartRunErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	newRun := func(status agentd.RunStatus) (*agentd.Run, *agentd.Message) {
		r := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, Status: status}
		m := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: r.ID, Role: agentd.RoleUser}
		return r, m
	}

	for _, status := range []agentd.RunStatus{agentd.RunWaiting, agentd.RunCompleted, ""} {
		r, m := newRun(status)
		_, err := s.StartRun(ctx, r, m, nil)
		wantCode(t, err, agentd.EINVALID)
	}

	r, m := newRun(agentd.RunRunning)
	r.ConversationID, m.ConversationID = "conv_missing", "conv_missing"
	_, err := s.StartRun(ctx, r, m, []agentd.EventDraft{draft("conv_missing", agentd.EventRunStarted, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)

	r, m = newRun(agentd.RunRunning)
	r.ID = ""
	_, err = s.StartRun(ctx, r, m, nil)
	wantCode(t, err, agentd.EINVALID)

	// Events for a missing conversation roll back the whole start.
	r, m = newRun(agentd.RunRunning)
	_, err = s.StartRun(ctx, r, m, []agentd.EventDraft{draft("conv_missing", agentd.EventRunStarted, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	_, err = s.Run(ctx, r.ID)
	wantCode(t, err, agentd.ENOTFOUND)

	// A run id that exists is a conflict, even when the conversation is free.
	first := startRun(t, s, conv)
	finishRun(t, s, first)
	r, m = newRun(agentd.RunRunning)
	r.ID, m.RunID = first.ID, first.ID
	_, err = s.StartRun(ctx, r, m, nil)
	wantCode(t, err, agentd.ECONFLICT)
	got, err := s.Run(ctx, first.ID)
	noErr(t, err, "Run")
	if got.Status != agentd.RunCompleted {
		t.Errorf("conflicting StartRun changed the run: status %s", got.Status)
	}
}

func testStartRunConcurrent(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, Status: agentd.RunRunning, CreatedAt: t0}
			m := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: r.ID, Role: agentd.RoleUser}
			_, errs[i] = s.StartRun(ctx, r, m, []agentd.EventDraft{draft(conv.ID, agentd.EventRunStarted, `{}`)})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if agentd.ErrorCode(err) != agentd.ERUNACTIVE {
			t.Errorf("concurrent StartRun: %v, want nil or %s", err, agentd.ERUNACTIVE)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent StartRuns succeeded, want 1", ok)
	}
	wantSeqs(t, "events", allEvents(t, s, conv.ID), 1)
	msgs, err := s.Messages(ctx, conv.ID)
	noErr(t, err, "Messages")
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}

func testRunNotFound(t *testing.T, s agentd.Store) {
	_, err := s.Run(context.Background(), "run_missing")
	wantCode(t, err, agentd.ENOTFOUND)
}

func testUpdateRunApplies(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)

	step := 3
	usage := agentd.Usage{InputTokens: 100, OutputTokens: 50}
	got, evs, err := s.UpdateRun(ctx, agentd.RunUpdate{
		ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunWaiting, Reason: "parked",
		Step: &step, Usage: &usage, Now: at(time.Minute),
	}, []agentd.EventDraft{draft(conv.ID, agentd.EventRunWaiting, `{"pending":["a"]}`)})
	noErr(t, err, "UpdateRun")
	if got.Status != agentd.RunWaiting || got.Reason != "parked" || got.Step != 3 || got.Usage != usage {
		t.Errorf("UpdateRun returned %+v", got)
	}
	sameTime(t, "UpdatedAt", got.UpdatedAt, at(time.Minute))
	sameTime(t, "CreatedAt", got.CreatedAt, run.CreatedAt)
	wantSeqs(t, "UpdateRun events", evs, 1)
	if evs[0].Type != agentd.EventRunWaiting {
		t.Errorf("event type %q", evs[0].Type)
	}

	stored, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if stored.Status != agentd.RunWaiting || stored.Step != 3 || stored.Usage != usage || stored.Reason != "parked" {
		t.Errorf("stored run = %+v", stored)
	}

	// Nil Step and Usage leave them; Reason and Status are set.
	got, _, err = s.UpdateRun(ctx, agentd.RunUpdate{
		ID: run.ID, From: []agentd.RunStatus{agentd.RunWaiting}, Status: agentd.RunCompleted, Reason: "done", Now: at(2 * time.Minute),
	}, nil)
	noErr(t, err, "UpdateRun")
	if got.Status != agentd.RunCompleted || got.Reason != "done" || got.Step != 3 || got.Usage != usage {
		t.Errorf("UpdateRun returned %+v", got)
	}
	sameTime(t, "UpdatedAt", got.UpdatedAt, at(2*time.Minute))
}

func testUpdateRunConflict(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	finishRun(t, s, run)

	step := 9
	got, evs, err := s.UpdateRun(ctx, agentd.RunUpdate{
		ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning, agentd.RunWaiting}, Status: agentd.RunCancelled,
		Reason: "cancelled", Step: &step, Now: at(time.Hour),
	}, []agentd.EventDraft{draft(conv.ID, agentd.EventRunFinished, `{}`)})
	wantCode(t, err, agentd.ECONFLICT)
	if got == nil || got.ID != run.ID || got.Status != agentd.RunCompleted || got.Step != 0 {
		t.Fatalf("ECONFLICT returned run %+v, want the current completed run", got)
	}
	if len(evs) != 0 {
		t.Errorf("ECONFLICT returned events %v", evs)
	}
	if n := len(allEvents(t, s, conv.ID)); n != 0 {
		t.Errorf("ECONFLICT appended %d events", n)
	}
	stored, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if stored.Status != agentd.RunCompleted || stored.Reason == "cancelled" || stored.Step != 0 {
		t.Errorf("ECONFLICT changed the run: %+v", stored)
	}
}

func testUpdateRunAnyFrom(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	finishRun(t, s, run)
	got, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, Status: agentd.RunFailed, Reason: "late", Now: t0}, nil)
	noErr(t, err, "UpdateRun with empty From")
	if got.Status != agentd.RunFailed {
		t.Errorf("status %s, want failed", got.Status)
	}
}

func testUpdateRunErrors(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	_, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: "run_missing", Status: agentd.RunCompleted, Now: t0}, nil)
	wantCode(t, err, agentd.ENOTFOUND)
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: "run_missing", From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunCompleted, Now: t0}, nil)
	wantCode(t, err, agentd.ENOTFOUND)

	run := startRun(t, s, conv)
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, Status: "bogus", Now: t0}, nil)
	wantCode(t, err, agentd.EINVALID)

	// Events for a missing conversation roll the update back.
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, From: []agentd.RunStatus{agentd.RunRunning}, Status: agentd.RunCompleted, Now: t0},
		[]agentd.EventDraft{draft("conv_missing", agentd.EventRunFinished, `{}`)})
	wantCode(t, err, agentd.ENOTFOUND)
	got, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.Status != agentd.RunRunning {
		t.Errorf("failed UpdateRun left status %s, want running", got.Status)
	}
}

func testRecordStepApplies(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	_, _, err := s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, Status: agentd.RunRunning, Usage: &agentd.Usage{InputTokens: 1, OutputTokens: 2}, Now: t0}, nil)
	noErr(t, err, "UpdateRun")

	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleAssistant, Content: "calling", CreatedAt: at(time.Second)}
	c0, c1 := newCall(run, 1, 0, agentd.StatusExecuting), newCall(run, 1, 1, agentd.StatusRequiresConfirmation)
	c0.MessageID, c1.MessageID = msg.ID, msg.ID
	evs, err := s.RecordStep(ctx, agentd.StepRecord{
		RunID: run.ID, Step: 1, Usage: agentd.Usage{InputTokens: 10, OutputTokens: 20}, StopReason: "tool_calls",
		Message: msg, Calls: []*agentd.ToolCall{c0, c1}, Now: at(time.Second),
	}, []agentd.EventDraft{draft(conv.ID, agentd.EventMessage, `{}`), draft(conv.ID, agentd.EventToolCallStarted, `{}`)})
	noErr(t, err, "RecordStep")
	wantSeqs(t, "RecordStep events", evs, 1, 2)

	got, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.Step != 1 || got.Status != agentd.RunRunning || got.Usage != (agentd.Usage{InputTokens: 11, OutputTokens: 22}) || got.StopReason != "tool_calls" {
		t.Errorf("run after RecordStep = %+v, want step 1, running, usage 11/22, stop reason tool_calls", got)
	}
	sameTime(t, "UpdatedAt", got.UpdatedAt, at(time.Second))
	msgs, err := s.Messages(ctx, conv.ID)
	noErr(t, err, "Messages")
	if len(msgs) != 2 || msgs[1].ID != msg.ID || msgs[1].Content != "calling" || msgs[1].RunID != run.ID {
		t.Errorf("Messages = %+v, want the user message then the step's", msgs)
	}
	calls, err := s.RunToolCalls(ctx, run.ID)
	noErr(t, err, "RunToolCalls")
	wantIDs(t, "RunToolCalls", ids(calls), c0.ID, c1.ID)
	if calls[0].MessageID != msg.ID || calls[1].Status != agentd.StatusRequiresConfirmation {
		t.Errorf("recorded calls = %+v", calls)
	}

	// A waiting run becomes running with the next step; no message, no calls.
	_, _, err = s.UpdateRun(ctx, agentd.RunUpdate{ID: run.ID, Status: agentd.RunWaiting, Now: t0}, nil)
	noErr(t, err, "UpdateRun")
	_, err = s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 2, StopReason: "end_turn", Now: at(2 * time.Second)}, nil)
	noErr(t, err, "RecordStep from waiting")
	got, err = s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.Step != 2 || got.Status != agentd.RunRunning || got.Usage != (agentd.Usage{InputTokens: 11, OutputTokens: 22}) || got.StopReason != "end_turn" {
		t.Errorf("run after second RecordStep = %+v", got)
	}
}

func testRecordStepConflict(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)

	attempt := func(step int) error {
		msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleAssistant}
		c := newCall(run, step, 0, agentd.StatusExecuting)
		_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: step, Usage: agentd.Usage{InputTokens: 5},
			Message: msg, Calls: []*agentd.ToolCall{c}, Now: t0},
			[]agentd.EventDraft{draft(conv.ID, agentd.EventMessage, `{}`)})
		return err
	}
	unchanged := func(wantStep int, wantStatus agentd.RunStatus) {
		t.Helper()
		got, err := s.Run(ctx, run.ID)
		noErr(t, err, "Run")
		if got.Step != wantStep || got.Status != wantStatus || got.Usage.InputTokens != 0 {
			t.Fatalf("run = %+v, want step %d, %s, no usage", got, wantStep, wantStatus)
		}
		if msgs, _ := s.Messages(ctx, conv.ID); len(msgs) != 1 {
			t.Fatalf("%d messages, want only the user message", len(msgs))
		}
		if calls, _ := s.RunToolCalls(ctx, run.ID); len(calls) != 0 {
			t.Fatalf("%d calls, want none", len(calls))
		}
		if evs := allEvents(t, s, conv.ID); len(evs) != 0 {
			t.Fatalf("%d events, want none", len(evs))
		}
	}

	wantCode(t, attempt(2), agentd.ECONFLICT) // skips step 1
	unchanged(0, agentd.RunRunning)
	wantCode(t, attempt(0), agentd.ECONFLICT) // repeats step 0
	unchanged(0, agentd.RunRunning)
	finishRun(t, s, run)
	wantCode(t, attempt(1), agentd.ECONFLICT) // finished run
	unchanged(0, agentd.RunCompleted)

	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: "run_missing", Step: 1, Now: t0}, nil)
	wantCode(t, err, agentd.ENOTFOUND)
}

// A step that ends its run (StepRecord.End) records the step and finishes
// the run in one transaction: a run no longer active, with its reason and
// the step's usage, none of RunsToDrive's, and the conversation free for
// its next run. An end that is not completed or failed, or one with calls,
// writes nothing.
func testRecordStepEnds(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)

	bad := []agentd.StepRecord{
		{RunID: run.ID, Step: 1, End: agentd.RunWaiting, Now: t0},
		{RunID: run.ID, Step: 1, End: agentd.RunCancelled, Now: t0},
		{RunID: run.ID, Step: 1, End: agentd.RunCompleted, Calls: []*agentd.ToolCall{newCall(run, 1, 0, agentd.StatusRefused)}, Now: t0},
	}
	for _, r := range bad {
		_, err := s.RecordStep(ctx, r, nil)
		wantCode(t, err, agentd.EINVALID)
	}

	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleAssistant, Content: "hello", CreatedAt: at(time.Second)}
	evs, err := s.RecordStep(ctx, agentd.StepRecord{
		RunID: run.ID, Step: 1, Usage: agentd.Usage{InputTokens: 3, OutputTokens: 4}, StopReason: "end_turn",
		Message: msg, Now: at(time.Second), End: agentd.RunCompleted, EndReason: "model_stop",
	}, []agentd.EventDraft{draft(conv.ID, agentd.EventMessage, `{}`), draft(conv.ID, agentd.EventRunFinished, `{}`)})
	noErr(t, err, "RecordStep that ends the run")
	wantSeqs(t, "RecordStep events", evs, 1, 2)
	got, err := s.Run(ctx, run.ID)
	noErr(t, err, "Run")
	if got.Step != 1 || got.Status != agentd.RunCompleted || got.Reason != "model_stop" || got.Usage != (agentd.Usage{InputTokens: 3, OutputTokens: 4}) || got.StopReason != "end_turn" {
		t.Errorf("run after the last step = %+v, want step 1, completed, model_stop, usage 3/4, stop reason end_turn", got)
	}
	sameTime(t, "UpdatedAt", got.UpdatedAt, at(time.Second))
	if msgs, _ := s.Messages(ctx, conv.ID); len(msgs) != 2 || msgs[1].ID != msg.ID {
		t.Errorf("Messages = %+v, want the user message then the step's", msgs)
	}
	drive, err := s.RunsToDrive(ctx)
	noErr(t, err, "RunsToDrive")
	for _, r := range drive {
		if r.ID == run.ID {
			t.Errorf("RunsToDrive returns the finished run")
		}
	}
	_, err = s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 2, End: agentd.RunCompleted, Now: t0}, nil)
	wantCode(t, err, agentd.ECONFLICT) // the run has ended
	startRun(t, s, conv)               // its conversation is free

	// A failed end keeps its reason too.
	conv2 := newConversation(t, s)
	run2 := startRun(t, s, conv2)
	_, err = s.RecordStep(ctx, agentd.StepRecord{RunID: run2.ID, Step: 1, Now: t0, End: agentd.RunFailed, EndReason: "error: boom"}, nil)
	noErr(t, err, "RecordStep that fails the run")
	if got, _ := s.Run(ctx, run2.ID); got == nil || got.Status != agentd.RunFailed || got.Reason != "error: boom" {
		t.Errorf("run after a failing last step = %+v", got)
	}
}

func testCancelRun(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	conv := newConversation(t, s)
	run := startRun(t, s, conv)
	parked, approved, done := newCall(run, 1, 0, agentd.StatusRequiresConfirmation), newCall(run, 1, 1, agentd.StatusApproved), newCall(run, 1, 2, agentd.StatusCompleted)
	_, err := s.RecordStep(ctx, agentd.StepRecord{RunID: run.ID, Step: 1, Calls: []*agentd.ToolCall{parked, approved, done}, Now: t0}, nil)
	noErr(t, err, "RecordStep")

	var seen []agentd.ToolCall
	got, evs, err := s.CancelRun(ctx, run.ID, "cancelled by user", agentd.Actor{KeyID: "key1", Role: agentd.RoleClient}, at(time.Minute), func(r *agentd.Run, calls []agentd.ToolCall) []agentd.EventDraft {
		if r.Status != agentd.RunCancelled {
			t.Errorf("plan sees run %s, want cancelled", r.Status)
		}
		seen = calls
		return []agentd.EventDraft{draft(conv.ID, agentd.EventConfirmationResolved, `{}`), draft(conv.ID, agentd.EventRunFinished, `{}`)}
	})
	noErr(t, err, "CancelRun")
	if got.Status != agentd.RunCancelled || got.Reason != "cancelled by user" {
		t.Errorf("run = %+v", got)
	}
	wantIDs(t, "calls given to plan", ids(seen), parked.ID, approved.ID)
	if seen[0].Status != agentd.StatusRequiresConfirmation || seen[1].Status != agentd.StatusApproved {
		t.Errorf("plan got calls with statuses %s, %s: want their status before", seen[0].Status, seen[1].Status)
	}
	wantSeqs(t, "CancelRun events", evs, 1, 2)
	calls, err := s.RunToolCalls(ctx, run.ID)
	noErr(t, err, "RunToolCalls")
	want := []agentd.CallStatus{agentd.StatusCancelled, agentd.StatusCancelled, agentd.StatusCompleted}
	for i, c := range calls {
		if c.Status != want[i] {
			t.Errorf("call %d is %s, want %s", i, c.Status, want[i])
		}
	}
	if d := calls[0].Decisions; len(d) != 1 || d[0].Decision != agentd.DecisionCancelled || d[0].DecidedBy != "key1" || d[0].ArgumentsSHA256 != parked.ArgumentsSHA256 {
		t.Errorf("parked call decisions = %+v, want one cancelled by key1", d)
	}
	if len(calls[1].Decisions) != 0 {
		t.Errorf("approved call got decisions %+v", calls[1].Decisions)
	}

	// Again: ECONFLICT with the current run, nothing written.
	cur, evs, err := s.CancelRun(ctx, run.ID, "again", agentd.Actor{KeyID: "key1"}, at(2*time.Minute), func(*agentd.Run, []agentd.ToolCall) []agentd.EventDraft {
		t.Error("plan called for a run that is not active")
		return nil
	})
	if agentd.ErrorCode(err) != agentd.ECONFLICT || cur == nil || cur.Status != agentd.RunCancelled || len(evs) != 0 {
		t.Errorf("second CancelRun = %+v, %v, %v; want ECONFLICT with the cancelled run", cur, evs, err)
	}
	all, err := s.Events(ctx, conv.ID, 0, 0)
	noErr(t, err, "Events")
	if len(all) != 2 {
		t.Errorf("%d events after a refused cancel, want 2", len(all))
	}
	if _, _, err := s.CancelRun(ctx, agentd.NewID(agentd.PrefixRun), "x", agentd.Actor{KeyID: "k"}, t0, nil); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Errorf("CancelRun of a missing run: %v, want ENOTFOUND", err)
	}
}

// testConversationLastSeq: Conversation reports the Seq of the newest
// event as of the read.
func testConversationLastSeq(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	c := newConversation(t, s)
	got, err := s.Conversation(ctx, c.ID)
	noErr(t, err, "Conversation")
	if got.LastSeq != 0 {
		t.Errorf("LastSeq of a new conversation = %d, want 0", got.LastSeq)
	}
	for i := 0; i < 3; i++ {
		d, err := agentd.NewEventDraft(c.ID, t0, &agentd.ErrorPayload{Code: "x", Message: "y"})
		noErr(t, err, "NewEventDraft")
		_, err = s.AppendEvents(ctx, []agentd.EventDraft{d})
		noErr(t, err, "AppendEvents")
	}
	got, err = s.Conversation(ctx, c.ID)
	noErr(t, err, "Conversation")
	last, err := s.LastSeq(ctx, c.ID)
	noErr(t, err, "LastSeq")
	if got.LastSeq != 3 || last != 3 {
		t.Errorf("LastSeq = %d (Conversation), %d (LastSeq), want 3", got.LastSeq, last)
	}
}
