package agentd

import (
	"context"
	"errors"
)

// Feed is the one ordered stream of every committed event of every
// conversation, in Position order, read from the durable store: the source
// for consumers that must see every event once, in order, across restarts
// (the webhook outbox). The SSE hub is not one of them: the loop's commits
// publish to it directly. docs/architecture.md, "The event feed", has both
// paths and the seam that will feed the hub from the feed. Implementation:
// package feed.
type Feed interface {
	// Follow returns a subscription to the events matching f (its tenant,
	// its tenant and project, or every event) with Position > f.After; a
	// page of at most f.Limit events (FeedFilter's default when outside
	// 1..MaxFeedPage) is held in memory at a time. Follow reads nothing:
	// the first Next does. EINVALID when f is invalid (FeedFilter.Check);
	// EUNAVAILABLE when the feed is closed.
	Follow(f FeedFilter) (FeedSubscription, error)
}

// FeedSubscription is one consumer's place in the Feed. Next must not be
// called from more than one goroutine at a time; Close may be called from
// any goroutine, also while Next waits.
type FeedSubscription interface {
	// Next returns the next matching event: each committed event after the
	// starting position exactly once, in Position order, with no gap,
	// whichever process committed it. It waits while there is none. It
	// returns ctx's error when ctx ends, an EUNAVAILABLE error wrapping
	// ErrFeedEnded when the subscription or its feed is closed (for good),
	// and a store's read error as is; after a read error or ctx's the
	// subscription keeps its place, so Next may be called again.
	Next(ctx context.Context) (Event, error)
	// Close ends the subscription and releases it; a Next waiting on it
	// returns. Close is idempotent.
	Close()
}

// ErrFeedEnded is wrapped by the error FeedSubscription.Next returns once
// the subscription or its feed is closed: errors.Is(err, ErrFeedEnded)
// tells a consumer to stop rather than retry.
var ErrFeedEnded = errors.New("feed subscription ended")

// MaxFeedPage is the most events Store.EventsAfter returns at once.
const MaxFeedPage = 1000

// FeedFilter selects events of the feed, for Store.EventsAfter and
// Feed.Follow.
type FeedFilter struct {
	// After is the cursor: only events with a greater Position (0: from the
	// first event).
	After int64
	// TenantID, when set, keeps only the events of that tenant's
	// conversations; ProjectID, which needs TenantID, only those of that
	// project of it. Both empty: every event.
	TenantID, ProjectID string
	// Limit bounds a page (1..MaxFeedPage; other values mean MaxFeedPage).
	Limit int
}

// Check returns EINVALID when After is negative or ProjectID is set
// without TenantID (project ids are scoped by their tenant).
func (f FeedFilter) Check() error {
	if f.After < 0 {
		return Errorf(EINVALID, "feed position %d is negative", f.After)
	}
	if f.ProjectID != "" && f.TenantID == "" {
		return Errorf(EINVALID, "a feed filter on project %q needs its tenant", truncate(f.ProjectID, 80))
	}
	return nil
}

// PageLimit returns f.Limit, or MaxFeedPage when f.Limit is outside
// 1..MaxFeedPage.
func (f FeedFilter) PageLimit() int {
	if f.Limit <= 0 || f.Limit > MaxFeedPage {
		return MaxFeedPage
	}
	return f.Limit
}

// MaxConsumerName is the longest feed consumer name, in bytes.
const MaxConsumerName = 128

// CheckConsumerName returns EINVALID unless name is a valid feed consumer
// name: 1 to MaxConsumerName ASCII letters, digits, '.', '_', ':' and '-',
// starting with a letter or digit ("sse-hub", "webhooks:ops").
func CheckConsumerName(name string) error {
	if name == "" || len(name) > MaxConsumerName {
		return Errorf(EINVALID, "feed consumer name must be 1 to %d characters, got %d", MaxConsumerName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != ':' && c != '-') {
			return Errorf(EINVALID, "invalid feed consumer name %q: use letters, digits, '.', '_', ':' and '-', starting with a letter or digit", truncate(name, 80))
		}
	}
	return nil
}
