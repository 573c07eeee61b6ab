package loop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/toolset"
)

// These tests pin remembered grants (SPEC §11.2) through the engine over
// a real SQLite file: each check that decides whether a grant answers a
// card (a hook's ask, scope, expiry, revocation, the creator's reach, the
// match) has a run that fails when the check is removed.

// argsModel calls its tool with the user message as the arguments, then
// answers.
type argsModel struct{ name string }

func (m *argsModel) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(string)) (*agentd.ModelResponse, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == agentd.RoleUser {
		return &agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: m.name, Arguments: json.RawMessage(req.Messages[n-1].Content)}}}, nil
	}
	return &agentd.ModelResponse{Text: "done"}, nil
}

// askHook asks for confirmation of every call while ask is set (only at
// execution while atExecute is set too).
type askHook struct{ ask, atExecute atomic.Bool }

func (h *askHook) PreToolUse(ctx context.Context, c toolset.HookCall) *confirm.HookVerdict {
	if !h.ask.Load() || (h.atExecute.Load() && c.Phase != toolset.PhaseExecute) {
		return nil
	}
	return &confirm.HookVerdict{Verdict: confirm.HookAsk, Hook: "gate"}
}

func (h *askHook) PostToolUse(context.Context, toolset.HookCall, agentd.CallStatus, json.RawMessage, string) error {
	return nil
}

type grantFixture struct {
	store  *sqlite.DB
	rec    *recorder
	clock  *fakeClock
	tool   *goTool
	hook   *askHook
	engine *loop.Engine
	runs   int // runs finished so far
}

func newGrantFixture(t *testing.T, rule *agentd.ApprovalRule) *grantFixture {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	f := &grantFixture{store: st, rec: newRecorder(), tool: &goTool{name: "lookup", exposure: "requires-confirmation"}, hook: &askHook{},
		clock: &fakeClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}}
	f.engine = loop.New(st, f.rec, &loop.Agent{Name: "a", Model: &argsModel{name: "lookup"}, Tools: registered(t, f.tool), Hooks: f.hook,
		ApprovalTimeout: 10 * time.Minute, MaxTurns: 5, Approval: rule}, loop.Options{Clock: f.clock, ExpireEvery: -1})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.engine.Close(); st.Close() })
	return f
}

