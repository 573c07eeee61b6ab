package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// webhookFixture appends n events to a conversation and returns their
// positions: deliveries need a committed position to record.
func webhookFixture(t *testing.T, s agentd.Store, n int) []int64 {
	t.Helper()
	conv := newConversation(t, s)
	drafts := make([]agentd.EventDraft, n)
	for i := range drafts {
		drafts[i] = draft(conv.ID, "message", `{"n":1}`)
	}
	evs, err := s.AppendEvents(context.Background(), drafts)
	noErr(t, err, "AppendEvents")
	return positions(evs)
}

// delivery returns a pending delivery of endpoint for the event at pos.
func delivery(endpoint string, pos int64, tenant, project, event string, due time.Time) agentd.WebhookDelivery {
	return agentd.WebhookDelivery{
		ID: fmt.Sprintf("msg_%s_%d", endpoint, pos), EndpointID: endpoint, EventID: fmt.Sprintf("evt-%d", pos),
		EventName: event, Position: pos, TenantID: tenant, ProjectID: project,
		Body: json.RawMessage(fmt.Sprintf(`{"n": %d}`, pos)), NextAttemptAt: &due,
	}
}

// testWebhookEnqueue checks that enqueueing inserts pending rows with their
// bodies byte for byte and advances the consumer in the same transaction,
// that enqueueing the same ids again changes nothing, and that a bad
// delivery writes neither rows nor the cursor.
func testWebhookEnqueue(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	pos := webhookFixture(t, s, 3)
	d1 := delivery("ops", pos[0], "tenant", "project", "llm.tool_call_started", at(0))
	d2 := delivery("audit", pos[0], "tenant", "project", "llm.tool_call_started", at(0))
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[0], []agentd.WebhookDelivery{d1, d2}), "Enqueue")
	if p, _ := s.ConsumerPosition(ctx, "webhooks"); p != pos[0] {
		t.Fatalf("consumer position = %d, want %d", p, pos[0])
	}
	// A restarted dispatcher re-enqueues the same event: nothing changes.
	again := d1
	again.Body = json.RawMessage(`{"other": true}`)
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[0], []agentd.WebhookDelivery{again}), "Enqueue again")
	got, err := s.WebhookDelivery(ctx, d1.ID)
	noErr(t, err, "WebhookDelivery")
	sameJSON(t, "body", got.Body, d1.Body)
	if got.Status != agentd.DeliveryPending || got.NextAttemptAt == nil || len(got.Attempts) != 0 {
		t.Fatalf("delivery = %+v, want pending with next_attempt_at and no attempts", got)
	}
	sameTime(t, "next_attempt_at", *got.NextAttemptAt, at(0))
	if got.EndpointID != "ops" || got.EventID != d1.EventID || got.EventName != d1.EventName || got.TenantID != "tenant" {
		t.Fatalf("delivery = %+v, want the fields of %+v", got, d1)
	}

	bad := delivery("ops", pos[1], "", "project", "e", at(0))
	wantCode(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[1], []agentd.WebhookDelivery{delivery("ops", pos[1], "tenant", "project", "e", at(0)), bad}), agentd.EINVALID)
	wantCode(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[2]+1, nil), agentd.EINVALID) // past the newest event
	wantCode(t, s.EnqueueWebhookDeliveries(ctx, "bad name!", pos[1], nil), agentd.EINVALID)
	if p, _ := s.ConsumerPosition(ctx, "webhooks"); p != pos[0] {
		t.Fatalf("consumer position after failed enqueues = %d, want %d", p, pos[0])
	}
	wantCode(t, func() error { _, err := s.WebhookDelivery(ctx, "msg_ops_"+fmt.Sprint(pos[1])); return err }(), agentd.ENOTFOUND)
	// No deliveries: the cursor still moves.
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[2], nil), "Enqueue nothing")
	if p, _ := s.ConsumerPosition(ctx, "webhooks"); p != pos[2] {
		t.Fatalf("consumer position = %d, want %d", p, pos[2])
	}
}

