package sse

import (
	"context"
	"errors"
	"time"

	"github.com/agentd-dev/agentd"
)

// DefaultFeedRetry is how long PublishFeed waits before it reads the feed
// again after a failed read.
const DefaultFeedRetry = time.Second

// PublishFeed makes the hub a consumer of the event feed: it publishes
// every event sub yields, in feed order (so each conversation's events in
// Seq order), until ctx ends or sub ends (its feed or itself closed).
// Events are committed before the feed yields them, as Publish requires. A
// failed read is passed to onErr, when not nil, and retried after retry
// (DefaultFeedRetry when <= 0), from the same position: a live stream may
// see its events late, never out of order, and one that falls behind
// catches up from the log (Serve fills gaps). PublishFeed does not close
// sub. An event of a conversation whose subscribers had it from Publish
// already (its Seq is not above the highest published since they came)
// is skipped: a replica's own commits reach the hub from the loop and
// again from the feed. Package server calls it on PostgreSQL, for the events
// other replicas commit (docs/scale-out.md); with SQLite (one process) the
// loop's commits are the one path.
func (h *Hub) PublishFeed(ctx context.Context, sub agentd.FeedSubscription, retry time.Duration, onErr func(error)) {
	if retry <= 0 {
		retry = DefaultFeedRetry
	}
	for {
		e, err := sub.Next(ctx)
		if err == nil {
			h.publishNew(e)
			continue
		}
		if ctx.Err() != nil || errors.Is(err, agentd.ErrFeedEnded) {
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
