package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
)

// askFixture is an engine whose agent has the ask_user tool, on a real
// SQLite file.
type askFixture struct {
	store  *sqlite.DB
	rec    *recorder
	model  *stepModel
	clock  *fakeClock
	engine *loop.Engine
	p      agentd.Principal
}

var askStart = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newAskFixture(t *testing.T, path string, rule *agentd.InputRule, replies ...agentd.ModelResponse) *askFixture {
	t.Helper()
	return newAskFixtureWith(t, path, rule, loop.Options{ExpireEvery: -1}, replies...)
}

// newAskFixtureWith is newAskFixture with opts (its clock is the fixture's).
func newAskFixtureWith(t *testing.T, path string, rule *agentd.InputRule, opts loop.Options, replies ...agentd.ModelResponse) *askFixture {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &askFixture{store: st, rec: newRecorder(), model: &stepModel{replies: replies}, clock: &fakeClock{now: askStart},
		p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	opts.Clock = f.clock
	if opts.ExpireEvery >= 0 {
		opts.AfterFunc = f.clock.AfterFunc
	}
	f.engine = loop.New(st, f.rec, &loop.Agent{Name: "a", Model: f.model, Tools: registered(t, loop.InputSource()),
		Inputs: rule, MaxTurns: 5}, opts)
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.engine.Close(); st.Close() })
	return f
}

func askCall(args string) agentd.ModelResponse {
	return agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{ID: "m1", Name: loop.AskUserTool, Arguments: json.RawMessage(args)}}}
}

const askHowMany = `{"message":"How many?","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1},"note":{"type":"string","default":"none"}},"required":["n"]}}`