// testWebhookClaim checks due order, the per-endpoint scope, the limit, that
// a leased delivery is not claimed again until its lease lapses, and that
// concurrent claimers never get the same delivery.
func testWebhookClaim(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	pos := webhookFixture(t, s, 4)
	ds := []agentd.WebhookDelivery{
		delivery("ops", pos[0], "tenant", "project", "e", at(3*time.Second)),
		delivery("ops", pos[1], "tenant", "project", "e", at(time.Second)),
		delivery("ops", pos[2], "tenant", "project", "e", at(time.Hour)), // not due
		delivery("other", pos[3], "tenant", "project", "e", at(0)),
	}
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[3], ds), "Enqueue")
	now := at(time.Minute)
	next, err := s.NextWebhookAttempt(ctx, "ops")
	noErr(t, err, "NextWebhookAttempt")
	sameTime(t, "NextWebhookAttempt", next, at(time.Second))
	if n, _ := s.NextWebhookAttempt(ctx, "nobody"); !n.IsZero() {
		t.Fatalf("NextWebhookAttempt of an endpoint without deliveries = %s, want zero", n)
	}

	got, err := s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: "ops", Now: now, Owner: "a", LeaseUntil: now.Add(time.Minute), Limit: 1})
	noErr(t, err, "Claim")
	if len(got) != 1 || got[0].ID != ds[1].ID {
		t.Fatalf("claim = %v, want the earliest due %s", deliveryIDs(got), ds[1].ID)
	}
	got, _ = s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: "ops", Now: now, Owner: "b", LeaseUntil: now.Add(time.Minute), Limit: 10})
	if len(got) != 1 || got[0].ID != ds[0].ID {
		t.Fatalf("second claim = %v, want only %s (the other is leased, one is not due)", deliveryIDs(got), ds[0].ID)
	}
	later := now.Add(2 * time.Minute) // both leases lapsed
	got, _ = s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: "ops", Now: later, Owner: "c", LeaseUntil: later.Add(time.Minute), Limit: 10})
	if len(got) != 2 {
		t.Fatalf("claim after the leases lapsed = %v, want both due deliveries", deliveryIDs(got))
	}
	// The old owner lost its lease: its record is ECONFLICT.
	wantCode(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: ds[1].ID, Owner: "a",
		Attempt: agentd.WebhookAttempt{At: now, StatusCode: 200}, Status: agentd.DeliverySucceeded}), agentd.ECONFLICT)
	wantCode(t, func() error {
		_, err := s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{Now: now, Owner: "a"})
		return err
	}(), agentd.EINVALID)

	// Concurrent claimers of one endpoint's backlog split it.
	more := make([]agentd.WebhookDelivery, 0, 40)
	for i := range 40 {
		d := delivery("busy", pos[0], "tenant", "project", "e", at(0))
		d.ID = fmt.Sprintf("msg_busy_%d", i)
		more = append(more, d)
	}
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[3], more), "Enqueue backlog")
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for range 5 {
				got, err := s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: "busy", Now: now, Owner: owner, LeaseUntil: now.Add(time.Hour), Limit: 3})
				if err != nil {
					t.Errorf("concurrent claim: %v", err)
					return
				}
				mu.Lock()
				for _, d := range got {
					if prev, dup := seen[d.ID]; dup {
						t.Errorf("%s claimed by %s and %s", d.ID, prev, owner)
					}
					seen[d.ID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("concurrent claimers got %d of 40 deliveries", len(seen))
	}
}

// testWebhookAttempts checks that attempts are appended in order with their
// fields, that a retry reschedules, success and failure end the delivery, a
// redelivery makes it pending again with its attempts, and the queue depth.
func testWebhookAttempts(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	pos := webhookFixture(t, s, 2)
	d := delivery("ops", pos[0], "tenant", "project", "e", at(0))
	other := delivery("ops", pos[1], "tenant", "project", "e", at(100*time.Hour))
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[1], []agentd.WebhookDelivery{d, other}), "Enqueue")
	depth, err := s.WebhookQueueDepth(ctx, "", "")
	noErr(t, err, "WebhookQueueDepth")
	if depth["ops"] != 2 || len(depth) != 1 {
		t.Fatalf("queue depth = %v, want ops: 2", depth)
	}
	claim := func(now time.Time) {
		t.Helper()
		got, err := s.ClaimWebhookDeliveries(ctx, agentd.WebhookClaim{EndpointID: "ops", Now: now, Owner: "me", LeaseUntil: now.Add(time.Minute), Limit: 1})
		noErr(t, err, "Claim")
		if len(got) != 1 || got[0].ID != d.ID {
			t.Fatalf("claim = %v, want %s", deliveryIDs(got), d.ID)
		}
	}
	claim(at(time.Second))
	noErr(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: d.ID, Owner: "me",
		Attempt: agentd.WebhookAttempt{At: at(time.Second), StatusCode: 500, Error: "HTTP 500", Duration: 1500 * time.Microsecond},
		Status:  agentd.DeliveryPending, NextAttemptAt: at(time.Hour)}), "Record retry")
	got, _ := s.WebhookDelivery(ctx, d.ID)
	if got.Status != agentd.DeliveryPending || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(at(time.Hour)) {
		t.Fatalf("after a failed attempt: %+v, want pending, due in an hour", got)
	}
	if len(got.Attempts) != 1 || got.Attempts[0].StatusCode != 500 || got.Attempts[0].Error != "HTTP 500" || got.Attempts[0].Duration != 1500*time.Microsecond {
		t.Fatalf("attempts = %+v", got.Attempts)
	}
	sameTime(t, "attempt time", got.Attempts[0].At, at(time.Second))

	claim(at(time.Hour))
	noErr(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: d.ID, Owner: "me",
		Attempt: agentd.WebhookAttempt{At: at(time.Hour), StatusCode: 204}, Status: agentd.DeliverySucceeded}), "Record success")
	got, _ = s.WebhookDelivery(ctx, d.ID)
	if got.Status != agentd.DeliverySucceeded || got.NextAttemptAt != nil || len(got.Attempts) != 2 || got.Attempts[1].StatusCode != 204 {
		t.Fatalf("after success: %+v", got)
	}
	wantCode(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: d.ID, Owner: "me", Status: agentd.DeliveryFailed}), agentd.ECONFLICT)
	wantCode(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: "msg_ghost", Owner: "me", Status: agentd.DeliveryFailed}), agentd.ENOTFOUND)
	wantCode(t, s.RecordWebhookAttempt(ctx, agentd.WebhookAttemptRecord{DeliveryID: d.ID, Owner: "me", Status: agentd.DeliveryPending}), agentd.EINVALID)

	re, err := s.RedeliverWebhook(ctx, d.ID, at(2*time.Hour))
	noErr(t, err, "RedeliverWebhook")
	if re.Status != agentd.DeliveryPending || re.NextAttemptAt == nil || len(re.Attempts) != 2 {
		t.Fatalf("redelivered: %+v, want pending with its two attempts", re)
	}
	sameTime(t, "redelivery due", *re.NextAttemptAt, at(2*time.Hour))
	claim(at(2 * time.Hour))
	_, err = s.RedeliverWebhook(ctx, "msg_ghost", at(0))
	wantCode(t, err, agentd.ENOTFOUND)
}

