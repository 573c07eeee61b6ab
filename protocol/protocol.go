// Package protocol is what the chat-protocol endpoints (AG-UI in
// protocol/agui, the AI SDK UI message stream in protocol/aisdk) share: a
// request names a thread, which is bound to a conversation (created for the
// caller if new); its input is a new user message or decisions on parked
// calls, applied through the engine exactly as the native API applies them
// (same roles, deadlines, digests and edit rules); and its answer is the
// conversation's typed events of that run, from the durable log after the
// request's starting point, then live, until the run finishes or parks.
// Each protocol package maps those events onto its frames with a pure
// encoder.
//
// The server holds the state: nothing of a client's copy of the history is
// read but its new message and its decisions.
package protocol

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// Protocol names, as stored in thread bindings.
const (
	AGUI  = "ag-ui"
	AISDK = "ai-sdk"
)

// MaxThreadID bounds a client-chosen thread id, in bytes.
const MaxThreadID = 256

// Engine is the agent loop as the protocol endpoints use it: a subset of
// api.Engine, implemented by loop.Engine. Its methods answer ENOTFOUND for
// objects the principal does not reach, and apply the native API's rules.
type Engine interface {
	CreateConversation(ctx context.Context, p agentd.Principal, agent string, metadata json.RawMessage) (*agentd.Conversation, error)
	Conversation(ctx context.Context, p agentd.Principal, id string) (*agentd.Conversation, error)
	Send(ctx context.Context, p agentd.Principal, conversationID, content string) (*agentd.Run, error)
	Run(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error)
	ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error)
	// DecideAll applies a request's decisions all or nothing; see
	// loop.Engine.DecideAll.
	DecideAll(ctx context.Context, p agentd.Principal, ds []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error)
}

// StoreReads is what the endpoints read of the store, after the engine has
// answered that the principal reaches the conversation: the thread
// bindings (agentd.ThreadStore), a conversation's event log
// (sse.EventSource, of agentd.EventLog), and the few reads of the runs,
// tool calls and messages a turn's replay needs (of agentd.RunStore,
// agentd.ToolCallStore and agentd.ConversationStore).
type StoreReads interface {
	agentd.ThreadStore
	sse.EventSource
	Run(ctx context.Context, id string) (*agentd.Run, error)
	RunToolCalls(ctx context.Context, runID string) ([]agentd.ToolCall, error)
	ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error)
	Messages(ctx context.Context, conversationID string) ([]agentd.Message, error)
}

// Options tunes a Service. The zero value gives the defaults.
type Options struct {
	// Heartbeat is the interval of the ": ping" comment of a stream
	// (default sse.DefaultHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds each write of a stream (default
	// sse.DefaultWriteTimeout).
	WriteTimeout time.Duration
	// Clock stamps the frames that no event stamps (default the system clock).
	Clock agentd.Clock
}

// Service serves the protocol endpoints over one engine, store and hub.
type Service struct {
	engine Engine
	store  StoreReads
	hub    *sse.Hub
	opt    Options
}

// New returns the Service.
func New(engine Engine, store StoreReads, hub *sse.Hub, opt Options) *Service {
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = sse.DefaultHeartbeat
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = sse.DefaultWriteTimeout
	}
	if opt.Clock == nil {
		opt.Clock = agentd.SystemClock{}
	}
	return &Service{engine: engine, store: store, hub: hub, opt: opt}
}

// Now is the service clock's time.
func (s *Service) Now() time.Time { return s.opt.Clock.Now() }

// Thread returns the conversation a protocol thread names for p: the
// conversation itself when threadID is the id of one p reaches (so a
// conversation of the native API can be continued over a protocol, and an
// operator reaches a client's by its id), else the conversation bound to
// the thread in p's tenant and project under p's key — a thread name is the
// key's own, another key's same name is another thread — created for p and
// bound when the thread is new and create is true. ENOTFOUND for an unbound
// thread when create is false, and for a binding whose conversation p no
// longer reaches; EINVALID for an empty or oversized thread id.
func (s *Service) Thread(ctx context.Context, p agentd.Principal, protocol, threadID string, create bool) (*agentd.Conversation, error) {
	if threadID == "" || len(threadID) > MaxThreadID || !utf8.ValidString(threadID) {
		return nil, agentd.Errorf(agentd.EINVALID, "the thread id must be 1 to %d bytes of UTF-8", MaxThreadID)
	}
	if strings.HasPrefix(threadID, agentd.PrefixConversation+"_") && agentd.CheckID(agentd.PrefixConversation, "", threadID) == nil {
		return s.engine.Conversation(ctx, p, threadID)
	}
	key := agentd.ThreadKey{TenantID: p.TenantID, ProjectID: p.ProjectID, KeyID: p.KeyID, Protocol: protocol, ThreadID: threadID}
	convID, err := s.store.ThreadConversation(ctx, key)
	switch {
	case err == nil:
		return s.reach(ctx, p, convID)
	case agentd.ErrorCode(err) != agentd.ENOTFOUND:
		return nil, err
	case !create:
		return nil, threadNotFound()
	}
	conv, err := s.engine.CreateConversation(ctx, p, "", nil)
	if err != nil {
		return nil, err
	}
	// Of two first requests on one thread, the first binding wins; the
	// loser's conversation stays empty.
	bound, err := s.store.BindThread(ctx, agentd.ThreadBinding{ThreadKey: key, ConversationID: conv.ID, CreatedAt: s.Now().UTC()})
	if err != nil {
		return nil, err
	}
	if bound == conv.ID {
		return conv, nil
	}
	return s.reach(ctx, p, bound)
}

