package loop

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/rs/zerolog"
)

// core is what every part of the engine shares: the store, the clock, the
// log, the agent and its tools, the publisher, and the engine's lifetime
// (its context and the goroutines it waits for on Close). It is set once,
// in New, and never changes; the state that changes lives in the parts,
// each behind its own lock. Its methods commit and publish events and
// read what every part reads.
type core struct {
	store coreStore
	pub   Publisher
	agent *Agent
	clock agentd.Clock
	log   zerolog.Logger
	opts  Options
	obs   Observer
	tr    *tracer // nil: traces off

	// tools is the view of the tools the model sees (tools.go), rebuilt
	// when the agent's toolset.Set lists others.
	tools toolView

	convLocks keyedMutex

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newCore returns the core of an engine whose defaults New has filled.
func newCore(store coreStore, pub Publisher, agent *Agent, opts Options) *core {
	c := &core{store: store, pub: pub, agent: agent, clock: opts.Clock, log: opts.Logger, opts: opts, obs: opts.Observer,
		tools: toolView{set: agent.Tools}, tr: newTracer(opts.Tracer, opts.TraceContent)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// commit runs one store transaction that appends events for a conversation
// under that conversation's lock, then publishes the committed events, so
// the stream sees them in sequence order and only after they are durable.
func (e *core) commit(convID string, tx func() ([]agentd.Event, error)) error {
	return e.commitMany([]string{convID}, tx)
}

// event builds the draft of an event of convID, now on the engine's clock,
// with p as its data. It panics if agentd.NewEventDraft refuses p: the loop
// fills every required field of every payload from values it made itself
// (ids, statuses, names of calls it classified), so a refusal is a bug in
// the loop, which its tests catch — not something a run can cause.
func (e *core) event(convID string, p agentd.EventPayload) agentd.EventDraft {
	d, err := agentd.NewEventDraft(convID, e.clock.Now(), p)
	if err != nil {
		panic(fmt.Sprintf("loop: %v", err))
	}
	return d
}

// emit commits and publishes one event with p as its data.
func (e *core) emit(ctx context.Context, convID string, p agentd.EventPayload) error {
	return e.commit(convID, func() ([]agentd.Event, error) {
		return e.store.AppendEvents(ctx, []agentd.EventDraft{e.event(convID, p)})
	})
}

// commitMany is commit for a transaction that appends events to several
// conversations: it takes their locks in id order (so two such commits
// cannot deadlock), runs tx, and publishes the committed events.
func (e *core) commitMany(convIDs []string, tx func() ([]agentd.Event, error)) error {
	ids := slices.Clone(convIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		unlock := e.convLocks.lock(id)
		defer unlock()
	}
	evs, err := tx()
	if err != nil {
		return err
	}
	for _, ev := range evs {
		e.pub.Publish(ev)
	}
	return nil
}

// resolvedEvent is the confirmation_resolved of c decided by d.
func (e *core) resolvedEvent(c agentd.ToolCall, d *agentd.Decision) agentd.EventDraft {
	return e.event(c.ConversationID, &agentd.ConfirmationResolvedPayload{
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, Decision: d.Decision, Reason: d.Reason,
		DecidedBy: d.DecidedBy, ArgumentsSHA256: d.ArgumentsSHA256,
		EditedArgumentsSHA256: nilIfEmpty(d.EditedArgumentsSHA256), ApprovedBy: approvedBy(c, d),
	})
}

// traceRun reads the run a span joins, only when traces are on; nil when
// they are off or the store failed (the span is then not recorded: a trace
// never fails a run).
func (e *core) traceRun(ctx context.Context, runID string) *agentd.Run {
	if e.tr == nil {
		return nil
	}
	run, err := e.store.Run(context.WithoutCancel(ctx), runID)
	if err != nil {
		e.log.Warn().Err(err).Str("run_id", runID).Msg("trace: read run")
		return nil
	}
	return run
}

// def returns the tool the model sees by that name, or nil.
func (e *core) def(name string) *toolset.Tool {
	if d, ok := e.tools.now().defs[name]; ok {
		return &d
	}
	return nil
}

// reach returns the conversation convID if p reaches it (agentd.Principal.Reaches),
// else notFound(what): the object named what belongs to that conversation.
func (e *core) reach(ctx context.Context, p agentd.Principal, convID, what string) (*agentd.Conversation, error) {
	c, err := e.store.Conversation(ctx, convID)
	switch {
	case agentd.ErrorCode(err) == agentd.ENOTFOUND:
		return nil, notFound(what)
	case err != nil:
		return nil, err
	case !p.Reaches(c):
		return nil, notFound(what)
	}
	return c, nil
}

// reachObject answers whether p reaches an object of (tenantID, projectID)
// in conversation convID, reading the conversation only when p's role
// limits it to the conversations it created.
func (e *core) reachObject(ctx context.Context, p agentd.Principal, tenantID, projectID, convID, what string) error {
	if p.TenantID != tenantID || p.ProjectID != projectID {
		return notFound(what)
	}
	if p.SeesAll() {
		return nil
	}
	_, err := e.reach(ctx, p, convID, what)
	return err
}

// toolCall returns a call of a conversation the principal reaches, with
// its decisions; ENOTFOUND otherwise.
func (e *core) toolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	if err := agentd.CheckID(agentd.PrefixToolCall, "tool call id", id); err != nil {
		return nil, err
	}
	c, err := e.store.ToolCall(ctx, id)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		return nil, notFound("tool call")
	} else if err != nil {
		return nil, err
	}
	if err := e.reachObject(ctx, p, c.TenantID, c.ProjectID, c.ConversationID, "tool call"); err != nil {
		return nil, err
	}
	return c, nil
}

// keyedMutex is a set of mutexes by key whose entries are freed when unused.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu sync.Mutex
	n  int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	ent, ok := k.m[key]
	if !ok {
		ent = &keyedEntry{}
		k.m[key] = ent
	}
	ent.n++
	k.mu.Unlock()
	ent.mu.Lock()
	return func() {
		ent.mu.Unlock()
		k.mu.Lock()
		ent.n--
		if ent.n == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// confirmationRequired is the event of a parked call: the seed's fields
// (endpoint, method, reason, escalated, timestamp, params, connection_name,
// correlation_id) plus the SPEC §6 additions and its card.
func (e *core) confirmationRequired(c *agentd.ToolCall) agentd.EventDraft {
	params, card, omitted := c.Announcement()
	return e.event(c.ConversationID, &agentd.ConfirmationRequiredPayload{
		Endpoint:           c.Endpoint,
		Method:             c.Method,
		Reason:             c.Reason,
		Escalated:          c.Escalated,
		Params:             params,
		ConnectionName:     nilIfEmpty(c.ConnectionName),
		CorrelationID:      c.CorrelationID,
		ToolCallID:         c.ID,
		ToolName:           c.Name,
		ServerID:           c.ServerID,
		RunID:              c.RunID,
		ArgumentsSHA256:    c.ArgumentsSHA256,
		RequiresApprovalAt: c.RequiresApprovalAt.UTC(),
		AllowedDecisions:   c.AllowedDecisions,
		Card:               card,
		CardRevision:       c.ShownCardRevision(),
		Omitted:            omitted,
	})
}

// toolCallStarted is the event of a claimed call; an approved request-tool
// write runs, and says so, as a confirmed_write.
func (e *core) toolCallStarted(c *agentd.ToolCall) agentd.EventDraft {
	p := &agentd.ToolCallStartedPayload{
		RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID, Arguments: c.Arguments,
	}
	if s, om := c.Summarized(); om["arguments"] != (agentd.OmittedValue{}) {
		// Not copied into the event: the call holds them.
		p.Arguments, p.Omitted = s.Arguments, agentd.Omitted{"arguments": om["arguments"]}
	}
	if v := e.tools.now().visible(c.Name); c.Tier == agentd.TierConfirm && v != nil && v.Kind == confirm.KindRequest {
		// The approved side of the handshake (SPEC §3): the same call,
		// performed as a confirmed write.
		p.Intent = confirm.IntentConfirmedWrite
	}
	if c.GrantedBy == nil {
		return e.event(c.ConversationID, p)
	}
	p.GrantedBy = c.GrantedBy
	d := e.event(c.ConversationID, p)
	d.Audit = grantUse(c, e.clock.Now())
	return d
}
