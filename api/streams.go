package api

import (
	"strconv"
	"sync"

	"github.com/agentd-dev/agentd"
	"github.com/labstack/echo/v4"
)

// streamRetryAfter is the Retry-After of a 429 too_many_streams, in
// seconds: a slot frees when one of the key's streams ends, which the
// server cannot foresee, so the client is asked to wait a little.
const streamRetryAfter = 5

// streamSlots counts the open streams of each API key (the event stream,
// the chat protocols' responses) against one limit.
type streamSlots struct {
	max  int
	mu   sync.Mutex
	open map[string]int // by key id
}

func newStreamSlots(max int) *streamSlots {
	return &streamSlots{max: max, open: map[string]int{}}
}

// acquire takes one of key's slots and returns the func that gives it
// back (call it once, when the stream ends), or false when key holds
// every slot.
func (l *streamSlots) acquire(key string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.max {
		return nil, false
	}
	l.open[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[key]--; l.open[key] <= 0 {
				delete(l.open, key)
			}
		})
	}, true
}

// holdStream takes a stream slot of the caller's key for as long as the
// request is served: a handler that streams calls it before it applies or
// writes anything, and defers the release. Beyond the limit: 429
// too_many_streams with Retry-After.
func (s *Server) holdStream(c echo.Context) (release func(), err error) {
	release, ok := s.streams.acquire(principal(c).KeyID)
	if !ok {
		c.Response().Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		return nil, agentd.Errorf(agentd.ETOOMANYSTREAMS,
			"this API key already holds %d open streams, its limit: close one or retry later", s.streams.max)
	}
	return release, nil
}