func (s *Service) reach(ctx context.Context, p agentd.Principal, convID string) (*agentd.Conversation, error) {
	conv, err := s.engine.Conversation(ctx, p, convID)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		return nil, threadNotFound()
	}
	return conv, err
}

func threadNotFound() error { return agentd.Errorf(agentd.ENOTFOUND, "thread not found") }

// Answer is a client's answer to one parked call's card, as an AG-UI
// resume entry or an AI SDK approval response carries it: the card it
// answers and the person's decision.
type Answer struct {
	// ToolCallID is the id the client answers (an AG-UI interrupt's id,
	// an AI SDK approval id) as it sent it: the id of one of the call's
	// cards (InterruptID).
	ToolCallID string
	Request    agentd.DecisionRequest
}

// InterruptID is the id the chat protocols give card n of a parked call
// (an AG-UI interrupt's id, an AI SDK approvalId; agentd.ToolCall's
// CardRevision): the tool call's id for its first card, "<id>.<n>" for the
// card of a call parked again, so that an answer to an earlier card is
// known as one and never decides a later card.
func InterruptID(callID string, card int) string {
	if card < 2 {
		return callID
	}
	return callID + "." + strconv.Itoa(card)
}

// ParseInterruptID is the call and card an id made by InterruptID names:
// card 1 for a bare id; any other id is a call id as it is (it is then
// unknown).
func ParseInterruptID(id string) (callID string, card int) {
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		if n, err := strconv.Atoi(id[i+1:]); err == nil && InterruptID(id[:i], n) == id {
			return id[:i], n
		}
	}
	return id, 1
}

// Input is what a protocol request asks for: answers to parked calls, or
// else a new user message, or else neither (then it follows the latest run).
type Input struct {
	Message string
	Answers []Answer
	// ExpiredIsAnswer makes a decision on a call whose deadline passed an
	// answer (Turn.Expired names the call) rather than an EEXPIRED error.
	ExpiredIsAnswer bool
}

// Turn is one request's run and where its stream starts.
type Turn struct {
	Conversation *agentd.Conversation
	// RunID is the run the stream follows ("" when the conversation has
	// none yet).
	RunID string
	// After is the Seq the stream starts after: the newest event before
	// the request changed anything.
	After int64
	// Expired are the calls of the request's decisions whose deadline had
	// passed (with Input.ExpiredIsAnswer), with the engine's message.
	Expired []Expired
	// Decided are the calls the request decided.
	Decided []string
}

func (t *Turn) decided(callID string) bool { return slices.Contains(t.Decided, callID) }

// Expired is a decision that came too late.
type Expired struct {
	ToolCallID, Message string
}

// Apply applies in to conv, as Thread returned it for p, and returns the
// turn to follow. Answers are checked first and applied all or nothing
// (Engine.DecideAll): each answers the card its id names (InterruptID), so
// an answer to a card the call was parked again after is ESTALE and
// decides nothing; a repeated decision changes nothing and answers as it
// did; a call named twice is EINVALID; a call that is not one of conv's is
// ENOTFOUND ("unknown interrupt"); the engine's EEXPIRED, ECONFLICT,
// ESTALE, EFORBIDDEN and EINVALID pass through, and nothing of the request
// is applied. A message while a run is active is ERUNACTIVE, and says so
// when calls are parked.
func (s *Service) Apply(ctx context.Context, p agentd.Principal, conv *agentd.Conversation, in Input) (*Turn, error) {
	// conv was read before anything changed: its LastSeq is the starting point.
	t := &Turn{Conversation: conv, After: conv.LastSeq}
	switch {
	case len(in.Answers) > 0:
		if err := s.decide(ctx, p, conv, in, t); err != nil {
			return nil, err
		}
	case in.Message != "":
		run, err := s.engine.Send(ctx, p, conv.ID, in.Message)
		if agentd.ErrorCode(err) == agentd.ERUNACTIVE {
			return nil, s.activeRun(ctx, conv.ID, err)
		} else if err != nil {
			return nil, err
		}
		t.RunID = run.ID
	default:
		runID, err := s.latestRun(ctx, conv.ID)
		if err != nil {
			return nil, err
		}
		t.RunID = runID
	}
	return t, nil
}

