package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventsChannel is the LISTEN/NOTIFY channel every transaction that
// appends events notifies when it commits (with an empty payload: a
// listener re-reads the log, which is the source of truth).
const EventsChannel = "agentd_events"

// DefaultListenRetry is how long ListenEvents waits before it connects
// again after its connection failed.
const DefaultListenRetry = time.Second

// notify queues the transaction's notification on EventsChannel (once per
// transaction). PostgreSQL delivers it when, and only if, the transaction
// commits, after its rows are visible to other sessions; a rolled-back
// transaction notifies nobody.
func (t *txn) notify(ctx context.Context) error {
	if t.notified {
		return nil
	}
	t.count.Statements.Add(1)
	if _, err := t.tx.Exec(ctx, `SELECT pg_notify('`+EventsChannel+`', '')`); err != nil {
		return err
	}
	t.notified = true
	return nil
}

// ListenEvents calls wake each time a transaction of any process on this
// database commits events, and once each time it has (re)connected, since
// notifications sent while it was not listening are lost. It holds one
// connection of its own, outside the pool, with LISTEN on EventsChannel,
// until ctx ends. When that connection fails it tells onErr (when not nil),
// waits retry (DefaultListenRetry when <= 0) and connects again. A wake-up
// only shortens a reader's wait: the reader re-reads the log after its
// last position (agentd.EventLog.EventsAfter), so a lost or merged
// notification delays an event, never loses it.
func (db *DB) ListenEvents(ctx context.Context, wake func(), retry time.Duration, onErr func(error)) {
	if retry <= 0 {
		retry = DefaultListenRetry
	}
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		if onErr != nil {
			onErr(err)
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listenOnce connects, listens, wakes once (whatever was committed before
// the LISTEN), then wakes on each notification until the connection fails
// or ctx ends; it returns why.
func (db *DB) listenOnce(ctx context.Context, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, db.conn.Copy())
	if err != nil {
		return storeErr(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+EventsChannel); err != nil {
		return storeErr(err)
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return storeErr(err)
		}
		wake()
	}
}
