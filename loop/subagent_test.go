package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// probeTool is an auto tool that counts its runs.
type probeTool struct {
	mu   sync.Mutex
	runs int
	ran  chan struct{} // closed at the first run
}

func (p *probeTool) ID() string { return "tools" }
func (p *probeTool) Tools() []toolset.Tool {
	return []toolset.Tool{{
		Spec:        agentd.ToolSpec{Name: "probe", Description: "probe", Parameters: json.RawMessage(`{"type":"object"}`)},
		Confirm:     &confirm.Tool{Name: "probe", ServerID: "tools", Exposure: confirm.ExposureOpen},
		LLMCallable: true,
	}}
}
func (p *probeTool) Execute(context.Context, agentd.ToolCall) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runs++; p.runs == 1 {
		close(p.ran)
	}
	return json.RawMessage(`{"ok":true}`), nil
}
func (p *probeTool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs
}

// gateModel is a subagent's model whose first step answers a call to probe
// only once gate is closed, whatever its context says: a model answer
// that arrives just as the run is cancelled.
type gateModel struct {
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (m *gateModel) Generate(ctx context.Context, _ agentd.ModelRequest, _ func(string)) (*agentd.ModelResponse, error) {
	first := false
	m.once.Do(func() { first = true })
	if !first {
		return &agentd.ModelResponse{Text: "done"}, nil
	}
	close(m.entered)
	select {
	case <-m.gate:
	case <-time.After(30 * time.Second):
		return nil, context.DeadlineExceeded
	}
	return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "probe", Arguments: json.RawMessage(`{}`)}}}, nil
}

// cancelLogWriter is the engine's log: at Cancel's "run cancelled" line —
// after the cancel's commit — it opens the subagent model's gate and holds
// Cancel there until the probe ran or the task call's result is out.
type cancelLogWriter struct {
	gate  chan struct{}
	probe *probeTool
	rec   *recorder
}

func (w *cancelLogWriter) Write(b []byte) (int, error) {
	if !bytes.Contains(b, []byte(`"message":"run cancelled"`)) {
		return len(b), nil
	}
	close(w.gate)
	deadline := time.After(30 * time.Second)
	for w.rec.count(agentd.EventToolCallResult) == 0 {
		select {
		case <-w.probe.ran:
			return len(b), nil
		case <-w.rec.notify:
		case <-deadline:
			return len(b), nil
		}
	}
	return len(b), nil
}

// Nothing of a subagent starts after its run's cancel was committed, even
// when its model answers a call right then: the cancel ends the run's
// context before it lets go of the conversation, and the subagent's
// tool_call_started is committed only under a live one.
func TestSubagentStartsNothingAfterCancel(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	probe := &probeTool{ran: make(chan struct{})}
	sub := &gateModel{entered: make(chan struct{}), gate: make(chan struct{})}
	subs := []*loop.Subagent{{Name: "worker", Description: "works", Model: sub, Tools: registered(t, probe), MaxTurns: 3}}
	rec := newRecorder()
	parent := &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{{Name: "task",
		Arguments: json.RawMessage(`{"subagent":"worker","prompt":"probe it"}`)}}}}}
	log := zerolog.New(&cancelLogWriter{gate: sub.gate, probe: probe, rec: rec})
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: parent, Tools: registered(t, loop.TaskSource(subs)), Subagents: subs, MaxTurns: 5},
		loop.Options{ExpireEvery: -1, Logger: log})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := e.CreateConversation(context.Background(), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.Send(context.Background(), p, conv.ID, "go")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the subagent's model was not called")
	}
	if got, err := e.Cancel(context.Background(), p, run.ID); err != nil || got.Status != agentd.RunCancelled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	rec.wait(t, agentd.EventToolCallResult, 1)
	if n := probe.count(); n != 0 {
		t.Fatalf("the probe ran %d times after the run was cancelled", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ev := range rec.events {
		var d struct {
			Event struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if ev.Type == agentd.EventSubagentEvent && d.Event.Type == agentd.EventToolCallStarted {
			t.Fatalf("a subagent call was announced after the cancel: %s", ev.Data)
		}
	}
}

// A subagent has no approval handler: its call to a confirm tool is
// refused at once — a tool_call_refused of tier confirm inside a
// subagent_event, status denied for its model, no confirmation_required —
// and the tool never runs; the refusal is in the parent conversation's
// audit log, marked as the subagent's (its name and the task call), with
// the call's id and digest. Checked once the run finished, so a changed
// rule fails here at once, not by a timeout.
func TestSubagentConfirmCallRefusedAndAudited(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	pay := &goTool{name: "pay", exposure: "requires-confirmation"}
	sub := &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{{Name: "pay", Arguments: json.RawMessage(`{"amount":3}`)}}}}}
	subs := []*loop.Subagent{{Name: "worker", Description: "works", Model: sub, Tools: registered(t, pay), MaxTurns: 3}}
	parent := &stepModel{replies: []agentd.ModelResponse{{ToolCalls: []agentd.ModelToolCall{{Name: "task",
		Arguments: json.RawMessage(`{"subagent":"worker","prompt":"pay it"}`)}}}}}
	rec := newRecorder()
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: parent, Tools: registered(t, loop.TaskSource(subs)), Subagents: subs, MaxTurns: 5},
		loop.Options{ExpireEvery: -1})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	f := &rulesFixture{store: st, rec: rec, engine: e, p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	convID, _ := f.send(t, "go")
	rec.wait(t, agentd.EventRunFinished, 1)

	if n := pay.count(); n != 0 || rec.count(agentd.EventConfirmationRequired) != 0 {
		t.Fatalf("the subagent's confirm call ran %d times, %d cards", n, rec.count(agentd.EventConfirmationRequired))
	}
	var refused []agentd.ToolCallRefusedPayload
	var taskID string
	rec.mu.Lock()
	for _, ev := range rec.events {
		var d agentd.SubagentEventPayload
		if ev.Type != agentd.EventSubagentEvent || json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		var in agentd.ToolCallRefusedPayload
		if json.Unmarshal(d.Event, &in) == nil && in.Type == agentd.EventToolCallRefused {
			refused, taskID = append(refused, in), d.ToolCallID
		}
	}
	rec.mu.Unlock()
	if len(refused) != 1 || refused[0].Tier != agentd.TierConfirm || refused[0].ToolName != "pay" ||
		!strings.Contains(refused[0].Reason, `"pay" needs a person's approval, and a subagent cannot ask for it`) {
		t.Fatalf("the subagent's refusals: %+v", refused)
	}
	if req := sub.request(1); len(req.Messages) < 3 || req.Messages[2].ToolStatus != agentd.StatusDenied {
		t.Fatalf("the subagent's model read %+v, want the call denied", req.Messages)
	}

	es, err := st.Audit(context.Background(), agentd.AuditFilter{TenantID: "t1", ProjectID: "p1", ConversationID: convID})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Fatalf("audit %+v, want the subagent's refusal", es)
	}
	if a := es[0]; a.Kind != agentd.AuditRefusal || a.ToolCallID != refused[0].ToolCallID || a.ToolName != "pay" || a.Tier != agentd.TierConfirm ||
		a.Reason != refused[0].Reason || a.Subagent != "worker" || a.TaskToolCallID != taskID || a.KeyID != "system" || a.ArgumentsSHA256 == "" {
		t.Fatalf("audit entry %+v", a)
	}
}