// testWebhookList checks the delivery log: tenant and project scoping,
// filters, newest first, and cursor paging.
func testWebhookList(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	pos := webhookFixture(t, s, 5)
	ds := []agentd.WebhookDelivery{
		delivery("ops", pos[0], "tenant", "project", "llm.tool_call_started", at(0)),
		delivery("audit", pos[1], "tenant", "project", "llm.tool_call_refused", at(0)),
		delivery("ops", pos[2], "tenant", "project", "llm.tool_call_refused", at(0)),
		delivery("ops", pos[3], "tenant", "other-project", "llm.tool_call_started", at(0)),
		delivery("ops", pos[4], "other-tenant", "project", "llm.tool_call_started", at(0)),
	}
	noErr(t, s.EnqueueWebhookDeliveries(ctx, "webhooks", pos[4], ds), "Enqueue")
	list := func(f agentd.WebhookDeliveryFilter) []agentd.WebhookDelivery {
		t.Helper()
		got, err := s.WebhookDeliveries(ctx, f)
		noErr(t, err, "WebhookDeliveries")
		return got
	}
	all := list(agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project"})
	wantIDs(t, "the project's log, newest first", deliveryIDs(all), ds[2].ID, ds[1].ID, ds[0].ID)
	wantIDs(t, "endpoint filter", deliveryIDs(list(agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project", EndpointID: "ops"})), ds[2].ID, ds[0].ID)
	wantIDs(t, "event filter", deliveryIDs(list(agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project", EventName: "llm.tool_call_refused"})), ds[2].ID, ds[1].ID)
	wantIDs(t, "status filter", deliveryIDs(list(agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project", Status: agentd.DeliverySucceeded})))
	page := list(agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project", Limit: 2})
	wantIDs(t, "first page", deliveryIDs(page), ds[2].ID, ds[1].ID)
	wantIDs(t, "second page", deliveryIDs(list(agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project", Limit: 2, Before: page[1].Seq})), ds[0].ID)
	for _, d := range all {
		if d.Attempts == nil {
			t.Fatalf("%s: attempts nil, want an empty list", d.ID)
		}
	}
	_, err := s.WebhookDeliveries(ctx, agentd.WebhookDeliveryFilter{TenantID: "tenant"})
	wantCode(t, err, agentd.EINVALID)
	_, err = s.WebhookDeliveries(ctx, agentd.WebhookDeliveryFilter{TenantID: "tenant", ProjectID: "project", Status: "lost"})
	wantCode(t, err, agentd.EINVALID)
}

// testWebhookEndpointStates checks that an endpoint's state round-trips and
// is replaced.
func testWebhookEndpointStates(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	states, err := s.WebhookEndpointStates(ctx)
	noErr(t, err, "WebhookEndpointStates")
	if len(states) != 0 {
		t.Fatalf("states of a new store = %+v", states)
	}
	off := at(time.Minute)
	noErr(t, s.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{ID: "ops", DisabledAt: &off, DisabledReason: "410 Gone", UpdatedAt: off}), "disable")
	noErr(t, s.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{ID: "audit", UpdatedAt: off}), "audit")
	states, _ = s.WebhookEndpointStates(ctx)
	if len(states) != 2 || states[1].ID != "ops" || states[1].DisabledAt == nil || states[1].DisabledReason != "410 Gone" || states[0].DisabledAt != nil {
		t.Fatalf("states = %+v", states)
	}
	sameTime(t, "disabled_at", *states[1].DisabledAt, off)
	noErr(t, s.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{ID: "ops", UpdatedAt: at(time.Hour)}), "enable")
	states, _ = s.WebhookEndpointStates(ctx)
	if states[1].DisabledAt != nil || states[1].DisabledReason != "" {
		t.Fatalf("after enable: %+v", states[1])
	}
	wantCode(t, s.SetWebhookEndpointState(ctx, agentd.WebhookEndpointState{}), agentd.EINVALID)
}

func deliveryIDs(ds []agentd.WebhookDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
