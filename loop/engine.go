// Package loop is the agent loop of agentd: it asks the model for the next
// step, classifies every tool call with package confirm, runs auto calls,
// parks confirm calls durably (commit first, then publish), refuses the
// rest, and continues the run only when every call of the step is resolved.
// Approvals resume the very same call; the model is not asked again.
//
// The loop imports no HTTP framework and no database driver: it talks to a
// Store (the store's roles it uses, store.go), an agentd.Model, a
// toolset.Set and a Publisher. Tools come from tool sources through the
// contract in package toolset; the loop imports none of them and is itself
// one, the subagents' task tool (TaskSource).
package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// Publisher receives committed events, in sequence order per conversation.
// It must not block.
type Publisher interface {
	Publish(agentd.Event)
}

// Agent is the configured assistant the loop runs.
type Agent struct {
	Name   string
	System string
	Model  agentd.Model
	// Tools are the tools the model sees, in the order it sees them, and
	// run the calls: package server passes the project's tool registry
	// (tools/registry), which applies llm_callable and agent.json's list.
	// Nil means no tools.
	Tools           toolset.Set
	ApprovalTimeout time.Duration
	// Approval is the agent's approval rule (SPEC §11.1), for the calls
	// whose tool or endpoint has none; nil: agentd.DefaultApprovalRule.
	Approval *agentd.ApprovalRule
	MaxTurns int
	// Hooks are the project's preToolUse and postToolUse hooks; nil means
	// none.
	Hooks toolset.Hooks
	// Subagents are the subagents the task tool (TaskSource, listed in
	// Tools) starts.
	Subagents []*Subagent
	// Inputs is agent.json "inputs" (SPEC §12.3): the rule of the ask_user
	// tool's inputs (InputSource, listed in Tools); nil: the defaults.
	Inputs *agentd.InputRule
	// ModelName names the model in traces (gen_ai.request.model); empty:
	// the name the Model gives itself (agentd.ModelName).
	ModelName string
}

// Options are the optional dependencies of an Engine.
type Options struct {
	Clock  agentd.Clock   // default: the system clock
	Logger zerolog.Logger // default: disabled
	// ExpireEvery governs the background expiry of parked calls: one timer
	// armed to the earliest deadline in the store (docs/loop.md). A
	// negative value disables it (tests then call ExpireDue); otherwise it
	// is how long the expiry waits before retrying after the store failed
	// (0 means one second). It is not a polling period: nothing is read
	// while no deadline is due.
	ExpireEvery time.Duration
	// AfterFunc arms the deadline timer: it calls f once, in its own
	// goroutine, after d. Default: time.AfterFunc. Tests pass a fake that
	// fires when its clock is advanced.
	AfterFunc func(d time.Duration, f func()) Timer
	// MaxResultBytes bounds the tool result text sent to the model (default 16 KiB).
	MaxResultBytes int
	// Observer is told what the engine does, for metrics (nil: nobody).
	Observer Observer
	// Tracer receives the spans of runs, model steps, tool calls and
	// approval waits (trace.go, docs/observability.md); nil: no traces, and
	// no cost. Its SDK must use tracing.IDGenerator, so that a run's span,
	// recorded when the run ends, keeps the IDs its children named.
	Tracer trace.TracerProvider
	// TraceContent records message text and tool arguments in spans
	// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT); off by default.
	TraceContent bool
	// Lease, when > 0, is how long a run lease lasts, for replicas sharing
	// the store (lease.go, docs/scale-out.md): a driver takes its run's
	// lease before it acts and leaves a run another owner holds; leases
	// are renewed every Lease/3 and released when the driver exits; start
	// and every Lease/3 take over the runs whose lease expired. 0 (one
	// process, SQLite): no leases, recovery at start takes everything.
	Lease time.Duration
	// Owner names this engine's leases (default: a new random id).
	Owner string
	// Histories is how many conversations' histories the engine keeps
	// after their drivers exit, for the conversation's next run (0: 16;
	// negative: none, every driver reads its history whole once). A run
	// that waits for people keeps none (history.go).
	Histories int
	// Keys looks up the API keys as configured now (SPEC §11): an
	// approval towards a quorum counts, and a grant answers a call, only
	// while its key exists and could decide the call. nil: every stored
	// approval counts and a grant's creator is as it approved (tests).
	Keys confirm.Keys
}

