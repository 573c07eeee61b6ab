package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	r3 "github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/agentd-dev/agentd"
)

// Defaults of FollowOptions.
const (
	DefaultMaxEventSize  = 16 << 20
	DefaultMinRetryDelay = 500 * time.Millisecond
	DefaultMaxRetryDelay = 30 * time.Second
	DefaultIdleTimeout   = 3 * DefaultHeartbeat
)

// FollowOptions tunes Follow. The zero value gives the defaults.
type FollowOptions struct {
	// Header is sent with every request, e.g. Authorization.
	Header http.Header
	// LastEventID resumes after this sequence number; 0 reads the whole log.
	LastEventID int64
	// HTTPClient makes the requests (default: a client over
	// http.DefaultTransport). Its Timeout must be zero: it would end every
	// stream.
	HTTPClient *http.Client
	// MaxEventSize is the largest event accepted, in bytes (default 16 MiB).
	// A larger event ends Follow with an error wrapping bufio.ErrTooLong.
	MaxEventSize int
	// MinRetryDelay and MaxRetryDelay bound the doubling wait before a
	// reconnect (defaults 500ms and 30s). The wait starts again from
	// MinRetryDelay after a connection that delivered an event.
	MinRetryDelay, MaxRetryDelay time.Duration
	// IdleTimeout reconnects when nothing, not even a heartbeat, arrives for
	// this long (default 45s, three heartbeats). Negative disables it.
	IdleTimeout time.Duration
	// OnRetry, if set, is called with the error that ended a connection
	// (ErrStreamEnded after a clean end) and the wait before the next one.
	OnRetry func(err error, wait time.Duration)
}

