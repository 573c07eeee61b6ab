package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// fakeEngine is an in-memory api.Engine with the state and the reach
// rules of the engine, for the tests that need objects to exist: it keeps
// conversations, messages, runs and calls in its store, and answers
// ENOTFOUND for an object the principal does not reach (agentd.Principal
// Reaches), whether or not it exists. Its model is fixed: a message "pay…"
// parks one call of the confirm-tier tool pay with {"amount":5}, "note N"
// one whose arguments hold a note of N bytes, any other message finishes
// its run at once. An approval runs the call at once (counted by executed);
// a denial finishes it. It checks no digest or card and has no expiry: those
// rules are the engine's (loop's tests, cmd/agentd's flows).
type fakeEngine struct {
	store      *fakeStore
	mu         sync.Mutex
	executions int // calls run
}

func newFakeEngine(store *fakeStore) *fakeEngine { return &fakeEngine{store: store} }

var _ api.Engine = (*fakeEngine)(nil)

// executed is how many calls ran.
func (e *fakeEngine) executed() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.executions
}

func (e *fakeEngine) CreateConversation(ctx context.Context, p agentd.Principal, agent string, metadata json.RawMessage) (*agentd.Conversation, error) {
	now := time.Now().UTC()
	c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: p.TenantID, ProjectID: p.ProjectID,
		Agent: "test", Metadata: metadata, CreatedBy: p.KeyID, CreatedAt: now}
	e.store.putConversation(c)
	return c, nil
}

func (e *fakeEngine) Conversation(ctx context.Context, p agentd.Principal, id string) (*agentd.Conversation, error) {
	return e.store.reach(p, id)
}

func (e *fakeEngine) ConversationDetail(ctx context.Context, p agentd.Principal, id string) (*agentd.ConversationDetail, error) {
	c, err := e.store.reach(p, id)
	if err != nil {
		return nil, err
	}
	msgs, _ := e.store.Messages(ctx, id)
	s := e.store
	s.mu.Lock()
	calls := s.callsWhere(func(tc *agentd.ToolCall) bool { return tc.ConversationID == id })
	s.mu.Unlock()
	return &agentd.ConversationDetail{Conversation: c, Messages: msgs, ToolCalls: calls}, nil
}

// Send records the user message and the run, and parks the model's call
// (see fakeEngine).
func (e *fakeEngine) Send(ctx context.Context, p agentd.Principal, conversationID, content string) (*agentd.Run, error) {
	c, err := e.store.reach(p, conversationID)
	if err != nil {
		return nil, err
	}
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.ConversationID == c.ID && r.Status.Active() {
			return nil, agentd.Errorf(agentd.ERUNACTIVE, "the conversation has an active run")
		}
	}
	now := time.Now().UTC()
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: c.ID, TenantID: c.TenantID, ProjectID: c.ProjectID,
		CorrelationID: agentd.NewID("corr"), Status: agentd.RunCompleted, CreatedAt: now, UpdatedAt: now}
	s.messages[c.ID] = append(s.messages[c.ID], agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: c.ID,
		RunID: run.ID, Role: agentd.RoleUser, Content: content, CreatedAt: now})
	if args := modelArguments(content); args != nil {
		digest, err := agentd.DigestJSON(args)
		if err != nil {
			return nil, err
		}
		run.Status, run.Step = agentd.RunWaiting, 1
		call := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: c.TenantID, ProjectID: c.ProjectID,
			ConversationID: c.ID, RunID: run.ID, CorrelationID: run.CorrelationID, Step: 1, Name: "pay", ServerID: "tools",
			Arguments: args, ArgumentsSHA256: digest, Tier: agentd.TierConfirm, Status: agentd.StatusRequiresConfirmation,
			AllowedDecisions: []string{"approve", "deny"}, CreatedAt: now, UpdatedAt: now}
		s.calls[call.ID] = call
	}
	s.runs[run.ID] = run
	cp := *run
	return &cp, nil
}

