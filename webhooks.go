package agentd

import (
	"encoding/json"
	"time"
)

// This file holds the domain of webhook deliveries (SPEC §7): the outbox rows
// the webhook dispatcher writes while it follows the event feed, the
// attempts made for each, and the state of each configured endpoint. The
// store keeps them (its WebhookOutbox role); package webhook fills and
// drains them; docs/webhooks.md describes the design.

// Webhook delivery statuses.
const (
	// DeliveryPending: waiting for its next attempt (the first, or a retry).
	DeliveryPending = "pending"
	// DeliverySucceeded: an attempt got a 2xx answer.
	DeliverySucceeded = "succeeded"
	// DeliveryFailed: the retry schedule is exhausted, or the endpoint
	// answered 410 Gone (and was disabled). A redelivery makes it pending.
	DeliveryFailed = "failed"
)

// ValidDeliveryStatus reports whether s is one of the Delivery* statuses.
func ValidDeliveryStatus(s string) bool {
	return s == DeliveryPending || s == DeliverySucceeded || s == DeliveryFailed
}

// WebhookDelivery is one event for one endpoint: a row of the outbox. While
// an attempt is in flight (leased), NextAttemptAt is when the lease lapses.
type WebhookDelivery struct {
	// ID is the Standard Webhooks webhook-id: derived from (EventID,
	// EndpointID), so that re-creating the row after a crash gives the
	// same id, and stable across retries and redeliveries.
	ID         string `json:"id"`
	EndpointID string `json:"endpoint_id"`
	// EventID is the payload's event_context.event_id; EventName its
	// event_name; Position the source event's feed position.
	EventID   string `json:"event_id"`
	EventName string `json:"event_name"`
	Position  int64  `json:"-"`
	TenantID  string `json:"tenant_id"`
	ProjectID string `json:"project_id"`
	// Body is the request body (the event payload) as stored: every
	// attempt sends these bytes, but for decision links, which it holds
	// unsealed and an attempt seals in place (webhook.Links).
	Body   json.RawMessage `json:"payload"`
	Status string          `json:"status"`
	// NextAttemptAt is when the next attempt is due; nil unless pending.
	NextAttemptAt *time.Time       `json:"next_attempt_at"`
	Attempts      []WebhookAttempt `json:"attempts"`
	// AttemptCount is len(Attempts), also where Attempts are not loaded
	// (claims).
	AttemptCount int       `json:"attempt_count"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Seq orders deliveries by creation (the list cursor).
	Seq int64 `json:"-"`
}

// WebhookAttempt is one HTTP attempt of a delivery.
type WebhookAttempt struct {
	At time.Time `json:"at"`
	// StatusCode is the answer's HTTP status, 0 when none came (refused
	// connection, timeout).
	StatusCode int `json:"status_code"`
	// Error says why the attempt failed ("" on success); never a secret.
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"-"`
	// DurationMS is Duration in milliseconds, for JSON.
	DurationMS int64 `json:"duration_ms"`
}

// WebhookClaim asks WebhookOutbox.ClaimWebhookDeliveries for due deliveries.
type WebhookClaim struct {
	EndpointID string
	Now        time.Time
	// Owner names the claimer (one per process); LeaseUntil is when an
	// unfinished claim lapses and another claimer may take the delivery.
	Owner      string
	LeaseUntil time.Time
	// Limit bounds the claim (1..1000).
	Limit int
}

// WebhookAttemptRecord is the outcome of one attempt, for
// WebhookOutbox.RecordWebhookAttempt.
type WebhookAttemptRecord struct {
	DeliveryID string
	Owner      string
	Attempt    WebhookAttempt
	// Status is the delivery's new status; NextAttemptAt is required when
	// it is DeliveryPending (the retry).
	Status        string
	NextAttemptAt time.Time
}

// WebhookDeliveryFilter selects deliveries for WebhookOutbox.WebhookDeliveries.
type WebhookDeliveryFilter struct {
	// TenantID and ProjectID are required: a delivery log is per tenant
	// and project.
	TenantID, ProjectID string
	// EndpointID, Status and EventName filter when set.
	EndpointID, Status, EventName string
	// Before is the cursor: only deliveries with a smaller Seq (0: from the
	// newest). The list is newest first.
	Before int64
	// Limit bounds the page (1..1000; other values mean 1000).
	Limit int
}

// WebhookEndpointState is the durable state of one configured endpoint.
type WebhookEndpointState struct {
	ID string `json:"id"`
	// DisabledAt is when the endpoint was disabled (a 410 answer), nil
	// while it is enabled.
	DisabledAt *time.Time `json:"disabled_at"`
	// DisabledReason says why ("" while enabled).
	DisabledReason string    `json:"disabled_reason,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// WebhookDeliveryQuery is a page request of the delivery log (GET
// /v1/webhooks/deliveries): filters, an opaque cursor and a limit (1..100,
// 0 = 50).
type WebhookDeliveryQuery struct {
	EndpointID, Status, EventName string
	Cursor                        string
	Limit                         int
}

// WebhookEndpoint is a configured endpoint as operators see it.
type WebhookEndpoint struct {
	ID string `json:"id"`
	// URL is the endpoint's URL without its query and user info (which may
	// hold credentials).
	URL string `json:"url"`
	// Events are the event names it receives; empty means all.
	Events    []string `json:"events"`
	TenantID  string   `json:"tenant_id,omitempty"`
	ProjectID string   `json:"project_id,omitempty"`
	Enabled   bool     `json:"enabled"`
	// DisabledAt and DisabledReason say when and why it was disabled.
	DisabledAt     *time.Time `json:"disabled_at"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	// Pending is the number of its deliveries waiting for an attempt.
	Pending int64 `json:"pending"`
}
