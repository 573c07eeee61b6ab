package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/tracing"
)

// maxRetryAfter caps a receiver's Retry-After.
const maxRetryAfter = 24 * time.Hour

// work is an endpoint's worker: it claims the endpoint's due deliveries,
// at most MaxInFlight at a time, sends each in its own goroutine, and
// otherwise sleeps until the next one is due or something wakes it (a new
// delivery, a finished attempt, a redelivery, an enable).
func (s *Service) work(ctx context.Context, ep *endpoint) {
	inflight := make(chan struct{}, ep.MaxInFlight) // a token per running attempt
	defer func() {                                  // wait for the attempts of this worker
		for range cap(inflight) {
			inflight <- struct{}{}
		}
	}()
	for ctx.Err() == nil {
		if off, _, _ := ep.disabled(); off {
			select {
			case <-ctx.Done():
			case <-ep.wake:
			}
			continue
		}
		if free := cap(inflight) - len(inflight); free > 0 {
			now := s.opts.Clock.Now().UTC()
			ds, err := s.store.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: ep.ID, Now: now,
				Owner: s.opts.Owner, LeaseUntil: now.Add(ep.Timeout + s.opts.LeaseMargin), Limit: free})
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error().Err(err).Str("endpoint", ep.ID).Msg("webhooks: claiming deliveries")
					sleep(ctx, time.Second)
				}
				continue
			}
			for _, d := range ds {
				inflight <- struct{}{}
				go func() {
					defer func() { <-inflight; ep.poke() }()
					s.attempt(ctx, ep, d)
				}()
			}
			if len(ds) == free {
				continue // there may be more due: claim again when a slot frees
			}
		}
		s.waitDue(ctx, ep, len(inflight) < cap(inflight))
	}
}

// waitDue sleeps until the endpoint's next delivery is due (when a slot is
// free), a wake-up, or the end of ctx.
func (s *Service) waitDue(ctx context.Context, ep *endpoint, slotFree bool) {
	var timer <-chan time.Time
	if slotFree {
		next, err := s.store.NextWebhookAttempt(ctx, ep.ID)
		if err != nil {
			next = s.opts.Clock.Now().Add(time.Second)
		}
		if !next.IsZero() {
			d := next.Sub(s.opts.Clock.Now())
			if d <= 0 {
				return
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timer = t.C
		}
	}
	select {
	case <-ctx.Done():
	case <-ep.wake:
	case <-timer:
	}
}

// result is the outcome of one HTTP attempt.
type result struct {
	code       int
	err        string
	retryAfter time.Duration
}

// attempt sends d once and records the outcome: 2xx succeeds; 410 fails
// the delivery and disables the endpoint; anything else (3xx included,
// redirects are not followed) is retried on the schedule, honouring
// Retry-After, until it is exhausted.
func (s *Service) attempt(ctx context.Context, ep *endpoint, d agentd.WebhookDelivery) {
	start := s.opts.Clock.Now().UTC()
	began := time.Now()
	res := s.send(ctx, ep, d, start)
	took := time.Since(began)
	if ctx.Err() != nil {
		return // shutting down: the lease lapses and the attempt is made again
	}
	rec := agentd.WebhookAttemptRecord{DeliveryID: d.ID, Owner: s.opts.Owner,
		Attempt: agentd.WebhookAttempt{At: start, StatusCode: res.code, Error: res.err, Duration: took}}
	outcome := "success"
	switch {
	case res.code >= 200 && res.code < 300:
		rec.Status = agentd.DeliverySucceeded
	case res.code == http.StatusGone:
		rec.Status, outcome = agentd.DeliveryFailed, "disabled"
		rec.Attempt.Error = "410 Gone: the endpoint was disabled until an operator enables it"
	default:
		done := d.AttemptCount + 1 // attempts including this one
		if done > len(ep.RetrySchedule) {
			rec.Status, outcome = agentd.DeliveryFailed, "failed"
		} else {
			rec.Status, outcome = agentd.DeliveryPending, "retry"
			rec.NextAttemptAt = RetryAt(s.opts.Clock.Now(), ep.RetrySchedule[done-1], res.retryAfter, s.opts.Rand())
		}
	}
	s.metrics.observe(ep.ID, outcome, took)
	if err := s.store.RecordWebhookAttempt(ctx, rec); err != nil {
		s.log.Warn().Err(err).Str("endpoint", ep.ID).Str("webhook_id", d.ID).Msg("webhooks: recording an attempt")
	}
	if outcome == "disabled" {
		s.disable(ctx, ep, d.ID)
	}
	ev := s.log.Debug()
	if outcome != "success" {
		ev = s.log.Info()
	}
	ev.Str("endpoint", ep.ID).Str("webhook_id", d.ID).Str("event_name", d.EventName).Int("status_code", res.code).
		Str("error", res.err).Str("outcome", outcome).Dur("duration", took).Msg("webhook attempt")
}

// disable records that ep answered 410 and stops its worker until an
// operator enables it.
func (s *Service) disable(ctx context.Context, ep *endpoint, webhookID string) {
	now := s.opts.Clock.Now().UTC()
	reason := "answered 410 Gone to " + webhookID
	ep.setDisabled(&now, reason)
	if err := s.store.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{ID: ep.ID, DisabledAt: &now, DisabledReason: reason, UpdatedAt: now}); err != nil {
		s.log.Error().Err(err).Str("endpoint", ep.ID).Msg("webhooks: recording the endpoint disabled")
	}
	s.log.Warn().Str("endpoint", ep.ID).Str("webhook_id", webhookID).Msg("webhooks: endpoint answered 410 Gone and is disabled until an operator enables it (POST /v1/webhooks/endpoints/" + ep.ID + "/enable)")
}

