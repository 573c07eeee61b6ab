package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
)

// WebhookStore is the webhook outbox of the store (agentd.WebhookOutbox).
type WebhookStore struct {
	b Backend
	d *Dialect
}

// The webhook outbox (migration 0007): delivery rows the webhook dispatcher
// inserts as it follows the feed, their attempts, and endpoint states.

const deliveryColumns = `seq, id, endpoint_id, event_id, event_name, position, tenant_id, project_id, body,
	status, next_attempt_at, created_at, updated_at,
	(SELECT COUNT(*) FROM webhook_attempts WHERE delivery_seq = webhook_deliveries.seq)`

// EnqueueWebhookDeliveries implements agentd.WebhookOutbox.EnqueueWebhookDeliveries.
func (s *WebhookStore) EnqueueWebhookDeliveries(ctx context.Context, consumer string, pos int64, ds []agentd.WebhookDelivery) error {
	if err := checkConsumer(consumer, pos); err != nil {
		return err
	}
	for _, d := range ds {
		if err := checkDelivery(d); err != nil {
			return err
		}
	}
	now := time.Now().UnixNano()
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		for _, d := range ds {
			next, _ := EncTime("next_attempt_at", d.NextAttemptAt.UTC())
			if _, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries
				(id, endpoint_id, event_id, event_name, position, tenant_id, project_id, body, status, next_attempt_at, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
				d.ID, d.EndpointID, d.EventID, d.EventName, d.Position, d.TenantID, d.ProjectID, string(d.Body), next, now, now); err != nil {
				return err
			}
		}
		return setConsumerPosition(ctx, tx, consumer, pos, now)
	})
}

// checkDelivery returns EINVALID for a delivery EnqueueWebhookDeliveries
// cannot insert.
func checkDelivery(d agentd.WebhookDelivery) error {
	switch {
	case d.ID == "" || d.EndpointID == "" || d.EventID == "" || d.EventName == "":
		return agentd.Errorf(agentd.EINVALID, "a webhook delivery needs an id, an endpoint, an event id and an event name")
	case d.TenantID == "" || d.ProjectID == "":
		return agentd.Errorf(agentd.EINVALID, "webhook delivery %s needs a tenant and a project", d.ID)
	case d.NextAttemptAt == nil || d.NextAttemptAt.IsZero():
		return agentd.Errorf(agentd.EINVALID, "webhook delivery %s needs next_attempt_at", d.ID)
	}
	if _, err := EncJSON("webhook delivery body", d.Body); err != nil || len(d.Body) == 0 {
		return agentd.Errorf(agentd.EINVALID, "webhook delivery %s needs a JSON body", d.ID)
	}
	if _, err := EncTime("next_attempt_at", *d.NextAttemptAt); err != nil {
		return err
	}
	return nil
}

// ClaimWebhookDeliveries implements agentd.WebhookOutbox.ClaimWebhookDeliveries.
func (s *WebhookStore) ClaimWebhookDeliveries(ctx context.Context, c agentd.WebhookClaim) ([]agentd.WebhookDelivery, error) {
	if c.EndpointID == "" || c.Owner == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "a webhook claim needs an endpoint and an owner")
	}
	limit := c.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	now, until := c.Now.UnixNano(), c.LeaseUntil.UnixNano()
	var out []agentd.WebhookDelivery
	err := s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
			WHERE status = 'pending' AND endpoint_id = ? AND next_attempt_at <= ?
			AND (lease_until IS NULL OR lease_until <= ?)
			ORDER BY next_attempt_at, seq LIMIT ?`+s.d.skipLocked, c.EndpointID, now, now, limit)
		if err != nil {
			return err
		}
		out, err = scanDeliveries(rows)
		if err != nil {
			return err
		}
		for _, d := range out {
			// Until the attempt is recorded, the delivery is due again
			// when the lease lapses: NextWebhookAttempt needs no lease test.
			if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?, next_attempt_at = ?
				WHERE seq = ?`, c.Owner, until, until, d.Seq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordWebhookAttempt implements agentd.WebhookOutbox.RecordWebhookAttempt.
