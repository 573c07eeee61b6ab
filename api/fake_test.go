package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/sse"
)

// fakeService is an in-memory api.Engine that records what each call
// received, so handler tests check the HTTP layer alone: it keeps the
// conversations it creates (in its store), answers every other id as an
// object that exists (a run, a call of no conversation), and answers with
// the error fail names when set. fakeEngine is the fake that keeps runs
// and calls and the rules of who reaches them.
type fakeService struct {
	mu    sync.Mutex
	store *fakeStore
	fail  error // every call answers it when set
	calls []fakeCall
}

// fakeCall is one call the handlers made.
type fakeCall struct {
	method string
	p      agentd.Principal
	id     string
	req    any
}

func newFake(store *fakeStore) *fakeService { return &fakeService{store: store} }

func (f *fakeService) record(method string, p agentd.Principal, id string, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{method, p, id, req})
	return f.fail
}

func (f *fakeService) last() fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return fakeCall{}
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeService) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeService) CreateConversation(ctx context.Context, p agentd.Principal, agent string, metadata json.RawMessage) (*agentd.Conversation, error) {
	if err := f.record("CreateConversation", p, agent, metadata); err != nil {
		return nil, err
	}
	c := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: p.TenantID, ProjectID: p.ProjectID,
		Agent: "a", Metadata: metadata, CreatedBy: p.KeyID, CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	f.store.putConversation(c)
	return c, nil
}

func (f *fakeService) conv(p agentd.Principal, id string) (*agentd.Conversation, error) {
	return f.store.reach(p, id)
}

func (f *fakeService) Conversation(ctx context.Context, p agentd.Principal, id string) (*agentd.Conversation, error) {
	if err := f.record("Conversation", p, id, nil); err != nil {
		return nil, err
	}
	return f.conv(p, id)
}

func (f *fakeService) ConversationDetail(ctx context.Context, p agentd.Principal, id string) (*agentd.ConversationDetail, error) {
	if err := f.record("ConversationDetail", p, id, nil); err != nil {
		return nil, err
	}
	c, err := f.conv(p, id)
	if err != nil {
		return nil, err
	}
	return &agentd.ConversationDetail{Conversation: c}, nil
}

func (f *fakeService) Send(ctx context.Context, p agentd.Principal, id, content string) (*agentd.Run, error) {
	if err := f.record("Send", p, id, content); err != nil {
		return nil, err
	}
	if _, err := f.conv(p, id); err != nil {
		return nil, err
	}
	return &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: id, CorrelationID: "corr-1", Status: agentd.RunRunning}, nil
}

func (f *fakeService) Run(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error) {
	if err := f.record("Run", p, id, nil); err != nil {
		return nil, err
	}
	return &agentd.Run{ID: id, Status: agentd.RunWaiting}, nil
}

func (f *fakeService) Cancel(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error) {
	if err := f.record("Cancel", p, id, nil); err != nil {
		return nil, err
	}
	return &agentd.Run{ID: id, Status: agentd.RunCancelled}, nil
}

func (f *fakeService) ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	if err := f.record("ToolCall", p, id, nil); err != nil {
		return nil, err
	}
	return &agentd.ToolCall{ID: id, Status: agentd.StatusRequiresConfirmation}, nil
}

func (f *fakeService) Decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error) {
	if err := f.record("Decide", p, id, req); err != nil {
		return nil, err
	}
	if req.ConversationID != "" {
		// The fake's calls belong to no conversation.
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call not found")
	}
	return &agentd.Decision{ID: "dec_1", ToolCallID: id, Decision: agentd.DecisionApproved, DecidedBy: p.KeyID}, nil
}

