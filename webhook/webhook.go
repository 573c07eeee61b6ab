// Package webhook delivers agentd's tool-call events to configured HTTP
// endpoints as signed Standard Webhooks (SPEC §7), at least once, from a
// durable outbox.
//
// The event log is the outbox's source: the loop commits events in its own
// transactions and nothing is added to them. A dispatcher follows the event
// feed (agentd.Feed) from the durable consumer cursor "webhooks"; for each
// event an endpoint wants it writes a delivery row, in the same transaction
// that advances the cursor (WebhookOutbox.EnqueueWebhookDeliveries). A delivery's id,
// the webhook-id, is derived from (event, endpoint), so a crash anywhere
// re-creates the same rows and ids. One worker per endpoint claims due
// deliveries with a lease, sends them (at most MaxInFlight at once), records
// every attempt and reschedules on the retry schedule with jitter. See
// docs/webhooks.md.
package webhook

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Consumer is the feed consumer name of the dispatcher.
const Consumer = "webhooks"

// Options configure a Service; every field has a working default.
type Options struct {
	// Clock gives the times recorded and scheduled (default: the system
	// clock). Waits are real timers for the difference to Clock.Now.
	Clock  agentd.Clock
	Logger zerolog.Logger
	// Registerer, when set, gets the service's metrics.
	Registerer prometheus.Registerer
	// Owner names this process's claims (default: a random id).
	Owner string
	// BatchWindow is how long the dispatcher gathers deliveries before it
	// writes them in one transaction (default 10ms): the outbox's writes
	// stay off the loop's commit path.
	BatchWindow time.Duration
	// LeaseMargin is added to an endpoint's timeout for the lease of a
	// claim (default 5s): a claim of a process that died lapses after it.
	LeaseMargin time.Duration
	// Transport sends the requests (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Rand returns a float in [0, 1) for the jitter (default math/rand).
	Rand func() float64
	// Traces, when set (traces are on: docs/observability.md), puts the
	// run's trace context in each payload (event_context.trace_id and
	// traceparent) and sends it as the delivery's traceparent header. Off,
	// a delivery costs no read of its run.
	Traces bool
	// Links mints and seals the decision links of the endpoints with
	// include_decision_links; nil: no links (and a log line per such
	// delivery).
	Links Links
}

// Links are the decision links (SPEC §11.4) a webhook carries. A link's
// token never rests where the API reads it: the stored body — the delivery
// log's payload, a redelivery's answer — holds the links unsealed (their
// tokens without the MAC: they open nothing), and each attempt seals them
// into the body it sends. Sealing is deterministic, so every attempt of one
// webhook-id sends the same bytes.
type Links interface {
	// Mint returns the decision links of call minted as the key keyID,
	// unsealed: URLs under the server's public URL whose token lacks its
	// MAC. Its errors (the key may not decide the call, the call is not
	// pending) leave the delivery without links.
	Mint(ctx context.Context, keyID string, call *agentd.ToolCall) (*agentd.DecisionLinks, error)
	// Seal returns the working link of an unsealed URL Mint returned, the
	// same every time; an error for any other string.
	Seal(url string) (string, error)
}

// OutboxStore is what the service keeps in the store: the webhook outbox, the
// event log's feed cursors (the dispatcher's, and the feed's newest
// position when a cursor starts), and the one tool call lookup a payload
// needs (the call an event is about, for its tenant and server).
type OutboxStore interface {
	agentd.WebhookOutbox
	agentd.EventLog
	// ToolCall returns one call with its decisions, or ENOTFOUND
	// (agentd.ToolCallStore.ToolCall).
	ToolCall(ctx context.Context, id string) (*agentd.ToolCall, error)
	// Run returns a run, or ENOTFOUND (agentd.RunStore.Run): with
	// Options.Traces, a payload carries its run's trace context.
	Run(ctx context.Context, id string) (*agentd.Run, error)
}