func (s *WebhookStore) RecordWebhookAttempt(ctx context.Context, r agentd.WebhookAttemptRecord) error {
	if !agentd.ValidDeliveryStatus(r.Status) {
		return agentd.Errorf(agentd.EINVALID, "invalid webhook delivery status %q", r.Status)
	}
	var next any
	if r.Status == agentd.DeliveryPending {
		if r.NextAttemptAt.IsZero() {
			return agentd.Errorf(agentd.EINVALID, "a pending webhook delivery needs next_attempt_at")
		}
		next = r.NextAttemptAt.UnixNano()
	}
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		var seq int64
		var status string
		var owner sql.NullString
		err := tx.QueryRow(ctx, `SELECT seq, status, lease_owner FROM webhook_deliveries WHERE id = ?`+s.d.forUpdate, r.DeliveryID).
			Scan(&seq, &status, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			return agentd.Errorf(agentd.ENOTFOUND, "webhook delivery not found")
		} else if err != nil {
			return err
		}
		if status != agentd.DeliveryPending || owner.String != r.Owner {
			return agentd.Errorf(agentd.ECONFLICT, "webhook delivery %s is no longer leased to this worker", r.DeliveryID)
		}
		a := r.Attempt
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_attempts (delivery_seq, n, at, status_code, error, duration_ns)
			VALUES (?, (SELECT COUNT(*) + 1 FROM webhook_attempts WHERE delivery_seq = ?), ?, ?, ?, ?)`,
			seq, seq, a.At.UnixNano(), a.StatusCode, a.Error, int64(a.Duration)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?,
			lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE seq = ?`, r.Status, next, time.Now().UnixNano(), seq)
		return err
	})
}

// WebhookDeliveries implements agentd.WebhookOutbox.WebhookDeliveries.
func (s *WebhookStore) WebhookDeliveries(ctx context.Context, f agentd.WebhookDeliveryFilter) ([]agentd.WebhookDelivery, error) {
	if f.TenantID == "" || f.ProjectID == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "a webhook delivery list needs a tenant and a project")
	}
	if f.Status != "" && !agentd.ValidDeliveryStatus(f.Status) {
		return nil, agentd.Errorf(agentd.EINVALID, "invalid webhook delivery status %q", f.Status)
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	where := []string{"tenant_id = ?", "project_id = ?"}
	args := []any{f.TenantID, f.ProjectID}
	for _, c := range []struct{ col, v string }{{"endpoint_id", f.EndpointID}, {"status", f.Status}, {"event_name", f.EventName}} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	if f.Before > 0 {
		where, args = append(where, "seq < ?"), append(args, f.Before)
	}
	var out []agentd.WebhookDelivery
	err := s.b.Read(ctx, func(tx Q) error {
		rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE `+
			strings.Join(where, " AND ")+` ORDER BY seq DESC LIMIT ?`, append(args, limit)...)
		if err != nil {
			return err
		}
		if out, err = scanDeliveries(rows); err != nil {
			return err
		}
		return s.loadAttempts(ctx, tx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WebhookDelivery implements agentd.WebhookOutbox.WebhookDelivery.
func (s *WebhookStore) WebhookDelivery(ctx context.Context, id string) (*agentd.WebhookDelivery, error) {
	var out *agentd.WebhookDelivery
	err := s.b.Read(ctx, func(tx Q) error {
		var err error
		out, err = s.get(ctx, tx, id)
		return err
	})
	return out, err
}

func (s *WebhookStore) get(ctx context.Context, tx Q, id string) (*agentd.WebhookDelivery, error) {
	rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	ds, err := scanDeliveries(rows)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "webhook delivery not found")
	}
	if err := s.loadAttempts(ctx, tx, ds); err != nil {
		return nil, err
	}
	return &ds[0], nil
}

// RedeliverWebhook implements agentd.WebhookOutbox.RedeliverWebhook.
func (s *WebhookStore) RedeliverWebhook(ctx context.Context, id string, now time.Time) (*agentd.WebhookDelivery, error) {
	var out *agentd.WebhookDelivery
	err := s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		res, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?,
			lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ?`, now.UnixNano(), time.Now().UnixNano(), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return agentd.Errorf(agentd.ENOTFOUND, "webhook delivery not found")
		}
		out, err = s.get(ctx, tx, id)
		return err
	})
	return out, err
}

