package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/tracing"
)

// Bounds of the dispatcher's batches.
const (
	// maxBatch is the most deliveries written in one transaction.
	maxBatch = 500
	// idleFlush: a cursor that moved over events no endpoint wants is
	// recorded after this long without events, or after cursorLag events.
	idleFlush = time.Second
	cursorLag = 5000
)

// dispatch follows the feed after pos and turns the events endpoints want
// into delivery rows until ctx ends or the feed closes.
func (s *Service) dispatch(ctx context.Context, sub agentd.FeedSubscription, pos int64) {
	var batch []agentd.WebhookDelivery
	recorded, last := pos, pos
	for ctx.Err() == nil {
		wait := idleFlush
		if len(batch) > 0 {
			wait = s.opts.BatchWindow
		}
		nctx, cancel := context.WithTimeout(ctx, wait)
		ev, err := sub.Next(nctx)
		cancel()
		switch {
		case errors.Is(err, agentd.ErrFeedEnded) || ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			if last > recorded && s.flush(ctx, &batch, last) {
				recorded = last
			}
			continue
		case err != nil:
			s.log.Error().Err(err).Msg("webhooks: reading the event feed")
			sleep(ctx, time.Second)
			continue
		}
		ds, err := s.deliveriesFor(ctx, ev)
		for err != nil && ctx.Err() == nil { // a store read failed: retry this event
			s.log.Error().Err(err).Int64("position", ev.Position).Msg("webhooks: building deliveries")
			sleep(ctx, time.Second)
			ds, err = s.deliveriesFor(ctx, ev)
		}
		batch, last = append(batch, ds...), ev.Position
		if len(batch) >= maxBatch || last-recorded >= cursorLag {
			if s.flush(ctx, &batch, last) {
				recorded = last
			}
		}
	}
}

// flush writes batch and the cursor last in one transaction, retrying
// until it succeeds or ctx ends, and wakes the endpoints it wrote for.
func (s *Service) flush(ctx context.Context, batch *[]agentd.WebhookDelivery, last int64) bool {
	for {
		err := s.store.EnqueueWebhookDeliveries(ctx, Consumer, last, *batch)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Error().Err(err).Int64("position", last).Msg("webhooks: writing deliveries")
		sleep(ctx, time.Second)
	}
	for _, d := range *batch {
		if ep := s.byID[d.EndpointID]; ep != nil {
			ep.poke()
		}
	}
	*batch = (*batch)[:0]
	return true
}

// deliveriesFor returns the deliveries of ev: one per endpoint that wants
// its webhook event, due now. Events without a webhook event give none. A
// subagent_event gives those of the event it wraps (a subagent's call),
// routed by the parent's task call.
func (s *Service) deliveriesFor(ctx context.Context, ev agentd.Event) ([]agentd.WebhookDelivery, error) {
	var sub *agentd.SubagentEventPayload
	if ev.Type == agentd.EventSubagentEvent {
		var err error
		if ev, sub, err = innerEvent(ev); err != nil {
			s.log.Error().Err(err).Int64("position", ev.Position).Msg("webhooks: undecodable event skipped")
			return nil, nil
		}
	}
	name, ok := EventName(ev.Type)
	if !ok || !s.anyWants(name) {
		return nil, nil
	}
	p, err := agentd.DecodeEvent(ev)
	if err != nil {
		s.log.Error().Err(err).Int64("position", ev.Position).Msg("webhooks: undecodable event skipped")
		return nil, nil
	}
	callID := toolCallID(p)
	if sub != nil {
		callID = sub.ToolCallID // the task call: a subagent's calls are not stored
	}
	call, err := s.store.ToolCall(ctx, callID)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		// A call's events commit with the call, so this is a call that is
		// not stored: a scheduled run's (docs/runtime.md), which sends none.
		s.log.Debug().Int64("position", ev.Position).Str("tool_call_id", callID).Msg("webhooks: event of a call that is not stored skipped")
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var payload Payload
	if sub != nil {
		payload, err = BuildSubagent(ev, p, sub, call)
	} else {
		payload, err = Build(ev, p, call)
	}
	if err != nil {
		s.log.Error().Err(err).Int64("position", ev.Position).Msg("webhooks: event skipped")
		return nil, nil
	}
	if s.opts.Traces {
		s.traceContext(ctx, &payload.EventContext, call.RunID)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	now := s.opts.Clock.Now().UTC()
	var out []agentd.WebhookDelivery
	for _, ep := range s.endpoints {
		if !ep.Wants(name, call.TenantID, call.ProjectID) {
			continue
		}
		epBody := body
		if ep.IncludeDecisionLinks && name == EventApprovalRequired && sub == nil {
			if epBody, err = s.withLinks(ctx, ep, payload, call); err != nil {
				return nil, err
			}
		}
		out = append(out, agentd.WebhookDelivery{
			ID: DeliveryID(payload.EventContext.EventID, ep.ID), EndpointID: ep.ID,
			EventID: payload.EventContext.EventID, EventName: name, Position: ev.Position,
			TenantID: call.TenantID, ProjectID: call.ProjectID, Body: epBody, NextAttemptAt: &now,
		})
	}
	return out, nil
}

// traceContext puts the trace context of run runID in ec. A run that
// cannot be read gives none: a trace never holds up a webhook.
func (s *Service) traceContext(ctx context.Context, ec *EventContext, runID string) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		s.log.Warn().Err(err).Str("run_id", runID).Msg("webhooks: reading the run's trace context")
		return
	}
	if id := tracing.TraceID(run.TraceParent); id != "" {
		ec.TraceID, ec.TraceParent = id, run.TraceParent
	}
}

// anyWants reports whether some endpoint receives events named name (of
// some tenant): the others need no read of the call.
func (s *Service) anyWants(name string) bool {
	for _, ep := range s.endpoints {
		if ep.Events == nil {
			return true
		}
		for _, n := range ep.Events {
			if n == name {
				return true
			}
		}
	}
	return false
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// withLinks is payload's body with the call's decision links minted as the
// endpoint's links_key_id (SPEC §11.4), unsealed (Links): an attempt seals
// them (sealed). A key that may not decide the call
// (or a call no longer pending) gets no links, and a log line: the
// delivery goes without them.
func (s *Service) withLinks(ctx context.Context, ep *endpoint, payload Payload, call *agentd.ToolCall) ([]byte, error) {
	var err error
	if s.opts.Links == nil {
		err = agentd.Errorf(agentd.EUNAVAILABLE, "decision links are not configured")
	} else {
		payload.DecisionLinks, err = s.opts.Links.Mint(ctx, ep.LinksKeyID, call)
	}
	if err != nil {
		s.log.Warn().Str("endpoint", ep.ID).Str("tool_call_id", call.ID).Str("links_key_id", ep.LinksKeyID).
			Str("code", agentd.ErrorCode(err)).Msg("webhooks: no decision links: " + agentd.ErrorMessage(err))
		payload.DecisionLinks = nil
	}
	return json.Marshal(payload)
}