// Service is the webhook dispatcher and its delivery workers, and what
// operators see of them (the delivery log, redelivery, endpoint states).
type Service struct {
	store     OutboxStore
	feed      agentd.Feed
	endpoints []*endpoint
	byID      map[string]*endpoint
	opts      Options
	log       zerolog.Logger
	metrics   *metrics

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// endpoint is a configured endpoint with its worker's state.
type endpoint struct {
	Endpoint
	client *http.Client
	wake   chan struct{} // capacity 1: something may be due

	mu         sync.Mutex
	disabledAt *time.Time
	reason     string
}

func (e *endpoint) disabled() (bool, *time.Time, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.disabledAt != nil, e.disabledAt, e.reason
}

func (e *endpoint) setDisabled(at *time.Time, reason string) {
	e.mu.Lock()
	e.disabledAt, e.reason = at, reason
	e.mu.Unlock()
}

// poke wakes the endpoint's worker without blocking.
func (e *endpoint) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// New returns the service for endpoints (ParseConfig). It starts nothing:
// Start does.
func New(store OutboxStore, feed agentd.Feed, endpoints []Endpoint, opts Options) (*Service, error) {
	if opts.Clock == nil {
		opts.Clock = agentd.SystemClock{}
	}
	if opts.Owner == "" {
		opts.Owner = "agentd-" + uuid.NewString()
	}
	if opts.BatchWindow <= 0 {
		opts.BatchWindow = 10 * time.Millisecond
	}
	if opts.LeaseMargin <= 0 {
		opts.LeaseMargin = 5 * time.Second
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	s := &Service{store: store, feed: feed, opts: opts, log: opts.Logger, byID: map[string]*endpoint{}}
	for _, e := range endpoints {
		if e.keys == nil {
			return nil, errors.New("webhook: endpoint " + e.ID + " has no secrets (use ParseConfig)")
		}
		ep := &endpoint{Endpoint: e, wake: make(chan struct{}, 1), client: &http.Client{
			Transport: opts.Transport,
			Timeout:   e.Timeout,
			// 3xx is an answer, not a hop: a redirect is not followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
		s.endpoints = append(s.endpoints, ep)
		s.byID[e.ID] = ep
	}
	m, err := newMetrics(opts.Registerer, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	return s, nil
}

// Start loads the endpoints' states, places the dispatcher's cursor (at the
// end of the log on its very first start, when no endpoint has a recorded
// state: history from before webhooks were configured is not delivered),
// records a state for each new endpoint, and starts the dispatcher and one
// worker per endpoint. Without endpoints it does nothing. Call it before
// the loop starts, so that no event committed after Start is missed.
func (s *Service) Start(ctx context.Context) error {
	if len(s.endpoints) == 0 {
		return nil
	}
	states, err := s.store.WebhookEndpointStates(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, st := range states {
		known[st.ID] = true
		if ep := s.byID[st.ID]; ep != nil {
			ep.setDisabled(st.DisabledAt, st.DisabledReason)
		}
	}
	pos, err := s.store.ConsumerPosition(ctx, Consumer)
	if err != nil {
		return err
	}
	// The very first start (no endpoint has a state yet) begins at the end
	// of the log. Later starts resume from the cursor, also when it is 0:
	// a cursor of 0 may mean events after it that were never dispatched.
	if len(states) == 0 {
		if pos, err = s.store.LastPosition(ctx); err != nil {
			return err
		}
		if err := s.store.SetConsumerPosition(ctx, Consumer, pos); err != nil {
			return err
		}
	}
	now := s.opts.Clock.Now().UTC()
	for _, ep := range s.endpoints {
		if !known[ep.ID] {
			if err := s.store.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{ID: ep.ID, UpdatedAt: now}); err != nil {
				return err
			}
		}
	}
	sub, err := s.feed.Follow(agentd.FeedFilter{After: pos})
	if err != nil {
		return err
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer sub.Close()
		s.dispatch(ctx, sub, pos)
	}()
	for _, ep := range s.endpoints {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.work(ctx, ep)
		}()
	}
	return nil
}

// Close stops the dispatcher and the workers and waits for them; attempts
// in flight are abandoned (their leases lapse and they are retried).
func (s *Service) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}
