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
// sub. cmd/agentd does not call it (the loop's commits publish to the hub
// directly); it is the seam for events other processes commit, described
// in docs/architecture.md, "The event feed".
func (h *Hub) PublishFeed(ctx context.Context, sub agentd.FeedSubscription, retry time.Duration, onErr func(error)) {
	if retry <= 0 {
		retry = DefaultFeedRetry
	}
	for {
		e, err := sub.Next(ctx)
		if err == nil {
			h.Publish(e)
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