// Engine runs the agent loop for every conversation of one agent. It is
// the facade of the engine's parts (docs/architecture.md, "The engine"):
// the drivers and the runner drive runs, the decider decides parked
// calls, the timers keep their deadlines and reminders, the leases own
// run leases and recovery. Its own methods serve conversations, runs and
// the lists (service.go); the others forward to the part that does the
// work. It holds no state of its own.
type Engine struct {
	*core
	store serviceStore

	drv     *drivers
	timers  *timers
	leases  *leases
	decider *decider
	runner  *runner
	answers *answerer
}

// New returns an engine. Call Start before use and Close when done.
func New(store Store, pub Publisher, agent *Agent, opts Options) *Engine {
	if opts.Clock == nil {
		opts.Clock = agentd.SystemClock{}
	}
	if opts.ExpireEvery == 0 {
		opts.ExpireEvery = time.Second
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = 16 << 10
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if agent.ApprovalTimeout <= 0 {
		agent.ApprovalTimeout = agentd.DefaultApprovalTimeout
	}
	if agent.MaxTurns <= 0 {
		agent.MaxTurns = agentd.DefaultMaxTurns
	}
	if opts.Owner == "" {
		opts.Owner = agentd.NewID("lease")
	}
	if opts.Histories == 0 {
		opts.Histories = defaultHistories
	}
	c := newCore(store, pub, agent, opts)
	drv := &drivers{core: c, runs: map[string]*runState{}}
	tm := &timers{core: c, store: store, wake: drv.wakeRun}
	ls := &leases{core: c, store: store, owner: opts.Owner, drv: drv, timers: tm}
	dc := &decider{core: c, store: store, drv: drv, timers: tm}
	rn := &runner{core: c, store: store, drv: drv, leases: ls, timers: tm, decider: dc, histories: historySet{max: opts.Histories}}
	drv.drive, drv.exited = rn.drive, rn.exited
	tm.mayDecide = dc.mayDecide
	ls.startCall, dc.startCall = rn.startCall, rn.startCall
	an := &answerer{core: c, store: store, drv: drv}
	tm.expireInputs = an.expireDue
	return &Engine{core: c, store: store, drv: drv, timers: tm, leases: ls, decider: dc, runner: rn, answers: an}
}

// ToolSpecs returns the tools the model of a tenant's conversations sees
// now: every tool but those of connections and MCP servers whose
// tenant_ids do not list it.
func (e *Engine) ToolSpecs(tenantID string) []agentd.ToolSpec {
	return e.tools.now().specsFor(tenantID)
}

// Start recovers state left by a previous process (SPEC §8) and starts the
// background expiry of parked calls (unless Options.ExpireEvery is
// negative), whose first pass expires the deadlines that passed while no
// process ran and sends the reminders that came due meanwhile. It starts a
// driver only for the runs that must move now, and reads no parked call:
// parked runs cost nothing until something happens to them.
func (e *Engine) Start(ctx context.Context) error {
	expiry := e.opts.ExpireEvery >= 0
	if expiry {
		e.timers.enable()
	}
	if err := e.leases.recover(ctx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if expiry {
		e.timers.startExpiry()
	}
	if e.leases.leasing() {
		e.leases.startLeases()
	}
	return nil
}

// Input returns an input request of a conversation p reaches (SPEC §12.2);
// ENOTFOUND otherwise.
func (e *Engine) Input(ctx context.Context, p agentd.Principal, id string) (*agentd.Input, error) {
	in, _, err := e.answers.input(ctx, p, id)
	return in, err
}

// Inputs returns a page of the input requests p reaches (GET /v1/inputs)
// and the next page's cursor ("" after the last).
func (e *Engine) Inputs(ctx context.Context, p agentd.Principal, q agentd.InputQuery) ([]agentd.Input, string, error) {
	return e.answers.inputs(ctx, p, q)
}

// AnswerInput answers an input request once (SPEC §12.3): the first
// answer to commit is the answer, and its call completes with it; the
// same answer again returns the input; any other is ECONFLICT (EEXPIRED
// after its deadline). Content that does not fit the schema is
// EINVALIDINPUT with every bad field, and changes nothing.
func (e *Engine) AnswerInput(ctx context.Context, p agentd.Principal, id string, a agentd.InputAnswer) (*agentd.Input, error) {
	return e.answers.answer(ctx, p, id, a)
}

// ExpireDue expires every parked call and every input request whose
// deadline has passed on the engine's clock, a page at a time, and
// returns how many it expired (what the deadline timer does).
func (e *Engine) ExpireDue(ctx context.Context) (int, error) {
	m, _, err := e.answers.expireDue(ctx)
	if err != nil {
		return m, err
	}
	n, err := e.timers.expireDue(ctx)
	return m + n, err
}

// RemindDue sends the reminders due on the engine's clock (what the
// deadline timer does) and returns how many calls were reminded.
func (e *Engine) RemindDue(ctx context.Context) (int, error) { return e.timers.remindPass(ctx) }

// Extend moves the deadline of a parked call later by req.Extension (SPEC
// §11.3): p must be a key that may decide the call, and the total of the
// call's extensions may not exceed its rule's max_extension. It emits
// confirmation_extended in the same commit and returns the call as
// updated; reminders whose time the new deadline already passed are
// recorded as sent.
//
// Errors: EFORBIDDEN (a delegate key), EINVALID (by not a positive Go
// duration, a reason over agentd.MaxReasonBytes), ENOTFOUND, ECONFLICT (not pending,
// or no deadline), EEXPIRED (the deadline passed), EEXTENSIONEXCEEDSMAX.
func (e *Engine) Extend(ctx context.Context, p agentd.Principal, id string, req agentd.ExtendRequest) (*agentd.ToolCall, error) {
	return e.timers.extend(ctx, p, id, req)
}

// Close stops every run driver, tool process and the deadline timer, and
// waits for them. Calls that were executing stay "executing" in the store;
// the next Start reports them honestly.
func (e *Engine) Close() {
	e.cancel()
	e.wg.Wait()
	e.timers.disarm()
}

// Drivers returns the number of run driver goroutines alive: the runs that
// are being moved on or have tools in flight. A run that waits only for
// people has none.
func (e *Engine) Drivers() int { return e.drv.alive() }

// TierPerCall is the listed tier of the request tool: each call's
// connection, method and endpoint decide it.
const TierPerCall agentd.Tier = "per_call"

// ToolTier returns the base tier and server_id of a tool the model sees
// (never for others). An operation tool's tier is its endpoint's policy
// tier before thresholds; the request tool's is TierPerCall.
func (e *Engine) ToolTier(name string) (agentd.Tier, string) {
	t := e.tools.now().visible(name)
	if t == nil {
		return agentd.TierNever, ""
	}
	switch t.Kind {
	case confirm.KindRequest:
		return TierPerCall, t.ServerID
	case confirm.KindOperation:
		return t.OperationTier(), t.ServerID
	}
	return confirm.ExposureTier(t.Exposure), t.ServerID
}

// DecideBatch applies bulk decisions (POST /v1/approvals): every item as
// Decide would apply it alone (the same rules, through the same steps in
// decide.go), with Via "bulk", and one result per item in request order.
//
// Without atomic each item is decided on its own and its result says how
// it went: applied (now, or an idempotent repeat) or failed with the error
// the single route would answer. With atomic the items are planned first
// and committed together in one store transaction: if any item fails,
// nothing of the batch is applied, the failed items say why and every
// other says not_applied. (An item past its deadline is expired while it is
// planned, as the single route does, whatever the batch does.)
//
// Errors of the whole batch: EFORBIDDEN for a delegate key; EINVALID for no
// items, more than agentd.MaxBatchDecisions, or a tool call named twice.
func (e *Engine) DecideBatch(ctx context.Context, p agentd.Principal, items []agentd.BatchDecisionItem, atomic bool) ([]agentd.BatchDecisionResult, error) {
	return e.decider.decideBatch(ctx, p, items, atomic)
}

// DecideAll applies the decisions of one chat-protocol request all or
// nothing: every decision is checked and planned against the calls as
// stored (each as Decide would apply it alone, its ConversationID
// included) and the plans are committed in one transaction, as an atomic
// DecideBatch does. If any decision fails, nothing is applied; the results,
// one per decision in order, say which failed and why (the others
// not_applied). With expiredIsAnswer a decision on a call whose deadline
// passed (EEXPIRED; the call is expired while it is planned) is answered
// in its result and does not stop the others.
//
// Errors of the whole request: EFORBIDDEN for a delegate key; EINVALID for
// no decisions, more than agentd.MaxBatchDecisions, or a call named twice.
func (e *Engine) DecideAll(ctx context.Context, p agentd.Principal, ds []agentd.CallDecision, expiredIsAnswer bool) ([]agentd.BatchDecisionResult, error) {
	return e.decider.decideAll(ctx, p, ds, expiredIsAnswer)
}

// Decide applies an approval decision to a parked call (SPEC §5 "Approval
// rules"). It returns the stored decision: every repeat of the same
// decision returns the same record. An approval starts the same call with
// the same arguments; the model is not called in between.
//
// The decision answers one card of the call (cardOf): an answer to a card
// that was answered before the call was parked again is never a decision
// on its current card.
//
// Errors: EFORBIDDEN (a delegate key, or edited arguments that were
// refused: the call is then refused), EINVALID (bad decision, edited
// arguments the card does not allow, a card_revision below 1), ENOTFOUND
// (also for a call not of req.ConversationID, when set), ECONFLICT (decided
// otherwise, not awaiting confirmation, or a card the call never showed),
// EEXPIRED (deadline passed), ESTALE (digest differs, also on a repeat; a
// card the call was parked again after).
func (e *Engine) Decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error) {
	return e.decider.decide(ctx, p, id, req)
}

// Grants returns a page (limit 1..100, 0 = 50) of the live grants p may
// see — a client's or delegate's: those made in conversations it created;
// an operator's or admin's: every one of its tenant and project — after
// cursor (a grant id), and the next cursor ("" at the end).
func (e *Engine) Grants(ctx context.Context, p agentd.Principal, cursor string, limit int) ([]agentd.Grant, string, error) {
	return e.decider.grants(ctx, p, cursor, limit)
}

// RevokeGrant revokes grant id (SPEC §11.2) and announces grant_revoked on
// the stream of the conversation it was made in, in one commit: its
// creator, an operator or an admin may; another key that sees it gets
// EFORBIDDEN; a grant of another tenant or project, or of a conversation
// a client does not reach, is ENOTFOUND. A revoked grant is answered as
// it is (a repeat changes nothing).
func (e *Engine) RevokeGrant(ctx context.Context, p agentd.Principal, id string) (*agentd.Grant, error) {
	return e.decider.revokeGrant(ctx, p, id)
}

// MayDecideNow returns call id as p reaches it when p may decide it now
// (SPEC §11.4: a decision link is minted only by a key that may decide):
// the rules of planDecision's first step (agentd.MayDecideCall), and the
// call pending before its deadline. Errors: EFORBIDDEN (a delegate key),
// EAPPROVERNOTALLOWED, EREQUESTERMAYNOTAPPROVE, ENOTFOUND, ECONFLICT (not
// awaiting confirmation), EEXPIRED.
func (e *Engine) MayDecideNow(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	return e.decider.mayDecideNow(ctx, p, id)
}
