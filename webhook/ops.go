package webhook

import (
	"context"
	"net/url"
	"strconv"

	"github.com/agentd-dev/agentd"
)

// This file is what operators see and do (api.Webhooks): the delivery log,
// redelivery, the endpoints and their states. Every method needs an
// operator or admin key and sees only the caller's tenant and project: its
// deliveries, and the endpoints that receive its events.

func requireOperator(p agentd.Principal) error {
	if !p.SeesAll() {
		return agentd.Errorf(agentd.EFORBIDDEN, "webhook deliveries and endpoints need an operator or admin key")
	}
	return nil
}

// Deliveries returns a page of p's delivery log, newest first, and the
// cursor of the next page ("" at the end). EINVALID for a bad filter or
// cursor.
func (s *Service) Deliveries(ctx context.Context, p agentd.Principal, q agentd.WebhookDeliveryQuery) ([]agentd.WebhookDelivery, string, error) {
	if err := requireOperator(p); err != nil {
		return nil, "", err
	}
	limit := q.Limit
	if limit == 0 {
		limit = 50
	} else if limit < 0 || limit > 100 {
		return nil, "", agentd.Errorf(agentd.EINVALID, "limit must be between 1 and 100")
	}
	var before int64
	if q.Cursor != "" {
		n, err := strconv.ParseInt(q.Cursor, 10, 64)
		if err != nil || n <= 0 {
			return nil, "", agentd.Errorf(agentd.EINVALID, "invalid cursor")
		}
		before = n
	}
	if q.Status != "" && !agentd.ValidDeliveryStatus(q.Status) {
		return nil, "", agentd.Errorf(agentd.EINVALID, "status must be pending, succeeded or failed")
	}
	if q.EventName != "" && !validEvent(q.EventName) {
		return nil, "", agentd.Errorf(agentd.EINVALID, "unknown event_name")
	}
	if len(q.EndpointID) > 64 {
		return nil, "", agentd.Errorf(agentd.EINVALID, "endpoint_id is too long")
	}
	ds, err := s.store.WebhookDeliveries(ctx, agentd.WebhookDeliveryFilter{TenantID: p.TenantID, ProjectID: p.ProjectID,
		EndpointID: q.EndpointID, Status: q.Status, EventName: q.EventName, Before: before, Limit: limit + 1})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ds) > limit {
		ds = ds[:limit]
		next = strconv.FormatInt(ds[limit-1].Seq, 10)
	}
	if ds == nil {
		ds = []agentd.WebhookDelivery{}
	}
	for i := range ds {
		ds[i] = unsealed(ds[i])
	}
	return ds, next, nil
}

func validEvent(name string) bool {
	for _, n := range EventNames {
		if n == name {
			return true
		}
	}
	return false
}

// Redeliver makes one of p's deliveries due now (same webhook-id), also a
// succeeded or failed one. ENOTFOUND for another tenant's or project's.
func (s *Service) Redeliver(ctx context.Context, p agentd.Principal, id string) (*agentd.WebhookDelivery, error) {
	if err := requireOperator(p); err != nil {
		return nil, err
	}
	d, err := s.store.WebhookDelivery(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.TenantID != p.TenantID || d.ProjectID != p.ProjectID {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "webhook delivery not found")
	}
	d, err = s.store.RedeliverWebhook(ctx, id, s.opts.Clock.Now().UTC())
	if err != nil {
		return nil, err
	}
	if ep := s.byID[d.EndpointID]; ep != nil {
		ep.poke()
	}
	u := unsealed(*d)
	return &u, nil
}

// Endpoints returns the endpoints that receive p's events, with their
// states and queue depths: the pending deliveries of p's tenant and project
// only (an endpoint without a tenant filter carries every tenant's).
func (s *Service) Endpoints(ctx context.Context, p agentd.Principal) ([]agentd.WebhookEndpoint, error) {
	if err := requireOperator(p); err != nil {
		return nil, err
	}
	depth, err := s.store.WebhookQueueDepth(ctx, p.TenantID, p.ProjectID)
	if err != nil {
		return nil, err
	}
	out := []agentd.WebhookEndpoint{}
	for _, ep := range s.endpoints {
		if reaches(p, ep) {
			out = append(out, view(ep, depth[ep.ID]))
		}
	}
	return out, nil
}

// EnableEndpoint enables a disabled endpoint (a no-op for an enabled one);
// its pending deliveries resume. ENOTFOUND for an endpoint that does not
// receive p's events; EFORBIDDEN for an endpoint without a tenant filter
// (it receives every tenant's events) unless p is an admin.
func (s *Service) EnableEndpoint(ctx context.Context, p agentd.Principal, id string) (*agentd.WebhookEndpoint, error) {
	if err := requireOperator(p); err != nil {
		return nil, err
	}
	ep := s.byID[id]
	if ep == nil || !reaches(p, ep) {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "webhook endpoint not found")
	}
	if ep.TenantID == "" && p.Role != agentd.RoleAdmin {
		// It receives every tenant's events: one tenant's operator does
		// not decide for the others.
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "webhook endpoint %q receives every tenant's events: only an admin key re-enables it", id)
	}
	now := s.opts.Clock.Now().UTC()
	if err := s.store.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{ID: id, UpdatedAt: now}); err != nil {
		return nil, err
	}
	ep.setDisabled(nil, "")
	ep.poke()
	s.log.Info().Str("endpoint", id).Str("by", p.KeyID).Msg("webhooks: endpoint enabled")
	depth, err := s.store.WebhookQueueDepth(ctx, p.TenantID, p.ProjectID)
	if err != nil {
		return nil, err
	}
	v := view(ep, depth[id])
	return &v, nil
}

// DisabledEndpoints returns the ids of the disabled endpoints that receive
// events of p's tenant and project (readiness details).
func (s *Service) DisabledEndpoints(p agentd.Principal) []string {
	out := []string{}
	for _, ep := range s.endpoints {
		if off, _, _ := ep.disabled(); off && reaches(p, ep) {
			out = append(out, ep.ID)
		}
	}
	return out
}

// reaches reports whether ep receives events of p's tenant and project.
func reaches(p agentd.Principal, ep *endpoint) bool {
	return (ep.TenantID == "" || ep.TenantID == p.TenantID) && (ep.ProjectID == "" || ep.ProjectID == p.ProjectID)
}

func view(ep *endpoint, pending int64) agentd.WebhookEndpoint {
	off, at, reason := ep.disabled()
	events := ep.Events
	if events == nil {
		events = []string{}
	}
	return agentd.WebhookEndpoint{ID: ep.ID, URL: redactURL(ep.URL), Events: events, TenantID: ep.TenantID,
		ProjectID: ep.ProjectID, Enabled: !off, DisabledAt: at, DisabledReason: reason, Pending: pending}
}

// redactURL drops the user info and query of raw.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	return u.String()
}