// modelArguments are the arguments of the call the fake's model makes for
// a user message, nil for none.
func modelArguments(content string) json.RawMessage {
	if n, ok := strings.CutPrefix(content, "note "); ok {
		size, _ := strconv.Atoi(n)
		args, _ := json.Marshal(map[string]string{"note": strings.Repeat("x", size)})
		return args
	}
	if strings.HasPrefix(strings.ToLower(content), "pay") {
		return json.RawMessage(`{"amount":5}`)
	}
	return nil
}

func (e *fakeEngine) Run(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error) {
	r, err := e.store.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := e.store.reach(p, r.ConversationID); err != nil {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "run not found")
	}
	return r, nil
}

// Cancel cancels an active run and its parked calls.
func (e *fakeEngine) Cancel(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error) {
	if _, err := e.Run(ctx, p, id); err != nil {
		return nil, err
	}
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[id]
	switch {
	case r.Status == agentd.RunCancelled:
	case !r.Status.Active():
		return nil, agentd.Errorf(agentd.ECONFLICT, "the run is %s", r.Status)
	default:
		r.Status = agentd.RunCancelled
		for _, c := range s.calls {
			if c.RunID == id && c.Status == agentd.StatusRequiresConfirmation {
				c.Status = agentd.StatusCancelled
			}
		}
	}
	cp := *r
	return &cp, nil
}

func (e *fakeEngine) ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	c, err := e.store.ToolCall(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := e.store.reach(p, c.ConversationID); err != nil {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call not found")
	}
	return c, nil
}