// ask starts a run whose model asks, and returns its input as announced.
func (f *askFixture) ask(t *testing.T) (*agentd.Conversation, *agentd.Input) {
	t.Helper()
	ctx := context.Background()
	conv, err := f.engine.CreateConversation(ctx, f.p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Send(ctx, f.p, conv.ID, "order some"); err != nil {
		t.Fatal(err)
	}
	ev := f.rec.wait(t, agentd.EventInputRequired, 1)
	var d agentd.InputRequiredPayload
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	in, err := f.engine.Input(ctx, f.p, d.InputID)
	if err != nil {
		t.Fatal(err)
	}
	f.rec.wait(t, agentd.EventRunWaiting, 1)
	return conv, in
}

// lastToolResult is the tool result the model read last in its request i.
func (f *askFixture) lastToolResult(t *testing.T, i int) agentd.ModelMessage {
	t.Helper()
	req := f.model.request(i)
	return req.Messages[len(req.Messages)-1]
}

// TestAskUserAnswered: the model's ask_user call parks as requires_input
// with its input, the run waits; content that does not fit the schema is
// 422 invalid_input naming every bad field and changes nothing; the valid
// answer (defaults filled in) is the call's result, the model reads it
// and the run goes on; the same answer again is the input, another is a
// conflict naming the stored one.
func TestAskUserAnswered(t *testing.T) {
	ctx := context.Background()
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true},
		askCall(askHowMany), agentd.ModelResponse{Text: "ordered"})
	_, in := f.ask(t)
	if in.Status != agentd.InputPending || in.Message != "How many?" || in.Mode != agentd.InputModeForm ||
		!in.ExpiresAt.Equal(askStart.Add(agentd.DefaultInputTimeout)) || in.Answerers[0] != agentd.ApproverOwner {
		t.Fatalf("input = %+v", in)
	}
	call, err := f.engine.ToolCall(ctx, f.p, in.ToolCallID)
	if err != nil || call.Status != agentd.StatusRequiresInput || call.ServerID != loop.InputsServerID || len(call.Inputs) != 1 {
		t.Fatalf("call = %+v, %v", call, err)
	}
	run, _ := f.store.Run(ctx, in.RunID)
	if run.Status != agentd.RunWaiting {
		t.Fatalf("run status = %s, want waiting", run.Status)
	}
	var w agentd.RunWaitingPayload
	_ = json.Unmarshal(f.rec.wait(t, agentd.EventRunWaiting, 1).Data, &w)
	if len(w.Pending) != 1 || w.Pending[0] != in.ToolCallID || len(w.Inputs) != 1 || w.Inputs[0] != in.ID {
		t.Errorf("run_waiting = %+v, want the call pending on the input", w)
	}

	_, err = f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputAccept, Content: json.RawMessage(`{"n":0,"x":1}`)})
	var e *agentd.Error
	if agentd.ErrorCode(err) != agentd.EINVALIDINPUT || !errors.As(err, &e) || len(e.Fields) != 2 ||
		e.Fields[0].Field != "n" || e.Fields[1].Field != "x" || !strings.Contains(e.Message, "content.n") {
		t.Fatalf("bad content: %v (%+v)", err, e)
	}
	if cur, _ := f.engine.Input(ctx, f.p, in.ID); cur.Status != agentd.InputPending {
		t.Fatalf("input after a refused answer is %s", cur.Status)
	}

	got, err := f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputAccept, Content: json.RawMessage(`{"n":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != agentd.InputAnswered || string(got.Content) != `{"n":3,"note":"none"}` || got.AnsweredBy != "k1" || got.Via != agentd.ViaSingle {
		t.Fatalf("answered input = %+v", got)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	last := f.lastToolResult(t, 1)
	if last.ToolCallID != in.ToolCallID || last.Content != `{"action":"accept","content":{"n":3,"note":"none"}}` {
		t.Fatalf("the model read %+v", last)
	}
	if n := f.rec.count(agentd.EventInputResolved); n != 1 {
		t.Errorf("input_resolved events = %d, want 1", n)
	}

	again, err := f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputAccept, Content: json.RawMessage(`{"note":"none", "n":3}`)})
	if err != nil || again.ID != in.ID {
		t.Errorf("the same answer again = %v, %v; want the input", again, err)
	}
	_, err = f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputDecline})
	if agentd.ErrorCode(err) != agentd.ECONFLICT || !strings.Contains(err.Error(), "accept by k1") {
		t.Errorf("another answer = %v, want a conflict naming the stored answer", err)
	}
}

// steps is how many steps the model was asked for.
func steps(m *stepModel) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

// TestAskUserDeclineAndCancel: decline and cancel complete the call with
// just the action, which the model reads; content with them is invalid.
func TestAskUserDeclineAndCancel(t *testing.T) {
	for _, action := range []string{agentd.InputDecline, agentd.InputCancel} {
		t.Run(action, func(t *testing.T) {
			ctx := context.Background()
			f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true},
				askCall(`{"message":"Which one?"}`), agentd.ModelResponse{Text: "ok"})
			_, in := f.ask(t)
			if string(in.Schema) != string(agentd.DefaultFormSchema) {
				t.Errorf("schema = %s, want the default form", in.Schema)
			}
			_, err := f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: action, Content: json.RawMessage(`{}`)})
			if agentd.ErrorCode(err) != agentd.EINVALID {
				t.Fatalf("%s with content = %v, want invalid", action, err)
			}
			got, err := f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: action})
			if err != nil || got.Action != action || got.Content != nil {
				t.Fatalf("answer = %+v, %v", got, err)
			}
			f.rec.wait(t, agentd.EventRunFinished, 1)
			if last := f.lastToolResult(t, 1); last.Content != `{"action":"`+action+`"}` {
				t.Fatalf("the model read %q", last.Content)
			}
		})
	}
}

// TestAskUserBadSchema: a schema outside the form subset is refused before
// any input, the reason naming the keyword; the model reads the refusal.
func TestAskUserBadSchema(t *testing.T) {
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true},
		askCall(`{"message":"Address?","schema":{"type":"object","properties":{"addr":{"type":"object"}}}}`), agentd.ModelResponse{Text: "ok"})
	conv, err := f.engine.CreateConversation(context.Background(), f.p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Send(context.Background(), f.p, conv.ID, "ship it"); err != nil {
		t.Fatal(err)
	}
	ev := f.rec.wait(t, agentd.EventToolCallRefused, 1)
	var d agentd.ToolCallRefusedPayload
	_ = json.Unmarshal(ev.Data, &d)
	if !strings.Contains(d.Reason, `property "addr": type "object"`) {
		t.Errorf("refusal reason = %q, want it to name the property", d.Reason)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if n := f.rec.count(agentd.EventInputRequired); n != 0 {
		t.Errorf("input_required events = %d, want none", n)
	}
}

// TestAskUserWho: a key that does not reach the conversation gets 404
// (another tenant's, another client's); one that reaches it but is not
// among the answerers 403 answerer_not_allowed; answerers may widen it.
func TestAskUserWho(t *testing.T) {
	ctx := context.Background()
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true},
		askCall(askHowMany), agentd.ModelResponse{Text: "ok"})
	_, in := f.ask(t)
	answer := agentd.InputAnswer{Action: agentd.InputDecline}
	for _, p := range []agentd.Principal{
		{TenantID: "t2", ProjectID: "p1", Role: agentd.RoleAdmin, KeyID: "other-tenant"},
		{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k2"},
	} {
		if _, err := f.engine.Input(ctx, p, in.ID); agentd.ErrorCode(err) != agentd.ENOTFOUND {
			t.Errorf("%s: GET = %v, want not_found", p.KeyID, err)
		}
		if _, err := f.engine.AnswerInput(ctx, p, in.ID, answer); agentd.ErrorCode(err) != agentd.ENOTFOUND {
			t.Errorf("%s: answer = %v, want not_found", p.KeyID, err)
		}
		if ins, _, err := f.engine.Inputs(ctx, p, agentd.InputQuery{}); err != nil || len(ins) != 0 {
			t.Errorf("%s: list = %v, %v; want none", p.KeyID, ins, err)
		}
	}
	op := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator, KeyID: "op"}
	if _, err := f.engine.AnswerInput(ctx, op, in.ID, answer); agentd.ErrorCode(err) != agentd.EANSWERERNOTALLOWED {
		t.Errorf("operator answer = %v, want answerer_not_allowed", err)
	}
	if ins, _, err := f.engine.Inputs(ctx, op, agentd.InputQuery{Answerable: true}); err != nil || len(ins) != 0 {
		t.Errorf("operator's answerable list = %v, %v; want none", ins, err)
	}
	if ins, _, err := f.engine.Inputs(ctx, f.p, agentd.InputQuery{Answerable: true, Status: agentd.InputPending}); err != nil || len(ins) != 1 {
		t.Errorf("owner's answerable list = %v, %v; want the input", ins, err)
	}
	if _, err := f.engine.AnswerInput(ctx, f.p, in.ID, answer); err != nil {
		t.Errorf("owner's answer: %v", err)
	}
}

// TestAskUserConcurrentAnswers: of 20 concurrent answers one is the answer
// (the run goes on once); the same answer again is 200, others conflict.
func TestAskUserConcurrentAnswers(t *testing.T) {
	ctx := context.Background()
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true},
		askCall(askHowMany), agentd.ModelResponse{Text: "ok"})
	_, in := f.ask(t)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputAccept,
				Content: json.RawMessage(`{"n":` + string(rune('1'+i%9)) + `}`)})
		})
	}
	wg.Wait()
	cur, _ := f.engine.Input(ctx, f.p, in.ID)
	ok := 0
	for i, err := range errs {
		same := `{"n":`+string(rune('1'+i%9))+`,"note":"none"}` == string(cur.Content)
		switch {
		case err == nil && same:
			ok++
		case agentd.ErrorCode(err) == agentd.ECONFLICT && !same:
		default:
			t.Errorf("answer %d: %v (stored %s)", i, err, cur.Content)
		}
	}
	if ok < 1 || ok > 3 { // 20 answers of 9 contents: the winner's twins are 200 too
		t.Errorf("%d answers took, want the winner's", ok)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if c := f.rec.count(agentd.EventInputResolved); c != 1 {
		t.Errorf("input_resolved events = %d, want 1", c)
	}
	if c := steps(f.model); c != 2 {
		t.Errorf("model steps = %d, want 2", c)
	}
}

// TestAskUserCancelRun: cancelling the run cancels the input
// (input_resolved cancelled, run_cancelled) and its call.
func TestAskUserCancelRun(t *testing.T) {
	ctx := context.Background()
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true}, askCall(askHowMany))
	_, in := f.ask(t)
	if _, err := f.engine.Cancel(ctx, f.p, in.RunID); err != nil {
		t.Fatal(err)
	}
	ev := f.rec.wait(t, agentd.EventInputResolved, 1)
	var d agentd.InputResolvedPayload
	_ = json.Unmarshal(ev.Data, &d)
	if d.InputID != in.ID || d.Status != agentd.InputCancelled || d.Reason != agentd.InputReasonRunCancelled {
		t.Errorf("input_resolved = %+v", d)
	}
	_, err := f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputDecline})
	if agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Errorf("answer after cancel = %v, want conflict", err)
	}
}

// TestAskUserExpiredOnAnswer: an answer after expires_at is 409 expired;
// the input expires, and the model is told nobody answered in time.
func TestAskUserExpiredOnAnswer(t *testing.T) {
	ctx := context.Background()
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true, Timeout: time.Minute},
		askCall(askHowMany), agentd.ModelResponse{Text: "ok"})
	_, in := f.ask(t)
	f.clock.Advance(time.Minute)
	_, err := f.engine.AnswerInput(ctx, f.p, in.ID, agentd.InputAnswer{Action: agentd.InputDecline})
	if agentd.ErrorCode(err) != agentd.EEXPIRED {
		t.Fatalf("late answer = %v, want expired", err)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if last := f.lastToolResult(t, 1); !strings.Contains(last.Content, "Nobody answered") {
		t.Errorf("the model read %q", last.Content)
	}
	if cur, _ := f.engine.Input(ctx, f.p, in.ID); cur.Status != agentd.InputExpired {
		t.Errorf("input status = %s, want expired", cur.Status)
	}
}

// TestAskUserSurvivesRestart: the input and its call survive the engine
// on the same SQLite file; a new engine does not drive the waiting run
// (nothing asks the model) until the answer, which resumes it there.
func TestAskUserSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentd.db")
	first := newAskFixture(t, path, &agentd.InputRule{AskUser: true}, askCall(askHowMany))
	_, in := first.ask(t)
	first.engine.Close()
	if err := first.store.Close(); err != nil {
		t.Fatal(err)
	}

	second := newAskFixture(t, path, &agentd.InputRule{AskUser: true}, agentd.ModelResponse{Text: "ordered after restart"})
	cur, err := second.engine.Input(ctx, second.p, in.ID)
	if err != nil || cur.Status != agentd.InputPending {
		t.Fatalf("input after restart = %+v, %v", cur, err)
	}
	if runs, err := second.store.RunsToDrive(ctx); err != nil || len(runs) != 0 {
		t.Fatalf("runs to drive after restart = %v, %v; want none", runs, err)
	}
	if _, err := second.engine.AnswerInput(ctx, second.p, in.ID, agentd.InputAnswer{Action: agentd.InputAccept,
		Content: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	second.rec.wait(t, agentd.EventRunFinished, 1)
	if c := steps(second.model); c != 1 {
		t.Fatalf("model steps after restart = %d, want 1", c)
	}
	if last := second.lastToolResult(t, 0); last.Content != `{"action":"accept","content":{"n":2,"note":"none"}}` {
		t.Errorf("the model read %q", last.Content)
	}
}

// TestAskUserExpires: the engine's one deadline timer is armed to a new
// input's expires_at (the earlier of it and a parked call's); when it
// fires the input expires by itself — input_resolved expired, the call
// expired, the model told nobody answered in time — and after a restart
// the timer is armed to a pending input's deadline from the store.
func TestAskUserExpires(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentd.db")
	f := newAskFixtureWith(t, path, &agentd.InputRule{AskUser: true, Timeout: 3 * time.Minute}, loop.Options{},
		askCall(askHowMany), agentd.ModelResponse{Text: "nobody"})
	f.clock.waitArmed(t) // the first pass found nothing
	_, in := f.ask(t)
	f.clock.waitArmed(t, askStart.Add(3*time.Minute))
	f.engine.Close()
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}

	g := newAskFixtureWith(t, path, &agentd.InputRule{AskUser: true}, loop.Options{}, agentd.ModelResponse{Text: "nobody"})
	g.clock.waitArmed(t, askStart.Add(3*time.Minute)) // from the store, after the restart
	g.clock.Advance(3 * time.Minute)
	ev := g.rec.wait(t, agentd.EventInputResolved, 1)
	var d agentd.InputResolvedPayload
	_ = json.Unmarshal(ev.Data, &d)
	if d.InputID != in.ID || d.Status != agentd.InputExpired || d.Via != agentd.ViaDeadline {
		t.Fatalf("input_resolved = %+v", d)
	}
	g.rec.wait(t, agentd.EventRunFinished, 1)
	if last := g.lastToolResult(t, 0); last.ToolStatus != agentd.StatusExpired || !strings.Contains(last.Content, "Nobody answered") {
		t.Errorf("the model read %+v", last)
	}
	g.clock.waitArmed(t) // nothing left
	if _, err := g.engine.AnswerInput(ctx, g.p, in.ID, agentd.InputAnswer{Action: agentd.InputDecline}); agentd.ErrorCode(err) != agentd.EEXPIRED {
		t.Errorf("answer after the expiry = %v, want expired", err)
	}
}

// TestAskUserExpireDue: Engine.ExpireDue expires due inputs as it does
// parked calls, and counts them.
func TestAskUserExpireDue(t *testing.T) {
	ctx := context.Background()
	f := newAskFixture(t, filepath.Join(t.TempDir(), "agentd.db"), &agentd.InputRule{AskUser: true, Timeout: time.Minute},
		askCall(askHowMany), agentd.ModelResponse{Text: "ok"})
	_, in := f.ask(t)
	if n, err := f.engine.ExpireDue(ctx); err != nil || n != 0 {
		t.Fatalf("ExpireDue before the deadline = %d, %v", n, err)
	}
	f.clock.Advance(time.Minute)
	if n, err := f.engine.ExpireDue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue at the deadline = %d, %v", n, err)
	}
	f.rec.wait(t, agentd.EventRunFinished, 1)
	if cur, _ := f.engine.Input(ctx, f.p, in.ID); cur.Status != agentd.InputExpired {
		t.Errorf("input status = %s, want expired", cur.Status)
	}
}
