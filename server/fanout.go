package server

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/postgres"
	"github.com/agentd-dev/agentd/sse"
	"github.com/rs/zerolog"
)

// fanoutConfig is how a replica on PostgreSQL learns of the events other
// replicas commit (docs/scale-out.md).
type fanoutConfig struct {
	// notify: LISTEN for the commits' notifications (off behind a pooler
	// that cannot hold a LISTEN, such as PgBouncer in transaction mode).
	notify bool
	// poll is the feed's catch-up read, the bound on how late an event is
	// seen when a notification is lost or notify is off.
	poll time.Duration
	// lease is the run lease (--run-lease, agentd.DefaultRunLease).
	lease time.Duration
}

// parseFanout reads --feed-notify, --feed-poll and --run-lease's values.
func parseFanout(notify, poll, lease string) (fanoutConfig, error) {
	c := fanoutConfig{notify: true, poll: feed.DefaultPoll, lease: agentd.DefaultRunLease}
	if lease != "" {
		d, err := time.ParseDuration(lease)
		if err != nil || d < time.Second || d > time.Hour {
			return c, fmt.Errorf("--run-lease must be a duration from 1s to 1h, got %q", lease)
		}
		c.lease = d
	}
	if notify != "" {
		v, err := strconv.ParseBool(notify)
		if err != nil {
			return c, fmt.Errorf("--feed-notify must be true or false, got %q", notify)
		}
		c.notify = v
	}
	if poll != "" {
		d, err := time.ParseDuration(poll)
		if err != nil || d < 10*time.Millisecond || d > time.Hour {
			return c, fmt.Errorf("--feed-poll must be a duration from 10ms to 1h, got %q", poll)
		}
		c.poll = d
	}
	return c, nil
}

// runLease is the engine's run lease: cfg's on a store replicas share
// (PostgreSQL), none on SQLite (one process: recovery at start takes every
// run, as before).
func runLease(store agentd.Store, cfg fanoutConfig) time.Duration {
	if _, ok := store.(*postgres.DB); ok {
		return cfg.lease
	}
	return 0
}

// startFanout feeds the hub from the event feed when the store is shared
// by several processes (PostgreSQL): one goroutine follows the feed from
// its head and publishes each event to the hub (sse.Hub.PublishFeed, which
// skips this replica's own commits, already published by the loop), and
// one LISTENs for the commits of every replica and wakes the feed, so the
// other replicas' events reach this one's streams at once; the feed's
// poll catches up on a lost notification. With SQLite (one process) it
// does nothing: the loop's commits are the hub's one path. The returned
// stop ends both and waits for them.
func startFanout(ctx context.Context, store agentd.Store, fd *feed.Feed, hub *sse.Hub, cfg fanoutConfig, log zerolog.Logger) (stop func(), err error) {
	pg, ok := store.(*postgres.DB)
	if !ok {
		return func() {}, nil
	}
	head, err := store.LastPosition(ctx)
	if err != nil {
		return nil, fmt.Errorf("fan-out: %w", err)
	}
	sub, err := fd.Follow(agentd.FeedFilter{After: head})
	if err != nil {
		return nil, fmt.Errorf("fan-out: %w", err)
	}
	fctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if cfg.notify {
		wg.Go(func() {
			pg.ListenEvents(fctx, fd.Notify, 0, func(err error) {
				log.Warn().Err(err).Msg("fan-out: LISTEN connection lost; reconnecting (the feed's poll catches up)")
			})
		})
	}
	wg.Go(func() {
		hub.PublishFeed(fctx, sub, 0, func(err error) {
			log.Warn().Err(err).Msg("fan-out: reading the event feed failed; retrying (streams catch up from the log)")
		})
	})
	log.Info().Bool("notify", cfg.notify).Dur("poll", cfg.poll).Int64("from_position", head).Msg("fan-out: streams get other replicas' events")
	return func() {
		cancel()
		sub.Close()
		wg.Wait()
	}, nil
}