// send makes one signed POST of d's body (sealed) and reads (and drops) at most 64
// KiB of the answer.
func (s *Service) send(ctx context.Context, ep *endpoint, d agentd.WebhookDelivery, ts time.Time) result {
	ctx, cancel := context.WithTimeout(ctx, ep.Timeout)
	defer cancel()
	body := s.sealed(d)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return result{err: "building the request failed"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentd-webhooks/1")
	if err := ep.keys.setHeaders(req.Header, d.ID, ts, body); err != nil {
		return result{err: "signing failed"}
	}
	if s.opts.Traces {
		if tp := traceParent(d.Body); tp != "" {
			req.Header.Set("Traceparent", tp)
		}
	}
	resp, err := ep.client.Do(req)
	if err != nil {
		return result{err: describe(err, ep.Timeout)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	res := result{code: resp.StatusCode}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		res.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
		res.retryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), s.opts.Clock.Now())
	}
	return res
}

// sealed is the body an attempt of d sends: the stored body with its
// decision links sealed (Links), each in place, every other byte as
// stored. A body without links, or whose links do not seal (written by a
// version that stored them sealed), is sent as stored.
func (s *Service) sealed(d agentd.WebhookDelivery) []byte {
	links := decisionLinks(d)
	if links == nil || s.opts.Links == nil {
		return d.Body
	}
	body := d.Body
	for _, u := range []string{links.Approve, links.Deny} {
		link, err := s.opts.Links.Seal(u)
		if err != nil {
			s.log.Warn().Str("webhook_id", d.ID).Str("code", agentd.ErrorCode(err)).Msg("webhooks: decision links not sealed; sent as stored")
			return d.Body
		}
		body = replaceLast(body, u, link)
	}
	return body
}

// unsealed is d as the API shows it (the delivery log, a redelivery's
// answer): each decision link without its token's MAC, which any operator
// of the tenant could otherwise use to decide as the link's key. Bodies
// stored by a version that stored links sealed are shown so too.
func unsealed(d agentd.WebhookDelivery) agentd.WebhookDelivery {
	links := decisionLinks(d)
	if links == nil {
		return d
	}
	body := d.Body
	for _, u := range []string{links.Approve, links.Deny} {
		tok := u[strings.LastIndexByte(u, '/')+1:]
		if i := strings.IndexByte(tok, '.'); i >= 0 {
			body = replaceLast(body, u, u[:len(u)-len(tok)+i])
		}
	}
	d.Body = body
	return d
}

// decisionLinks are the links of an approval_required delivery, nil when
// it has none.
func decisionLinks(d agentd.WebhookDelivery) *agentd.DecisionLinks {
	if d.EventName != EventApprovalRequired {
		return nil
	}
	var p struct {
		DecisionLinks *agentd.DecisionLinks `json:"decision_links"`
	}
	if json.Unmarshal(d.Body, &p) != nil {
		return nil
	}
	return p.DecisionLinks
}

// replaceLast is body with the last occurrence of the JSON string old
// replaced by the JSON string new (decision_links is the payload's last
// field; nothing in the body before it can hold a fresh link's nonce).
func replaceLast(body []byte, old, new string) []byte {
	o, _ := json.Marshal(old) // a string: cannot fail
	n, _ := json.Marshal(new)
	i := bytes.LastIndex(body, o)
	if i < 0 {
		return body
	}
	return append(append(append([]byte(nil), body[:i]...), n...), body[i+len(o):]...)
}

// traceParent is the event_context.traceparent of a payload, "" when it
// has none.
func traceParent(body []byte) string {
	var p struct {
		EventContext struct {
			TraceParent string `json:"traceparent"`
		} `json:"event_context"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	if _, ok := tracing.Parse(p.EventContext.TraceParent); !ok {
		return ""
	}
	return p.EventContext.TraceParent
}

// describe is an attempt's error without the URL (which may hold a token).
func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no answer within %s", timeout)
		}
		err = ue.Err
	}
	return err.Error()
}

// RetryAt is when the attempt after a failure at now is due: the
// schedule's delay with ±20% jitter (r in [0, 1)), and never before a
// Retry-After the receiver asked for.
func RetryAt(now time.Time, delay, retryAfter time.Duration, r float64) time.Time {
	d := time.Duration(float64(delay) * (0.8 + 0.4*r))
	return now.Add(max(d, retryAfter)).UTC()
}

// ParseRetryAfter reads a Retry-After header, seconds or an HTTP date
// relative to now; 0 when absent or invalid, at most maxRetryAfter.
func ParseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}
