package loop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
)

// These tests pin the approval rules of SPEC §11.1: each case of the table
// fails when its check (an approvers entry, requester_may_approve, the
// quorum) is removed or changed, on every decision path.

// govFixture is an engine over a real SQLite file whose agent has rule.
type govFixture struct {
	path   string
	store  *sqlite.DB
	rec    *recorder
	clock  *fakeClock
	tool   *goTool
	engine *loop.Engine
}

var (
	govOwner = agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "owner"}
	govOp1   = agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator, KeyID: "op1"}
	govOp2   = agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator, KeyID: "op2"}
	govFin   = agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleOperator, KeyID: "fin", Groups: []string{"finance"}}
	govAdmin = agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleAdmin, KeyID: "adm"}
)

func newGov(t *testing.T, path string, rule *agentd.ApprovalRule, tool *goTool) *govFixture {
	t.Helper()
	return newGovKeys(t, path, rule, tool, nil)
}

// newGovKeys is newGov with the API keys as configured now (Options.Keys).
func newGovKeys(t *testing.T, path string, rule *agentd.ApprovalRule, tool *goTool, keys confirm.Keys) *govFixture {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "agentd.db")
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if tool == nil {
		tool = &goTool{name: "refund", exposure: "requires-confirmation"}
	}
	model := &alwaysOnce{name: tool.name}
	f := &govFixture{path: path, store: st, rec: newRecorder(), tool: tool,
		clock: &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}}
	f.engine = loop.New(st, f.rec, &loop.Agent{Name: "a", Model: model, Tools: registered(t, tool), ApprovalTimeout: 10 * time.Minute,
		MaxTurns: 5, Approval: rule}, loop.Options{Clock: f.clock, ExpireEvery: -1, Keys: keys})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.engine.Close(); st.Close() })
	return f
}

// alwaysOnce calls its tool at the first step of every run, then answers.
type alwaysOnce struct {
	name string
}

func (m *alwaysOnce) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(string)) (*agentd.ModelResponse, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == agentd.RoleUser {
		return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: m.name, Arguments: json.RawMessage(`{"amount":900}`)}}}, nil
	}
	return &agentd.ModelResponse{Text: "done"}, nil
}