// restart replaces the engine with one over the same store whose agent
// has rule and Options.Keys keys: a server restarted with its
// configuration changed.
func (f *grantFixture) restart(t *testing.T, rule *agentd.ApprovalRule, keys confirm.Keys) {
	t.Helper()
	f.engine.Close()
	f.engine = loop.New(f.store, f.rec, &loop.Agent{Name: "a", Model: &argsModel{name: "lookup"}, Tools: registered(t, f.tool), Hooks: f.hook,
		ApprovalTimeout: 10 * time.Minute, MaxTurns: 5, Approval: rule}, loop.Options{Clock: f.clock, ExpireEvery: -1, Keys: keys})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// send sends args on conv as p and reports the call: parked (its card)
// or run under a grant (granted_by), waiting for what happened. A parked
// call is denied so the conversation may go on.
func (f *grantFixture) send(t *testing.T, p agentd.Principal, conv, args string) (parked *agentd.ToolCall, granted *agentd.GrantRef) {
	t.Helper()
	ctx := context.Background()
	cards := f.rec.count(agentd.EventConfirmationRequired)
	if _, err := f.engine.Send(ctx, p, conv, args); err != nil {
		t.Fatal(err)
	}
	f.runs++
	if f.tryPark(t, cards) {
		ev := f.rec.wait(t, agentd.EventConfirmationRequired, cards+1)
		var d struct {
			ID string `json:"tool_call_id"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		c, err := f.engine.ToolCall(ctx, govAdmin, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return c, nil
	}
	started := f.rec.wait(t, agentd.EventToolCallStarted, f.rec.count(agentd.EventToolCallStarted))
	var s agentd.ToolCallStartedPayload
	if err := json.Unmarshal(started.Data, &s); err != nil {
		t.Fatal(err)
	}
	return nil, s.GrantedBy
}

// tryPark waits for the run to park a call (true) or finish (false).
func (f *grantFixture) tryPark(t *testing.T, cards int) bool {
	t.Helper()
	for {
		if f.rec.count(agentd.EventConfirmationRequired) > cards {
			return true
		}
		if f.rec.count(agentd.EventRunFinished) >= f.runs {
			return false
		}
		select {
		case <-f.rec.notify:
		case <-time.After(30 * time.Second):
			t.Fatal("the run neither parked nor finished")
		}
	}
}

// decide decides c as p and waits for the run to finish.
func (f *grantFixture) decide(t *testing.T, p agentd.Principal, c *agentd.ToolCall, req agentd.DecisionRequest) (*agentd.Decision, error) {
	t.Helper()
	d, err := f.engine.Decide(context.Background(), p, c.ID, req)
	if err == nil {
		f.rec.wait(t, agentd.EventRunFinished, f.runs)
	}
	return d, err
}

func (f *grantFixture) conversation(t *testing.T, p agentd.Principal) string {
	t.Helper()
	c, err := f.engine.CreateConversation(context.Background(), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func remember(scope, ttl, match string) *agentd.Remember {
	r := &agentd.Remember{Scope: scope, TTL: ttl}
	if match != "" {
		r.Match = json.RawMessage(match)
	}
	return r
}

// TestRememberedGrant: a conversation grant with match exact answers the
// next identical call (tool_call_started.granted_by, an audit entry of
// its use) and not one with other arguments, not in another
// conversation, not when a hook asks (at classification or at execution),
// not after its expiry and not after
// its revocation; a constraint grant covers a small amount and not a
// large one.
func TestRememberedGrant(t *testing.T) {
	f := newGrantFixture(t, &agentd.ApprovalRule{Approvers: []string{"owner", "operator", "admin"}, RequesterMayApprove: true, Quorum: 1,
		AllowRemember: true, GrantMaxTTL: "12h"})
	ctx := context.Background()
	conv := f.conversation(t, govOwner)
	c, _ := f.send(t, govOwner, conv, `{"q":"a"}`)
	if c == nil || !slices.Contains(c.AllowedDecisions, "remember") {
		t.Fatalf("first call %+v: want a card offering remember", c)
	}
	if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("conversation", "1h", "")}); err != nil {
		t.Fatal(err)
	}
	created := f.rec.wait(t, agentd.EventGrantCreated, 1)
	var gc agentd.GrantCreatedPayload
	_ = json.Unmarshal(created.Data, &gc)
	if gc.Scope != "conversation" || gc.ToolName != "lookup" || !gc.ExpiresAt.Equal(f.clock.Now().Add(time.Hour)) || created.ConversationID != conv {
		t.Fatalf("grant_created %s", created.Data)
	}

	if c, g := f.send(t, govOwner, conv, `{"q":"a"}`); c != nil || g == nil || g.GrantID != gc.GrantID || g.KeyID != "owner" {
		t.Fatalf("the identical call: card %v, granted_by %+v; want it run under %s", c != nil, g, gc.GrantID)
	}
	if n := f.tool.count(); n != 2 {
		t.Fatalf("the tool ran %d times, want 2", n)
	}
	if c, _ := f.send(t, govOwner, conv, `{"q":"b"}`); c == nil {
		t.Fatal("a call with other arguments ran without a card")
	} else if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	other := f.conversation(t, govOwner)
	if c, _ := f.send(t, govOwner, other, `{"q":"a"}`); c == nil {
		t.Fatal("a conversation grant applied in another conversation")
	} else if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	f.hook.ask.Store(true)
	if c, _ := f.send(t, govOwner, conv, `{"q":"a"}`); c == nil {
		t.Fatal("a grant answered a hook's ask")
	} else if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	f.hook.atExecute.Store(true) // allows at classification, asks at execution
	if c, _ := f.send(t, govOwner, conv, `{"q":"a"}`); c == nil || !c.Escalated {
		t.Fatalf("a granted call a hook asks for at execution: %+v, want it parked again", c)
	} else if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	f.hook.ask.Store(false)
	f.hook.atExecute.Store(false)

	// Revoked by its creator: the card is back; the audit has the three.
	if _, err := f.engine.RevokeGrant(ctx, govOwner, gc.GrantID); err != nil {
		t.Fatal(err)
	}
	f.rec.wait(t, agentd.EventGrantRevoked, 1)
	if c, _ := f.send(t, govOwner, conv, `{"q":"a"}`); c == nil {
		t.Fatal("a revoked grant applied")
	} else if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "approve",
		Remember: remember("conversation", "1h", `{"amount":{"max":100}}`)}); err != nil {
		t.Fatal(err)
	}
	entries, _, err := f.engine.Audit(ctx, govAdmin, agentd.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		if strings.HasPrefix(e.Kind, "grant_") {
			kinds = append(kinds, e.Kind)
		}
	}
	if !slices.Equal(kinds, []string{"grant_created", "grant_use", "grant_revoked", "grant_created"}) {
		t.Fatalf("grant audit entries %v", kinds)
	}

	// A constraint grant: a small amount runs, a large one gets a card.
	if c, g := f.send(t, govOwner, conv, `{"amount":40}`); c != nil || g == nil {
		t.Fatal("a small amount did not run under the max grant")
	}
	if c, _ := f.send(t, govOwner, conv, `{"amount":400}`); c == nil {
		t.Fatal("a large amount ran under the max grant")
	} else if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "deny"}); err != nil {
		t.Fatal(err)
	}
	// Past its expiry: a card.
	f.clock.Advance(2 * time.Hour)
	if c, _ := f.send(t, govOwner, conv, `{"amount":40}`); c == nil {
		t.Fatal("an expired grant applied")
	}
}

// TestGrantCreatorReach: a client's project grant applies only in that
// client's own conversations, an operator's in every conversation of the
// project; the grants list of a client holds only its conversations'.
func TestGrantCreatorReach(t *testing.T) {
	f := newGrantFixture(t, &agentd.ApprovalRule{Approvers: []string{"owner", "operator"}, RequesterMayApprove: true, Quorum: 1, AllowRemember: true})
	other := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "other"}
	mine := f.conversation(t, govOwner)
	c, _ := f.send(t, govOwner, mine, `{"q":"a"}`)
	if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "", `"any"`)}); err != nil {
		t.Fatal(err)
	}
	theirs := f.conversation(t, other)
	if c, _ := f.send(t, other, theirs, `{"q":"a"}`); c == nil {
		t.Fatal("a client's project grant applied in another client's conversation")
	} else if _, err := f.decide(t, govOp1, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "", `"any"`)}); err != nil {
		t.Fatal(err)
	}
	if c, g := f.send(t, other, theirs, `{"q":"z"}`); c != nil || g == nil || g.KeyID != "op1" {
		t.Fatalf("an operator's project grant: card %v, granted_by %+v", c != nil, g)
	}
	if _, g := f.send(t, govOwner, mine, `{"q":"z"}`); g == nil {
		t.Fatal("no grant in the owner's conversation")
	}
	gs, _, err := f.engine.Grants(context.Background(), other, "", 0)
	if err != nil || len(gs) != 1 || gs[0].CreatedBy != "op1" {
		t.Fatalf("the other client's grants: %+v, %v; want the one made in its conversation", gs, err)
	}
	all, _, _ := f.engine.Grants(context.Background(), govOp2, "", 0)
	if len(all) != 2 {
		t.Fatalf("an operator sees %d grants, want 2", len(all))
	}
	// The other client may not revoke the operator's grant made in its
	// conversation (403), and does not see the owner's (404).
	for _, g := range all {
		want := agentd.ENOTFOUND
		if g.CreatedBy == "op1" {
			want = agentd.EFORBIDDEN
		}
		if _, err := f.engine.RevokeGrant(context.Background(), other, g.ID); agentd.ErrorCode(err) != want {
			t.Errorf("the other client revoking %s's grant: %v, want %s", g.CreatedBy, err, want)
		}
	}
	if _, err := f.engine.RevokeGrant(context.Background(), govOp2, gs[0].ID); err != nil {
		t.Fatalf("an operator revoking another's grant: %v", err)
	}
}

// TestRememberErrors: a remember where the rule does not allow it is
// remember_not_allowed (403), a ttl above grant_max_ttl is
// grant_ttl_exceeds_max (422), a bad scope, ttl or match or a remembered
// deny is EINVALID naming the field; none decides the call.
func TestRememberErrors(t *testing.T) {
	f := newGrantFixture(t, &agentd.ApprovalRule{Approvers: []string{"owner"}, RequesterMayApprove: true, Quorum: 1, AllowRemember: true, GrantMaxTTL: "2h"})
	conv := f.conversation(t, govOwner)
	c, _ := f.send(t, govOwner, conv, `{"q":"a"}`)
	for _, x := range []struct {
		req  agentd.DecisionRequest
		code string
		msg  string
	}{
		{agentd.DecisionRequest{Decision: "approve", Remember: remember("conversation", "3h", "")}, agentd.EGRANTTTLEXCEEDSMAX, "remember.ttl"},
		{agentd.DecisionRequest{Decision: "approve", Remember: remember("tenant", "", "")}, agentd.EINVALID, "remember.scope"},
		{agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "soon", "")}, agentd.EINVALID, "remember.ttl"},
		{agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "", `"all"`)}, agentd.EINVALID, "remember.match"},
		{agentd.DecisionRequest{Decision: "deny", Remember: remember("project", "", "")}, agentd.EINVALID, "remember"},
	} {
		_, err := f.engine.Decide(context.Background(), govOwner, c.ID, x.req)
		if agentd.ErrorCode(err) != x.code || !strings.Contains(err.Error(), x.msg) {
			t.Errorf("%+v: %v, want %s naming %s", x.req.Remember, err, x.code, x.msg)
		}
	}
	if got, _ := f.engine.ToolCall(context.Background(), govOwner, c.ID); got.Status != agentd.StatusRequiresConfirmation {
		t.Fatalf("a refused remember decided the call: %s", got.Status)
	}

	g := newGrantFixture(t, nil) // the default rule: no remember
	conv = g.conversation(t, govOwner)
	c, _ = g.send(t, govOwner, conv, `{"q":"a"}`)
	if slices.Contains(c.AllowedDecisions, "remember") {
		t.Fatalf("the default rule's card offers remember: %v", c.AllowedDecisions)
	}
	_, err := g.engine.Decide(context.Background(), govOwner, c.ID, agentd.DecisionRequest{Decision: "approve", Remember: remember("conversation", "", "")})
	if agentd.ErrorCode(err) != agentd.EREMEMBERNOTALLOWED {
		t.Fatalf("remember without allow_remember: %v", err)
	}
}

// TestGrantTightenedRule: a grant made under quorum 1 with allow_remember
// answers a call only while the call's rule as configured now still
// allows remembering with a quorum of 1, and while its creator's key
// exists: after a restart with quorum 2, without allow_remember, or with
// the creator's key removed, the same call gets its card; with the rule
// and key restored the grant answers again.
func TestGrantTightenedRule(t *testing.T) {
	loose := agentd.ApprovalRule{Approvers: []string{"owner", "operator", "admin"}, RequesterMayApprove: true, Quorum: 1, AllowRemember: true}
	f := newGrantFixture(t, &loose)
	conv := f.conversation(t, govOwner)
	c, _ := f.send(t, govOwner, conv, `{"q":"a"}`)
	if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "", `"any"`)}); err != nil {
		t.Fatal(err)
	}
	quorum2 := loose
	quorum2.Quorum, quorum2.AllowRemember = 2, false
	noRemember := loose
	noRemember.AllowRemember = false
	for _, tc := range []struct {
		name string
		rule agentd.ApprovalRule
		keys confirm.Keys
	}{
		{"the rule now needs two approvals", quorum2, nil},
		{"the rule no longer allows remember", noRemember, nil},
		{"the creator's key was removed", loose, keysOf(govOp1, govAdmin)},
	} {
		f.restart(t, &tc.rule, tc.keys)
		c, g := f.send(t, govOwner, conv, `{"q":"a"}`)
		if c == nil {
			t.Fatalf("%s: the call ran under grant %+v, want a card", tc.name, g)
		}
		if _, err := f.decide(t, govAdmin, c, agentd.DecisionRequest{Decision: "deny"}); err != nil {
			t.Fatal(err)
		}
	}
	f.restart(t, &loose, keysOf(govOwner, govAdmin))
	if c, g := f.send(t, govOwner, conv, `{"q":"a"}`); c != nil || g == nil || g.KeyID != "owner" {
		t.Fatalf("with the rule and the key restored: card %v, granted_by %+v; want the owner's grant", c != nil, g)
	}
}

// TestGrantByRequester: under requester_may_approve false a grant made by
// the key that started the run does not answer that run's calls (the
// creator could not decide them itself); a grant made by another approver
// does.
func TestGrantByRequester(t *testing.T) {
	f := newGrantFixture(t, &agentd.ApprovalRule{Approvers: []string{"owner", "operator"}, RequesterMayApprove: false, Quorum: 1, AllowRemember: true})
	conv := f.conversation(t, govOwner)
	c, _ := f.send(t, govOwner, conv, `{"q":"a"}`)
	if _, err := f.decide(t, govOp1, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "", `"any"`)}); err != nil {
		t.Fatal(err)
	}
	c, g := f.send(t, govOp1, conv, `{"q":"a"}`)
	if c == nil {
		t.Fatalf("op1's own grant answered a call of a run op1 requested (granted_by %+v)", g)
	}
	if _, err := f.decide(t, govOp2, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("project", "", `"any"`)}); err != nil {
		t.Fatal(err)
	}
	if c, g := f.send(t, govOp1, conv, `{"q":"a"}`); c != nil || g == nil || g.KeyID != "op2" {
		t.Fatalf("a run op1 requested: card %v, granted_by %+v; want op2's grant", c != nil, g)
	}
}

// TestExactGrantCoversOnlyItsNumber: an exact grant for one integer above
// 2^53 does not run a call for its neighbour, which reads as the same
// double: that call is refused before any grant is looked at, the tool
// does not run, and the refusal the model reads names the number.
func TestExactGrantCoversOnlyItsNumber(t *testing.T) {
	f := newGrantFixture(t, &agentd.ApprovalRule{Approvers: []string{"owner"}, RequesterMayApprove: true, Quorum: 1, AllowRemember: true})
	conv := f.conversation(t, govOwner)
	c, _ := f.send(t, govOwner, conv, `{"account":12345678901234568}`)
	if c == nil {
		t.Fatal("the first call did not park")
	}
	if _, err := f.decide(t, govOwner, c, agentd.DecisionRequest{Decision: "approve", Remember: remember("conversation", "1h", "")}); err != nil {
		t.Fatal(err)
	}
	if _, g := f.send(t, govOwner, conv, `{"account":12345678901234568}`); g == nil {
		t.Fatal("the granted call itself did not run under its grant")
	}
	ran := f.tool.count()
	refused := f.rec.count(agentd.EventToolCallRefused)
	if _, err := f.engine.Send(context.Background(), govOwner, conv, `{"account":12345678901234567}`); err != nil {
		t.Fatal(err)
	}
	f.runs++
	ev := f.rec.wait(t, agentd.EventToolCallRefused, refused+1)
	f.rec.wait(t, agentd.EventRunFinished, f.runs)
	var p agentd.ToolCallRefusedPayload
	if err := json.Unmarshal(ev.Data, &p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Reason, "12345678901234567") || !strings.Contains(p.Reason, "as a string") || f.tool.count() != ran {
		t.Fatalf("the neighbour's call: refused with %q, the tool ran %d more times; want refused, naming the number, not run", p.Reason, f.tool.count()-ran)
	}
}