func (o FollowOptions) withDefaults() FollowOptions {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.MaxEventSize <= 0 {
		o.MaxEventSize = DefaultMaxEventSize
	}
	if o.MinRetryDelay <= 0 {
		o.MinRetryDelay = DefaultMinRetryDelay
	}
	if o.MaxRetryDelay < o.MinRetryDelay {
		o.MaxRetryDelay = max(DefaultMaxRetryDelay, o.MinRetryDelay)
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	return o
}

var (
	// ErrStreamEnded is passed to OnRetry when the server ended the
	// response cleanly (for example on shutdown); Follow reconnects.
	ErrStreamEnded = errors.New("sse: stream ended by server")
	// ErrIdle is passed to OnRetry when nothing arrived for IdleTimeout.
	ErrIdle = errors.New("sse: stream idle, reconnecting")
	// ErrBadEvent is passed to OnRetry when an event was not a complete
	// agentd event (no numeric id, no type, or data that is not JSON), which
	// is what a connection broken in the middle of an event looks like.
	ErrBadEvent = errors.New("sse: incomplete or malformed event")
)

// StatusError is a response other than 200 text/event-stream.
type StatusError struct {
	StatusCode  int
	ContentType string
	// Code and Message come from an agentd error body, when there is one.
	Code, Message string
}

func (e *StatusError) Error() string {
	if e.StatusCode == http.StatusOK {
		return fmt.Sprintf("sse: response is %q, not text/event-stream", e.ContentType)
	}
	s := fmt.Sprintf("sse: server answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" || e.Message != "" {
		s += fmt.Sprintf(": %s: %s", e.Code, e.Message)
	}
	return s
}

// Temporary reports whether retrying may help: 5xx, 408, 425 and 429.
func (e *StatusError) Temporary() bool {
	switch e.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return e.StatusCode >= 500
}

// Follow reads the event stream at url and calls handle for each event, in
// Seq order and at most once per Seq, until ctx ends or handle fails.
//
// It reconnects with Last-Event-ID set to the last event handle accepted
// whenever the connection breaks, the server ends the response, an event
// arrives incomplete, or nothing arrives for IdleTimeout, waiting between
// attempts with a doubling delay that ctx interrupts. It returns ctx.Err()
// when ctx ends, the error of handle (which ends Follow), an error wrapping
// bufio.ErrTooLong for an event over MaxEventSize, or a *StatusError for a
// response that retrying cannot fix (4xx other than 408, 425 and 429, or a
// content type other than text/event-stream). handle runs on the calling
// goroutine; no goroutine outlives Follow.
func Follow(ctx context.Context, url string, opt FollowOptions, handle func(agentd.Event) error) error {
	if err := checkURL(url); err != nil {
		return err
	}
	f := &follower{url: url, opt: opt.withDefaults(), handle: handle}
	f.last = f.opt.LastEventID
	wait := f.opt.MinRetryDelay
	for {
		delivered, err := f.attempt(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var he handlerError
		if errors.As(err, &he) {
			return he.err
		}
		if permanent(err) {
			return err
		}
		if err == nil {
			err = ErrStreamEnded
		}
		if delivered {
			wait = f.opt.MinRetryDelay
		}
		if f.opt.OnRetry != nil {
			f.opt.OnRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, f.opt.MaxRetryDelay)
	}
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("sse: bad url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("sse: bad url %q: scheme must be http or https", s)
	}
	return nil
}

// permanent reports whether reconnecting cannot help.
func permanent(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return !se.Temporary()
	}
	return errors.Is(err, bufio.ErrTooLong)
}

// handlerError carries the error of the caller's handle function.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

type follower struct {
	url    string
	opt    FollowOptions
	handle func(agentd.Event) error
	last   int64 // Seq of the last event handle accepted
}

// attempt runs one connection with an r3labs client and reports whether it
// delivered an event, and why it ended (nil for a clean end of stream).
func (f *follower) attempt(ctx context.Context) (delivered bool, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()

	hc := *f.opt.HTTPClient
	var idle atomic.Bool
	if d := f.opt.IdleTimeout; d > 0 {
		t := time.AfterFunc(d, func() {
			idle.Store(true)
			cancel()
		})
		defer t.Stop()
		hc.Transport = &touchTransport{base: hc.Transport, touch: func() { t.Reset(d) }}
	}

	c := r3.NewClient(f.url, r3.ClientMaxBufferSize(f.opt.MaxEventSize))
	c.Connection = &hc
	// r3labs retries with a backoff that ignores ctx; one try per attempt,
	// the loop in Follow does the rest.
	c.ReconnectStrategy = backoff.WithContext(&backoff.StopBackOff{}, actx)
	c.ResponseValidator = validateResponse
	for k, vs := range f.opt.Header {
		c.Headers[k] = strings.Join(vs, ", ")
	}
	if f.last > 0 {
		c.Headers["Last-Event-ID"] = strconv.FormatInt(f.last, 10)
	}

	var stop error // set once; later events of this attempt are dropped
	err = c.SubscribeRawWithContext(actx, func(m *r3.Event) {
		if stop != nil {
			return
		}
		e, ok := decodeEvent(m)
		if !ok {
			stop = ErrBadEvent
			cancel()
			return
		}
		if e.Seq <= f.last {
			return
		}
		if herr := f.handle(e); herr != nil {
			stop = handlerError{herr}
			cancel()
			return
		}
		f.last = e.Seq
		delivered = true
	})
	switch {
	case stop != nil:
		return delivered, stop
	case ctx.Err() != nil:
		return delivered, ctx.Err()
	case idle.Load():
		return delivered, ErrIdle
	}
	return delivered, err
}

// decodeEvent turns an r3labs event into an agentd event, or reports that
// it is not a complete one. r3labs hands over whatever it read when a
// connection breaks mid-event; a truncated event has no type or data that
// is not valid JSON.
func decodeEvent(m *r3.Event) (agentd.Event, bool) {
	seq, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil || len(m.Event) == 0 || !json.Valid(m.Data) {
		return agentd.Event{}, false
	}
	e := agentd.Event{Seq: seq, Type: string(m.Event), Data: json.RawMessage(m.Data)}
	var head struct {
		ConversationID string `json:"conversation_id"`
	}
	if json.Unmarshal(m.Data, &head) == nil {
		e.ConversationID = head.ConversationID
	}
	return e, true
}

// validateResponse accepts only 200 text/event-stream. r3labs does not
// close the body of a response its validator rejects, so it is closed here.
func validateResponse(_ *r3.Client, resp *http.Response) error {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if resp.StatusCode == http.StatusOK && mt == "text/event-stream" {
		return nil
	}
	defer resp.Body.Close()
	se := &StatusError{StatusCode: resp.StatusCode, ContentType: ct}
	if resp.StatusCode != http.StatusOK {
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&body) == nil {
			se.Code, se.Message = body.Error.Code, body.Error.Message
		}
	}
	return se
}

// touchTransport calls touch whenever response bytes arrive, so an idle
// timer sees heartbeats that r3labs does not pass on.
type touchTransport struct {
	base  http.RoundTripper
	touch func()
}

func (t *touchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	t.touch()
	resp.Body = &touchBody{ReadCloser: resp.Body, touch: t.touch}
	return resp, nil
}

type touchBody struct {
	io.ReadCloser
	touch func()
}

func (b *touchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.touch()
	}
	return n, err
}