// park starts a run on a conversation of owner, sent by sender (owner
// when sender is the zero value; an operator reaches it too), and returns
// the parked call.
func (f *govFixture) park(t *testing.T, sender agentd.Principal) agentd.ToolCall {
	t.Helper()
	ctx := context.Background()
	conv, err := f.engine.CreateConversation(ctx, govOwner, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sender.KeyID == "" {
		sender = govOwner
	}
	if _, err := f.engine.Send(ctx, sender, conv.ID, "refund"); err != nil {
		t.Fatal(err)
	}
	n := f.rec.count(agentd.EventConfirmationRequired) + 1
	ev := f.rec.wait(t, agentd.EventConfirmationRequired, n)
	var d struct {
		ID string `json:"tool_call_id"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	c, err := f.engine.ToolCall(ctx, govAdmin, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return *c
}

// path is one door of decisions: single, bulk, protocol.
type path struct {
	name   string
	decide func(e *loop.Engine, p agentd.Principal, id, decision string) (*agentd.Decision, error)
}

var paths = []path{
	{"single", func(e *loop.Engine, p agentd.Principal, id, decision string) (*agentd.Decision, error) {
		return e.Decide(context.Background(), p, id, agentd.DecisionRequest{Decision: decision})
	}},
	{"bulk", func(e *loop.Engine, p agentd.Principal, id, decision string) (*agentd.Decision, error) {
		out, err := e.DecideBatch(context.Background(), p, []agentd.BatchDecisionItem{{ToolCallID: id, Approve: decision == "approve"}}, true)
		return itemOf(out, err)
	}},
	{"protocol", func(e *loop.Engine, p agentd.Principal, id, decision string) (*agentd.Decision, error) {
		out, err := e.DecideAll(context.Background(), p, []agentd.CallDecision{{ToolCallID: id,
			Request: agentd.DecisionRequest{Decision: decision, Via: agentd.ViaProtocol}}}, false)
		return itemOf(out, err)
	}},
}

func itemOf(out []agentd.BatchDecisionResult, err error) (*agentd.Decision, error) {
	if err != nil {
		return nil, err
	}
	if r := out[0]; r.Error != nil {
		return nil, agentd.Errorf(r.Error.Code, "%s", r.Error.Message)
	}
	return out[0].Decision, nil
}

// TestApprovalRuleDecides: who may decide under each rule, on each path.
// A refused key gets the rule's code and the call stays parked; an allowed
// one runs it. Each row fails if its approvers entry or the requester
// check is dropped from agentd.MayDecideCall or from planDecision.
func TestApprovalRuleDecides(t *testing.T) {
	cases := []struct {
		name   string
		rule   agentd.ApprovalRule
		sender agentd.Principal // who sent the message (zero: the owner)
		by     agentd.Principal
		want   string // "" for allowed
	}{
		{"default lets the owner", agentd.DefaultApprovalRule(), agentd.Principal{}, govOwner, ""},
		{"default lets an operator", agentd.DefaultApprovalRule(), agentd.Principal{}, govOp1, ""},
		{"operator only refuses the owner", rule([]string{"operator"}, true), agentd.Principal{}, govOwner, agentd.EAPPROVERNOTALLOWED},
		{"operator only lets an operator", rule([]string{"operator"}, true), agentd.Principal{}, govOp1, ""},
		{"owner only refuses an operator", rule([]string{"owner"}, true), agentd.Principal{}, govOp1, agentd.EAPPROVERNOTALLOWED},
		{"owner only lets the owner", rule([]string{"owner"}, true), agentd.Principal{}, govOwner, ""},
		{"admin only refuses an operator", rule([]string{"admin"}, true), agentd.Principal{}, govOp1, agentd.EAPPROVERNOTALLOWED},
		{"admin only lets an admin", rule([]string{"admin"}, true), agentd.Principal{}, govAdmin, ""},
		{"group refuses a key outside it", rule([]string{"group:finance"}, true), agentd.Principal{}, govOp1, agentd.EAPPROVERNOTALLOWED},
		{"group lets a member", rule([]string{"group:finance"}, true), agentd.Principal{}, govFin, ""},
		{"requester refused", rule([]string{"owner", "operator"}, false), agentd.Principal{}, govOwner, agentd.EREQUESTERMAYNOTAPPROVE},
		{"requester rule lets another key", rule([]string{"owner", "operator"}, false), agentd.Principal{}, govOp1, ""},
		{"an operator requester refused", rule([]string{"operator"}, false), govOp1, govOp1, agentd.EREQUESTERMAYNOTAPPROVE},
		{"an operator requester's run, another operator", rule([]string{"operator"}, false), govOp1, govOp2, ""},
	}
	for _, tc := range cases {
		for _, p := range paths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				f := newGov(t, "", &tc.rule, nil)
				c := f.park(t, tc.sender)
				_, err := p.decide(f.engine, tc.by, c.ID, "approve")
				if agentd.ErrorCode(err) != tc.want && !(tc.want == "" && err == nil) {
					t.Fatalf("approve by %s: %v, want %q", tc.by.KeyID, err, tc.want)
				}
				if tc.want != "" {
					got, _ := f.engine.ToolCall(context.Background(), govAdmin, c.ID)
					if got.Status != agentd.StatusRequiresConfirmation || len(got.Decisions) != 0 {
						t.Fatalf("a refused approval changed the call: %s, %d decisions", got.Status, len(got.Decisions))
					}
					// A deny is a decision too: refused alike.
					if _, err := p.decide(f.engine, tc.by, c.ID, "deny"); agentd.ErrorCode(err) != tc.want {
						t.Fatalf("deny by %s: %v, want %q", tc.by.KeyID, err, tc.want)
					}
					return
				}
				waitFor(t, "the call ran", func() bool { return f.tool.count() == 1 })
			})
		}
	}
}

func rule(approvers []string, requesterMay bool) agentd.ApprovalRule {
	return agentd.ApprovalRule{Approvers: approvers, RequesterMayApprove: requesterMay, Quorum: 1}
}

// TestQuorumTwoApprovals: a quorum of two operators. The first approval is
// recorded (200, status requires_confirmation, confirmation_progress) and
// survives a restart of the engine on the same database; the same key
// again changes nothing; the owner is not an approver; the second
// operator's approval runs the call once and confirmation_resolved names
// both. With the quorum check removed the first approval would run the
// call; with the distinct-key check removed op1's repeat would.
func TestQuorumTwoApprovals(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			r := agentd.ApprovalRule{Approvers: []string{"operator"}, RequesterMayApprove: true, Quorum: 2}
			f := newGov(t, "", &r, nil)
			c := f.park(t, agentd.Principal{})
			if slices.Contains(c.AllowedDecisions, "edit") || c.Card().Approval == nil || c.Card().Approval.Quorum != 2 {
				t.Fatalf("card of a quorum-2 call: allowed %v, approval %+v", c.AllowedDecisions, c.Card().Approval)
			}
			first, err := p.decide(f.engine, govOp1, c.ID, "approve")
			if err != nil || first.Status != agentd.StatusRequiresConfirmation || len(first.Approvals) != 1 || first.Quorum != 2 {
				t.Fatalf("first approval: %+v, %v", first, err)
			}
			ev := f.rec.wait(t, agentd.EventConfirmationProgress, 1)
			var prog agentd.ConfirmationProgressPayload
			if err := json.Unmarshal(ev.Data, &prog); err != nil || prog.Approvals != 1 || prog.Quorum != 2 || !slices.Equal(prog.ApprovedBy, []string{"op1"}) {
				t.Fatalf("confirmation_progress %s", ev.Data)
			}
			// A restart between the approvals loses nothing.
			f.engine.Close()
			f.store.Close()
			g := newGov(t, f.path, &r, f.tool)
			stored, err := g.engine.ToolCall(context.Background(), govAdmin, c.ID)
			if err != nil || stored.Status != agentd.StatusRequiresConfirmation || len(stored.Approvals) != 1 || stored.Card().Approval.Approvals != 1 {
				t.Fatalf("after a restart: %+v, %v", stored, err)
			}
			again, err := p.decide(g.engine, govOp1, c.ID, "approve")
			if err != nil || again.Status != agentd.StatusRequiresConfirmation || len(again.Approvals) != 1 {
				t.Fatalf("op1 again: %+v, %v", again, err)
			}
			if _, err := p.decide(g.engine, govOwner, c.ID, "approve"); agentd.ErrorCode(err) != agentd.EAPPROVERNOTALLOWED {
				t.Fatalf("owner: %v, want approver_not_allowed", err)
			}
			if g.rec.count(agentd.EventConfirmationProgress) != 0 || g.tool.count() != 0 {
				t.Fatalf("a repeat or a refusal counted: progress %d, runs %d", g.rec.count(agentd.EventConfirmationProgress), g.tool.count())
			}
			second, err := p.decide(g.engine, govOp2, c.ID, "approve")
			if err != nil || second.DecidedBy != "op2" || second.ID == "" {
				t.Fatalf("second approval: %+v, %v", second, err)
			}
			res := g.rec.wait(t, agentd.EventConfirmationResolved, 1)
			var rv agentd.ConfirmationResolvedPayload
			if err := json.Unmarshal(res.Data, &rv); err != nil || !slices.Equal(rv.ApprovedBy, []string{"op1", "op2"}) {
				t.Fatalf("confirmation_resolved %s", res.Data)
			}
			waitFor(t, "the call ran", func() bool { return g.tool.count() == 1 })
			g.rec.wait(t, agentd.EventRunFinished, 1)
			if g.tool.count() != 1 {
				t.Fatalf("the call ran %d times", g.tool.count())
			}
			audit, _, err := g.engine.Audit(context.Background(), govAdmin, agentd.AuditQuery{ToolCallID: c.ID})
			if err != nil || len(audit) != 2 || audit[0].Kind != agentd.AuditApproval || audit[0].KeyID != "op1" || audit[1].Kind != agentd.AuditDecision || audit[1].KeyID != "op2" {
				t.Fatalf("audit %+v, %v", audit, err)
			}
		})
	}
}

// keysOf is a key lookup over ps (confirm.Keys), the keys as configured.
func keysOf(ps ...agentd.Principal) confirm.Keys {
	return func(id string) (agentd.Principal, bool) {
		i := slices.IndexFunc(ps, func(p agentd.Principal) bool { return p.KeyID == id })
		if i < 0 {
			return agentd.Principal{}, false
		}
		return ps[i], true
	}
}

// TestQuorumRemovedKey: an approval counts towards the quorum only while
// its key exists and the call's rule covers it: after op1 approved, its
// key is removed and the server restarted; op2's approval is then the
// first of two, not the last, and the call runs only when a second live
// key approves.
func TestQuorumRemovedKey(t *testing.T) {
	r := agentd.ApprovalRule{Approvers: []string{"operator", "admin"}, RequesterMayApprove: true, Quorum: 2}
	f := newGov(t, "", &r, nil)
	c := f.park(t, agentd.Principal{})
	if first, err := f.engine.Decide(context.Background(), govOp1, c.ID, agentd.DecisionRequest{Decision: "approve"}); err != nil || len(first.Approvals) != 1 {
		t.Fatalf("op1's approval: %+v, %v", first, err)
	}
	f.engine.Close()
	f.store.Close()
	g := newGovKeys(t, f.path, &r, f.tool, keysOf(govOwner, govOp2, govAdmin))
	second, err := g.engine.Decide(context.Background(), govOp2, c.ID, agentd.DecisionRequest{Decision: "approve"})
	if err != nil || second.Status != agentd.StatusRequiresConfirmation || len(second.Approvals) != 1 || second.Approvals[0].KeyID != "op2" {
		t.Fatalf("op2 after op1's key was removed: %+v, %v; want the first of two approvals", second, err)
	}
	if g.tool.count() != 0 {
		t.Fatal("the call ran on the approval of a removed key")
	}
	third, err := g.engine.Decide(context.Background(), govAdmin, c.ID, agentd.DecisionRequest{Decision: "approve"})
	if err != nil || third.Status != agentd.StatusApproved {
		t.Fatalf("the second live approval: %+v, %v", third, err)
	}
	res := g.rec.wait(t, agentd.EventConfirmationResolved, 1)
	var rv agentd.ConfirmationResolvedPayload
	if err := json.Unmarshal(res.Data, &rv); err != nil || !slices.Equal(rv.ApprovedBy, []string{"op2", "adm"}) {
		t.Fatalf("confirmation_resolved %s, want approved_by [op2 adm]", res.Data)
	}
	waitFor(t, "the call ran", func() bool { return g.tool.count() == 1 })
}

// TestQuorumDenyAndEdit: one allowed deny denies at once; an edit of a
// call that needs two approvals is refused.
func TestQuorumDenyAndEdit(t *testing.T) {
	r := agentd.ApprovalRule{Approvers: []string{"operator"}, RequesterMayApprove: true, Quorum: 2}
	f := newGov(t, "", &r, nil)
	c := f.park(t, agentd.Principal{})
	_, err := f.engine.Decide(context.Background(), govOp1, c.ID, agentd.DecisionRequest{Decision: "edit", Arguments: json.RawMessage(`{"amount":1}`)})
	if agentd.ErrorCode(err) != agentd.EINVALID {
		t.Fatalf("edit: %v, want invalid", err)
	}
	if _, err := f.engine.Decide(context.Background(), govOp1, c.ID, agentd.DecisionRequest{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	dec, err := f.engine.Decide(context.Background(), govOp2, c.ID, agentd.DecisionRequest{Decision: "deny"})
	if err != nil || dec.Decision != agentd.DecisionDenied {
		t.Fatalf("deny: %+v, %v", dec, err)
	}
	got, _ := f.engine.ToolCall(context.Background(), govAdmin, c.ID)
	if got.Status != agentd.StatusDenied || f.tool.count() != 0 {
		t.Fatalf("after a deny: %s, %d runs", got.Status, f.tool.count())
	}
}

// TestQuorumConcurrentApprovals: three operators approve a quorum-3 call at
// once: each approval counts once (the conditional update on the
// approvals seen), the third reaches the quorum and the call runs once.
func TestQuorumConcurrentApprovals(t *testing.T) {
	r := agentd.ApprovalRule{Approvers: []string{"operator"}, RequesterMayApprove: true, Quorum: 3}
	f := newGov(t, "", &r, nil)
	c := f.park(t, agentd.Principal{})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, p := range []agentd.Principal{govOp1, govOp2, govFin} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.engine.Decide(context.Background(), p, c.ID, agentd.DecisionRequest{Decision: "approve"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("approval %d: %v", i, err)
		}
	}
	waitFor(t, "the call ran", func() bool { return f.tool.count() == 1 })
	res := f.rec.wait(t, agentd.EventConfirmationResolved, 1)
	var rv agentd.ConfirmationResolvedPayload
	if err := json.Unmarshal(res.Data, &rv); err != nil || len(rv.ApprovedBy) != 3 {
		t.Fatalf("confirmation_resolved %s", res.Data)
	}
	if n := f.rec.count(agentd.EventConfirmationProgress); n != 2 {
		t.Fatalf("%d confirmation_progress events, want 2", n)
	}
}

// TestDecidableList: ?decidable=true keeps only the calls the key may
// decide now, paging through the others to fill the page: not a call whose
// approvers leave the key out, not one it requested under
// requester_may_approve false, not one it approved already.
func TestDecidableList(t *testing.T) {
	r := agentd.ApprovalRule{Approvers: []string{"group:finance"}, RequesterMayApprove: false, Quorum: 2}
	f := newGov(t, "", &r, nil)
	var ids []string
	for range 5 {
		ids = append(ids, f.park(t, agentd.Principal{}).ID)
	}
	mine := f.park(t, govFin) // fin requested it
	ctx := context.Background()
	if _, err := f.engine.Decide(ctx, govFin, ids[0], agentd.DecisionRequest{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	list := func(p agentd.Principal, limit int, cursor string) ([]string, string) {
		t.Helper()
		calls, next, err := f.engine.PendingApprovals(ctx, p, agentd.PendingQuery{Decidable: true, Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range calls {
			out = append(out, c.ID)
		}
		return out, next
	}
	if got, _ := list(govOp1, 10, ""); len(got) != 0 {
		t.Errorf("an operator outside the group may decide %v", got)
	}
	got, next := list(govFin, 10, "")
	if !slices.Equal(got, ids[1:]) || next != "" || slices.Contains(got, mine.ID) {
		t.Errorf("fin may decide %v (next %q), want %v", got, next, ids[1:])
	}
	p1, next := list(govFin, 2, "")
	p2, next2 := list(govFin, 2, next)
	if !slices.Equal(append(p1, p2...), ids[1:]) || next2 != "" {
		t.Errorf("pages %v %v (next %q), want %v", p1, p2, next2, ids[1:])
	}
	all, _, err := f.engine.PendingApprovals(ctx, govFin, agentd.PendingQuery{Limit: 10})
	if err != nil || len(all) != 6 {
		t.Errorf("without decidable: %d calls, %v", len(all), err)
	}
}

// ruleTool is a goTool whose confirm.Tool carries its own approval rule
// (tool.json or mcp.json "approval").
type ruleTool struct {
	*goTool
	rule *agentd.ApprovalRule
}

func (r ruleTool) Tools() []toolset.Tool {
	ts := r.goTool.Tools()
	c := *ts[0].Confirm
	c.Approval = r.rule
	ts[0].Confirm = &c
	return ts
}

// A tool's own rule wins over the agent's; without one the agent's
// applies.
func TestToolRuleWinsOverAgent(t *testing.T) {
	agentRule := &agentd.ApprovalRule{Approvers: []string{"owner"}, RequesterMayApprove: true, Quorum: 1}
	toolRule := &agentd.ApprovalRule{Approvers: []string{"admin"}, RequesterMayApprove: true, Quorum: 1}
	tool := &goTool{name: "refund", exposure: "requires-confirmation"}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: &alwaysOnce{name: "refund"}, Tools: registered(t, ruleTool{tool, toolRule}),
		MaxTurns: 5, Approval: agentRule}, loop.Options{ExpireEvery: -1})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	f := &govFixture{store: st, rec: rec, tool: tool, engine: e}
	c := f.park(t, agentd.Principal{})
	if c.Approval == nil || !slices.Equal(c.Approval.Approvers, []string{"admin"}) {
		t.Fatalf("the call's rule is %+v, want the tool's", c.Approval)
	}
	if _, err := e.Decide(context.Background(), govOwner, c.ID, agentd.DecisionRequest{Decision: "approve"}); agentd.ErrorCode(err) != agentd.EAPPROVERNOTALLOWED {
		t.Fatalf("the owner under the tool's rule: %v", err)
	}
	g := newGov(t, "", agentRule, nil)
	if c := g.park(t, agentd.Principal{}); c.Approval == nil || !slices.Equal(c.Approval.Approvers, []string{"owner"}) {
		t.Fatalf("without a tool rule the call's rule is %+v, want the agent's", c.Approval)
	}
}