// Decide applies an approval (the call runs at once) or a denial to a
// parked call the principal reaches and may decide.
func (e *fakeEngine) Decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error) {
	if !p.MayDecide() {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	}
	c, err := e.ToolCall(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if req.ConversationID != "" && req.ConversationID != c.ConversationID {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call not found")
	}
	status, decision := agentd.StatusDenied, agentd.DecisionDenied
	switch req.Decision {
	case "approve":
		status, decision = agentd.StatusCompleted, agentd.DecisionApproved
	case "deny":
	default:
		return nil, agentd.Errorf(agentd.EINVALID, "decision must be approve or deny")
	}
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	call := s.calls[id]
	if call.Status != agentd.StatusRequiresConfirmation {
		return nil, agentd.Errorf(agentd.ECONFLICT, "the call is %s", call.Status)
	}
	via := req.Via
	if via == "" {
		via = agentd.ViaSingle
	}
	d := agentd.Decision{ID: agentd.NewID(agentd.PrefixDecision), ToolCallID: id, Decision: decision, Reason: req.Reason,
		DecidedBy: p.KeyID, Role: p.Role, Via: via, ArgumentsSHA256: call.ArgumentsSHA256, CreatedAt: time.Now().UTC()}
	call.Status, call.Decisions = status, append(call.Decisions, d)
	s.runs[call.RunID].Status = agentd.RunCompleted
	if status == agentd.StatusCompleted {
		e.mu.Lock()
		e.executions++
		e.mu.Unlock()
	}
	return &d, nil
}

// DecideBatch refuses a delegate's batch and decides each item as Decide
// would, in order (the fake has no all-or-nothing: that rule is the
// engine's).
func (e *fakeEngine) DecideBatch(ctx context.Context, p agentd.Principal, items []agentd.BatchDecisionItem, atomic bool) ([]agentd.BatchDecisionResult, error) {
	if !p.MayDecide() {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	}
	ds := make([]agentd.CallDecision, len(items))
	for i, it := range items {
		d := "deny"
		if it.Approve {
			d = "approve"
		}
		ds[i] = agentd.CallDecision{ToolCallID: it.ToolCallID, Request: agentd.DecisionRequest{Decision: d, Reason: it.Reason, Via: agentd.ViaBulk}}
	}
	return e.DecideAll(ctx, p, ds, false)
}

// DecideAll decides each as Decide would, in order (the fake has no
// all-or-nothing: that rule is the engine's).
func (e *fakeEngine) DecideAll(ctx context.Context, p agentd.Principal, ds []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error) {
	out := make([]agentd.BatchDecisionResult, len(ds))
	for i, d := range ds {
		dec, err := e.Decide(ctx, p, d.ToolCallID, d.Request)
		if err != nil {
			out[i] = agentd.BatchDecisionResult{ToolCallID: d.ToolCallID, Status: agentd.BatchFailed, Error: agentd.NewItemError(err)}
			continue
		}
		out[i] = agentd.BatchDecisionResult{ToolCallID: d.ToolCallID, Status: agentd.BatchApplied, Decision: dec}
	}
	return out, nil
}

// PendingApprovals pages the parked calls p reaches that match q, in ID
// order after q.Cursor.
func (e *fakeEngine) PendingApprovals(ctx context.Context, p agentd.Principal, q agentd.PendingQuery) ([]agentd.ToolCall, string, error) {
	limit := q.Limit
	if limit == 0 {
		limit = 50
	}
	s := e.store
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.callsWhere(func(c *agentd.ToolCall) bool {
		conv := s.convs[c.ConversationID]
		return c.Status == agentd.StatusRequiresConfirmation && p.Reaches(conv) && c.ID > q.Cursor &&
			(q.ConversationID == "" || c.ConversationID == q.ConversationID) && (q.ToolName == "" || c.Name == q.ToolName) &&
			(q.ServerID == "" || c.ServerID == q.ServerID) &&
			(q.ExpiresBefore.IsZero() || c.RequiresApprovalAt != nil && c.RequiresApprovalAt.Before(q.ExpiresBefore))
	})
	if len(calls) > limit {
		return calls[:limit], calls[limit-1].ID, nil
	}
	return calls, "", nil
}

// Audit answers an empty log to an operator or admin key.
func (e *fakeEngine) Audit(ctx context.Context, p agentd.Principal, q agentd.AuditQuery) ([]agentd.AuditEntry, int64, error) {
	if !p.SeesAll() {
		return nil, 0, agentd.Errorf(agentd.EFORBIDDEN, "the audit log is for operator and admin keys")
	}
	return []agentd.AuditEntry{}, 0, nil
}

func (e *fakeEngine) ToolSpecs(string) []agentd.ToolSpec {
	return []agentd.ToolSpec{{Name: "pay", Description: "pays", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (e *fakeEngine) ToolTier(name string) (agentd.Tier, string) { return agentd.TierConfirm, "tools" }

func (e *fakeEngine) Extend(ctx context.Context, p agentd.Principal, id string, req agentd.ExtendRequest) (*agentd.ToolCall, error) {
	return nil, agentd.Errorf(agentd.EUNSUPPORTED, "not in this fake")
}

func (e *fakeEngine) Grants(ctx context.Context, p agentd.Principal, cursor string, limit int) ([]agentd.Grant, string, error) {
	return []agentd.Grant{}, "", nil
}

func (e *fakeEngine) RevokeGrant(ctx context.Context, p agentd.Principal, id string) (*agentd.Grant, error) {
	return nil, agentd.Errorf(agentd.ENOTFOUND, "grant not found")
}

func (e *fakeEngine) Inputs(ctx context.Context, p agentd.Principal, q agentd.InputQuery) ([]agentd.Input, string, error) {
	return []agentd.Input{}, "", nil
}

func (e *fakeEngine) Input(ctx context.Context, p agentd.Principal, id string) (*agentd.Input, error) {
	return nil, agentd.Errorf(agentd.ENOTFOUND, "input not found")
}

func (e *fakeEngine) AnswerInput(ctx context.Context, p agentd.Principal, id string, a agentd.InputAnswer) (*agentd.Input, error) {
	return nil, agentd.Errorf(agentd.ENOTFOUND, "input not found")
}