// decide applies in's answers all or nothing and notes on t what they
// decided, what came too late, and the run to follow.
func (s *Service) decide(ctx context.Context, p agentd.Principal, conv *agentd.Conversation, in Input, t *Turn) error {
	ds := make([]agentd.CallDecision, len(in.Answers))
	first := make(map[string]string, len(in.Answers))
	for i, d := range in.Answers {
		callID, card := ParseInterruptID(d.ToolCallID)
		if prev, ok := first[callID]; ok {
			return agentd.Errorf(agentd.EINVALID, "the request answers tool call %q twice (%q and %q): answer each call once", callID,
				agentd.TruncateUTF8(prev, 100), agentd.TruncateUTF8(d.ToolCallID, 100))
		}
		first[callID] = d.ToolCallID
		req := d.Request
		req.ConversationID = conv.ID // a call of another thread is unknown here
		req.CardRevision = card
		ds[i] = agentd.CallDecision{ToolCallID: callID, Request: req}
	}
	results, err := s.engine.DecideAll(ctx, p, ds, in.ExpiredIsAnswer)
	if err != nil {
		return err
	}
	for i, r := range results {
		if r.Status != agentd.BatchFailed || r.Error.Code == agentd.EEXPIRED && in.ExpiredIsAnswer {
			continue
		}
		if r.Error.Code == agentd.ENOTFOUND || r.Error.Code == agentd.EINVALID && agentd.CheckID(agentd.PrefixToolCall, "", ds[i].ToolCallID) != nil {
			return unknownInterrupt(in.Answers[i].ToolCallID)
		}
		return agentd.Errorf(r.Error.Code, "%s", r.Error.Message)
	}
	for _, r := range results {
		if r.Status == agentd.BatchFailed {
			t.Expired = append(t.Expired, Expired{ToolCallID: r.ToolCallID, Message: r.Error.Message})
		}
		if t.RunID == "" {
			if t.RunID, err = s.runOfCall(ctx, r.ToolCallID); err != nil {
				return err
			}
		}
		t.Decided = append(t.Decided, r.ToolCallID)
	}
	return nil
}

func unknownInterrupt(id string) error {
	return agentd.Errorf(agentd.ENOTFOUND, "unknown interrupt %q: no parked call of this thread has that id", agentd.TruncateUTF8(id, 80))
}

// runOfCall is the run of a call the engine just decided (it is of the
// turn's conversation, so the store is read directly); it is read after the
// decision, while its tool starts, not before.
func (s *Service) runOfCall(ctx context.Context, callID string) (string, error) {
	c, err := s.store.ToolCall(ctx, callID)
	if err != nil {
		return "", err
	}
	return c.RunID, nil
}

// latestRun is the run of the conversation's newest message ("" for none).
func (s *Service) latestRun(ctx context.Context, convID string) (string, error) {
	msgs, err := s.store.Messages(ctx, convID)
	if err != nil || len(msgs) == 0 {
		return "", err
	}
	return msgs[len(msgs)-1].RunID, nil
}

// activeRun explains a refused new message: ERUNACTIVE naming the open
// interrupts when the active run waits on parked calls.
func (s *Service) activeRun(ctx context.Context, convID string, cause error) error {
	runID, err := s.latestRun(ctx, convID)
	if err != nil || runID == "" {
		return cause
	}
	parked, _, err := s.parked(ctx, runID)
	if err != nil || len(parked) == 0 {
		return cause
	}
	ids := make([]string, len(parked))
	for i, c := range parked {
		ids[i] = c.ID
	}
	return agentd.Errorf(agentd.ERUNACTIVE, "this thread has open interrupts (%s): resume them before sending a new message", strings.Join(ids, ", "))
}

// ActiveTurn is the turn that replays conv's active run — its latest run
// while it runs or waits on parked calls — from the run's first event, for
// a client that lost its stream (the AI SDK's resumable streams); ok is
// false when the latest run has finished or there is none. The replay reads
// the conversation's log from its start and keeps the run's events.
func (s *Service) ActiveTurn(ctx context.Context, conv *agentd.Conversation) (t *Turn, ok bool, err error) {
	runID, err := s.latestRun(ctx, conv.ID)
	if err != nil || runID == "" {
		return nil, false, err
	}
	run, err := s.store.Run(ctx, runID)
	if err != nil || !run.Status.Active() {
		return nil, false, err
	}
	return &Turn{Conversation: conv, RunID: runID}, true, nil
}