// NextWebhookAttempt implements agentd.WebhookOutbox.NextWebhookAttempt.
func (s *WebhookStore) NextWebhookAttempt(ctx context.Context, endpointID string) (time.Time, error) {
	var at sql.NullInt64
	err := s.b.Read(ctx, func(tx Q) error {
		return tx.QueryRow(ctx, `SELECT next_attempt_at FROM webhook_deliveries
			WHERE status = 'pending' AND endpoint_id = ? ORDER BY next_attempt_at LIMIT 1`, endpointID).Scan(&at)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	} else if err != nil {
		return time.Time{}, err
	}
	return decTime(at), nil
}

// WebhookQueueDepth implements agentd.WebhookOutbox.WebhookQueueDepth.
func (s *WebhookStore) WebhookQueueDepth(ctx context.Context, tenantID, projectID string) (map[string]int64, error) {
	q, args := queueDepthQuery, []any(nil)
	switch {
	case tenantID != "" && projectID != "":
		q, args = tenantQueueDepthQuery, []any{tenantID, projectID}
	case tenantID != "" || projectID != "":
		return nil, agentd.Errorf(agentd.EINVALID, "a webhook queue depth is of every tenant or of one tenant's project")
	}
	out := map[string]int64{}
	err := s.b.Read(ctx, func(tx Q) error {
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int64
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			out[id] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// The queue depths (WebhookQueueDepth): every tenant's counts the entries of
// webhook_deliveries_due, a tenant's project's those of
// webhook_deliveries_pending (pinned by sqlite's TestQueryPlans).
const (
	queueDepthQuery       = `SELECT endpoint_id, COUNT(*) FROM webhook_deliveries WHERE status = 'pending' GROUP BY endpoint_id`
	tenantQueueDepthQuery = `SELECT endpoint_id, COUNT(*) FROM webhook_deliveries
		WHERE status = 'pending' AND tenant_id = ? AND project_id = ? GROUP BY endpoint_id`
)

// WebhookEndpointStates implements agentd.WebhookOutbox.WebhookEndpointStates.
func (s *WebhookStore) WebhookEndpointStates(ctx context.Context) ([]agentd.WebhookEndpointState, error) {
	var out []agentd.WebhookEndpointState
	err := s.b.Read(ctx, func(tx Q) error {
		rows, err := tx.Query(ctx, `SELECT id, disabled_at, disabled_reason, updated_at FROM webhook_endpoints ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st agentd.WebhookEndpointState
			var disabled, updated sql.NullInt64
			if err := rows.Scan(&st.ID, &disabled, &st.DisabledReason, &updated); err != nil {
				return err
			}
			if disabled.Valid {
				t := decTime(disabled)
				st.DisabledAt = &t
			}
			st.UpdatedAt = decTime(updated)
			out = append(out, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetWebhookEndpointState implements agentd.WebhookOutbox.SetWebhookEndpointState.
func (s *WebhookStore) SetWebhookEndpointState(ctx context.Context, st agentd.WebhookEndpointState) error {
	if st.ID == "" {
		return agentd.Errorf(agentd.EINVALID, "a webhook endpoint state needs an id")
	}
	var disabled any
	if st.DisabledAt != nil {
		v, err := EncTime("disabled_at", *st.DisabledAt)
		if err != nil {
			return err
		}
		disabled = v
	}
	updated := st.UpdatedAt
	if updated.IsZero() {
		updated = time.Now()
	}
	return s.b.Write(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (id, disabled_at, disabled_reason, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET disabled_at = excluded.disabled_at, disabled_reason = excluded.disabled_reason,
			updated_at = excluded.updated_at`, st.ID, disabled, st.DisabledReason, updated.UnixNano())
		return err
	})
}

func scanDeliveries(rows Rows) ([]agentd.WebhookDelivery, error) {
	defer rows.Close()
	var out []agentd.WebhookDelivery
	for rows.Next() {
		var d agentd.WebhookDelivery
		var body string
		var next, created, updated sql.NullInt64
		if err := rows.Scan(&d.Seq, &d.ID, &d.EndpointID, &d.EventID, &d.EventName, &d.Position, &d.TenantID, &d.ProjectID,
			&body, &d.Status, &next, &created, &updated, &d.AttemptCount); err != nil {
			return nil, err
		}
		d.Body = []byte(body)
		if next.Valid {
			t := decTime(next)
			d.NextAttemptAt = &t
		}
		d.CreatedAt, d.UpdatedAt = decTime(created), decTime(updated)
		out = append(out, d)
	}
	return out, rows.Err()
}

// loadAttempts fills in the attempts of ds with one query.
func (s *WebhookStore) loadAttempts(ctx context.Context, tx Q, ds []agentd.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	bySeq := make(map[int64]*agentd.WebhookDelivery, len(ds))
	seqs := make([]int64, len(ds))
	for i := range ds {
		ds[i].Attempts = []agentd.WebhookAttempt{}
		bySeq[ds[i].Seq] = &ds[i]
		seqs[i] = ds[i].Seq
	}
	in, args := s.d.inInt64s("delivery_seq", seqs)
	rows, err := tx.Query(ctx, `SELECT delivery_seq, at, status_code, error, duration_ns FROM webhook_attempts
		WHERE `+in+` ORDER BY delivery_seq, n`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, at, dur int64
		var a agentd.WebhookAttempt
		if err := rows.Scan(&seq, &at, &a.StatusCode, &a.Error, &dur); err != nil {
			return err
		}
		a.At, a.Duration = time.Unix(0, at).UTC(), time.Duration(dur)
		a.DurationMS = a.Duration.Milliseconds()
		d := bySeq[seq]
		d.Attempts = append(d.Attempts, a)
	}
	return rows.Err()
}