// DecideAll decides each through Decide, stopping at the first error,
// which it answers as the decision's failed result.
func (f *fakeService) DecideAll(ctx context.Context, p agentd.Principal, ds []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error) {
	out := make([]agentd.BatchDecisionResult, len(ds))
	for i, d := range ds {
		dec, err := f.Decide(ctx, p, d.ToolCallID, d.Request)
		if err != nil {
			out[i] = agentd.BatchDecisionResult{ToolCallID: d.ToolCallID, Status: agentd.BatchFailed, Error: agentd.NewItemError(err)}
			return out, nil
		}
		out[i] = agentd.BatchDecisionResult{ToolCallID: d.ToolCallID, Status: agentd.BatchApplied, Decision: dec}
	}
	return out, nil
}

func (f *fakeService) PendingApprovals(ctx context.Context, p agentd.Principal, q agentd.PendingQuery) ([]agentd.ToolCall, string, error) {
	if err := f.record("PendingApprovals", p, q.Cursor, q); err != nil {
		return nil, "", err
	}
	return []agentd.ToolCall{}, "", nil
}

// DecideBatch answers each item applied (approved or denied as asked),
// but an item whose tool call id is "ghost" failed as not found.
func (f *fakeService) DecideBatch(ctx context.Context, p agentd.Principal, items []agentd.BatchDecisionItem, atomic bool) ([]agentd.BatchDecisionResult, error) {
	if err := f.record("DecideBatch", p, fmt.Sprint(atomic), items); err != nil {
		return nil, err
	}
	out := make([]agentd.BatchDecisionResult, len(items))
	for i, it := range items {
		if it.ToolCallID == "ghost" {
			out[i] = agentd.BatchDecisionResult{ToolCallID: it.ToolCallID, Status: agentd.BatchFailed,
				Error: agentd.NewItemError(agentd.Errorf(agentd.ENOTFOUND, "tool call not found"))}
			continue
		}
		d := agentd.DecisionDenied
		if it.Approve {
			d = agentd.DecisionApproved
		}
		out[i] = agentd.BatchDecisionResult{ToolCallID: it.ToolCallID, Status: agentd.BatchApplied,
			Decision: &agentd.Decision{ID: fmt.Sprintf("dec_%d", i), ToolCallID: it.ToolCallID, Decision: d, DecidedBy: p.KeyID, Via: agentd.ViaBulk}}
	}
	return out, nil
}

// Audit answers one decision entry and, when the query has no cursor, the
// next cursor 7.
func (f *fakeService) Audit(ctx context.Context, p agentd.Principal, q agentd.AuditQuery) ([]agentd.AuditEntry, int64, error) {
	if err := f.record("Audit", p, "", q); err != nil {
		return nil, 0, err
	}
	next := int64(7)
	if q.Cursor != 0 {
		next = 0
	}
	return []agentd.AuditEntry{{ID: 7, Kind: agentd.AuditDecision, TenantID: p.TenantID, ProjectID: p.ProjectID, KeyID: p.KeyID}}, next, nil
}

func (f *fakeService) ToolSpecs(string) []agentd.ToolSpec {
	return []agentd.ToolSpec{{Name: "pay", Description: "pays", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (f *fakeService) ToolTier(name string) (agentd.Tier, string) { return agentd.TierConfirm, "tools" }

var _ api.Engine = (*fakeService)(nil)

// newFakeServer serves the API over the recording fake and an in-memory
// store on loopback.
func newFakeServer(t *testing.T, keys []testKey, cfg api.Config) (*server, *fakeService) {
	t.Helper()
	store := newFakeStore()
	fake := newFake(store)
	return serve(t, fake, store, keys, cfg), fake
}

// serve starts the API over engine and store on loopback, with keys (none:
// dev mode) and the other settings of cfg.
func serve(t *testing.T, engine api.Engine, store api.StoreReads, keys []testKey, cfg api.Config) *server {
	t.Helper()
	hub := sse.NewHub()
	for _, k := range keys {
		cfg.Keys = append(cfg.Keys, k.apiKey())
	}
	ts := httptest.NewServer(api.New(engine, hub, store, cfg).Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(hub.Close)
	return &server{t: t, url: ts.URL}
}

func (f *fakeService) Extend(ctx context.Context, p agentd.Principal, id string, req agentd.ExtendRequest) (*agentd.ToolCall, error) {
	return nil, agentd.Errorf(agentd.EUNSUPPORTED, "not in this fake")
}

// Grants answers one grant of p's tenant and project; its cursor is
// recorded as the request.
func (f *fakeService) Grants(ctx context.Context, p agentd.Principal, cursor string, limit int) ([]agentd.Grant, string, error) {
	if err := f.record("Grants", p, "", cursor); err != nil {
		return nil, "", err
	}
	return []agentd.Grant{{ID: "grant_1", TenantID: p.TenantID, ProjectID: p.ProjectID, Scope: agentd.GrantConversation,
		ConversationID: "conv_1", ToolCallID: "call_1", ToolName: "pay", Match: json.RawMessage(`"exact"`), CreatedBy: p.KeyID,
		CreatedAt: time.Unix(0, 0).UTC(), ExpiresAt: time.Unix(3600, 0).UTC()}}, "", nil
}

// RevokeGrant records the id and answers a revoked grant.
func (f *fakeService) RevokeGrant(ctx context.Context, p agentd.Principal, id string) (*agentd.Grant, error) {
	if err := f.record("RevokeGrant", p, id, nil); err != nil {
		return nil, err
	}
	at := time.Unix(60, 0).UTC()
	return &agentd.Grant{ID: id, TenantID: p.TenantID, ProjectID: p.ProjectID, Scope: agentd.GrantProject, ConversationID: "conv_1",
		ToolCallID: "call_1", ToolName: "pay", Match: json.RawMessage(`"any"`), CreatedBy: p.KeyID,
		CreatedAt: time.Unix(0, 0).UTC(), ExpiresAt: time.Unix(3600, 0).UTC(), RevokedAt: &at, RevokedBy: p.KeyID}, nil
}

// Inputs answers one pending input of p's tenant and project; the query is
// recorded as the request.
func (f *fakeService) Inputs(ctx context.Context, p agentd.Principal, q agentd.InputQuery) ([]agentd.Input, string, error) {
	if err := f.record("Inputs", p, "", q); err != nil {
		return nil, "", err
	}
	return []agentd.Input{fakeInput(p, "inp_1")}, "", nil
}

// Input answers a pending input with the id.
func (f *fakeService) Input(ctx context.Context, p agentd.Principal, id string) (*agentd.Input, error) {
	if err := f.record("Input", p, id, nil); err != nil {
		return nil, err
	}
	in := fakeInput(p, id)
	return &in, nil
}

// AnswerInput records the answer; content {"bad": …} is refused as
// invalid_input naming two fields, anything else answers the input.
func (f *fakeService) AnswerInput(ctx context.Context, p agentd.Principal, id string, a agentd.InputAnswer) (*agentd.Input, error) {
	if err := f.record("AnswerInput", p, id, a); err != nil {
		return nil, err
	}
	if strings.Contains(string(a.Content), `"bad"`) {
		return nil, &agentd.Error{Code: agentd.EINVALIDINPUT, Message: "content.bad is not a property of the form",
			Fields: []agentd.FieldError{{Field: "bad", Message: "is not a property of the form"}, {Field: "n", Message: "is required"}}}
	}
	in := fakeInput(p, id)
	in.Status, in.Action, in.Content, in.AnsweredBy, in.Via = agentd.InputAnswered, a.Action, a.Content, p.KeyID, a.Via
	return &in, nil
}

func fakeInput(p agentd.Principal, id string) agentd.Input {
	return agentd.Input{ID: id, TenantID: p.TenantID, ProjectID: p.ProjectID, ConversationID: "conv_1", RunID: "run_1",
		ToolCallID: "call_1", ToolName: "ask_user", ServerID: "inputs", Status: agentd.InputPending, Source: agentd.InputSourceAskUser,
		Key: "ask_user", Round: 1, Mode: agentd.InputModeForm, Message: "How many?", Schema: agentd.DefaultFormSchema,
		Answerers: []string{agentd.ApproverOwner}, ExpiresAt: time.Unix(900, 0).UTC(), CreatedAt: time.Unix(0, 0).UTC()}
}
