package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
)

// Defaults of the retry loop.
const (
	// DefaultMaxWait caps one wait between attempts. A Retry-After longer than
	// this ends the retries with the provider's message instead.
	DefaultMaxWait = 60 * time.Second
	baseDelay      = 500 * time.Millisecond
	maxDelay       = 20 * time.Second
)

// Failure is one failed attempt, classified: whether another attempt may
// help, the provider's own message, the HTTP status and headers when a
// response came.
type Failure struct {
	Status    int         // HTTP status; 0 when no response came or the stream broke off
	Message   string      // the provider's words, safe to show to a client
	Header    http.Header // response headers, for Retry-After
	Retryable bool        // 429, 5xx, connection errors, streams cut short
	Cause     error       // the underlying error, for logs and errors.Is
}

// Error is the provider's message with the HTTP status, if any.
func (f *Failure) Error() string {
	if f.Status > 0 {
		return fmt.Sprintf("%s (HTTP %d)", f.Message, f.Status)
	}
	return f.Message
}

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Cause }

// HTTPFailure classifies a response with status >= 400: 429 and 5xx are
// retryable, every other status is not.
func HTTPFailure(status int, header http.Header, message string, cause error) *Failure {
	if message == "" {
		message = http.StatusText(status)
	}
	return &Failure{Status: status, Message: message, Header: header, Cause: cause,
		Retryable: status == http.StatusTooManyRequests || status >= 500}
}

// Retry runs the attempts of one model step.
type Retry struct {
	Provider    string        // names the provider in error messages ("openai")
	MaxAttempts int           // at least 1
	Timeout     time.Duration // bounds one attempt; 0 for none
	MaxWait     time.Duration // caps one wait; 0 for DefaultMaxWait
	// Sleep waits d or until ctx ends; nil sleeps on a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for Retry-After dates; nil is time.Now.
	Now func() time.Time
	// Secrets never appear in a returned error: each is replaced by [redacted].
	Secrets []string
}

// Do calls attempt until it succeeds or fails for good and returns nil or
// the final error. attempt streams text through emit (which forwards to
// onDelta) and reports a failed attempt as a *Failure.
//
// Do promises: a retry happens only for a retryable *Failure, only if the
// attempt emitted no text (text already shown is never shown twice), and
// at most MaxAttempts attempts are made; between attempts it waits the
// provider's Retry-After (retry-after-ms, or Retry-After in seconds or as
// an HTTP date) or else an exponential backoff with jitter, and gives up
// at once when Retry-After asks for more than MaxWait. When ctx ends Do
// returns ctx.Err() unwrapped. Every other final error is an
// *agentd.Error with code EUNAVAILABLE whose message is
// "<provider>: <the provider's message> (HTTP <status>)" and never contains
// a secret; errors attempt returns that are already *agentd.Error (such as
// a size limit) are returned as they are.
func (r Retry) Do(ctx context.Context, onDelta func(string), attempt func(ctx context.Context, emit func(string)) error) error {
	maxAttempts := max(r.MaxAttempts, 1)
	for n := 1; ; n++ {
		emitted := false
		emit := func(s string) {
			if s == "" {
				return
			}
			emitted = true
			if onDelta != nil {
				onDelta(s)
			}
		}
		err := r.once(ctx, emit, attempt)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *agentd.Error
		if errors.As(err, &ae) {
			return r.redactError(ae)
		}
		var f *Failure
		if !errors.As(err, &f) {
			f = &Failure{Message: "unexpected error: " + err.Error(), Cause: err}
		}
		switch {
		case emitted:
			return r.final(f, "; the response broke off after part of it was streamed, so it is not retried")
		case !f.Retryable:
			return r.final(f, "")
		case n >= maxAttempts:
			return r.final(f, fmt.Sprintf("; gave up after %d attempts", n))
		}
		wait, ok := RetryAfter(f.Header, r.now())
		maxWait := r.MaxWait
		if maxWait <= 0 {
			maxWait = DefaultMaxWait
		}
		if ok && wait > maxWait {
			return r.final(f, fmt.Sprintf("; the provider asks to retry after %s, longer than agentd waits (%s)", wait.Round(time.Second), maxWait))
		}
		if !ok {
			wait = Backoff(n)
		}
		if err := r.sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
}

// once runs one attempt under the per-attempt timeout; a timeout of the
// attempt alone is a retryable failure.
func (r Retry) once(ctx context.Context, emit func(string), attempt func(ctx context.Context, emit func(string)) error) error {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if r.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, r.Timeout)
	}
	defer cancel()
	err := attempt(actx, emit)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		return &Failure{Message: fmt.Sprintf("no complete response within %s (the model's timeout)", r.Timeout), Retryable: true, Cause: err}
	}
	return err
}

func (r Retry) final(f *Failure, suffix string) error {
	msg := f.Message
	if f.Status > 0 {
		msg = fmt.Sprintf("%s (HTTP %d%s)", msg, f.Status, suffix)
	} else if suffix != "" {
		msg += " (" + strings.TrimPrefix(suffix, "; ") + ")"
	}
	e := &agentd.Error{Code: agentd.EUNAVAILABLE, Message: r.Provider + ": " + msg}
	if f.Cause != nil {
		e.Detail = f.Cause
	}
	return r.redactError(e)
}

// redactError returns e with every secret replaced in its message and detail.
func (r Retry) redactError(e *agentd.Error) *agentd.Error {
	if !r.hasSecrets() {
		return e
	}
	out := &agentd.Error{Code: e.Code, Message: r.redact(e.Message)}
	if e.Detail != nil {
		out.Detail = redacted{err: e.Detail, redact: r.redact}
	}
	return out
}

func (r Retry) hasSecrets() bool {
	for _, s := range r.Secrets {
		if s != "" {
			return true
		}
	}
	return false
}

func (r Retry) redact(s string) string {
	for _, secret := range r.Secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// redacted is an error whose text has the secrets replaced; errors.Is and
// errors.As still see the original.
type redacted struct {
	err    error
	redact func(string) string
}

func (e redacted) Error() string { return e.redact(e.err.Error()) }
func (e redacted) Unwrap() error { return e.err }

func (r Retry) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r Retry) sleep(ctx context.Context, d time.Duration) error {
	if r.Sleep != nil {
		return r.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx ends and then returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff is the wait before attempt n+1 when the provider gave no
// Retry-After: 500ms doubled per attempt, capped at 20s, of which a random
// half is taken off (jitter), so it lies in [d/2, d].
func Backoff(n int) time.Duration {
	d := maxDelay
	if n < 8 {
		d = min(baseDelay<<(max(n, 1)-1), maxDelay)
	}
	return d/2 + rand.N(d/2+1)
}

// RetryAfter reads how long the provider asks to wait: retry-after-ms
// (milliseconds) first, then Retry-After in seconds or as an HTTP date
// (relative to now; a date in the past is zero). ok is false when neither
// header holds a usable value.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 { // NaN fails
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0 && s <= 1e9) { // NaN fails both
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// NewHTTPClient returns a client of a provider's own: a clone of
// http.DefaultTransport when it is an *http.Transport (else that
// transport), no client timeout, since Retry bounds each attempt, and
// redirects followed only on the same origin — a key in a header Go does
// not strip (x-api-key) must not follow a redirect elsewhere.
func NewHTTPClient() *http.Client {
	c := &http.Client{Transport: http.DefaultTransport, CheckRedirect: sameOriginRedirect}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		c.Transport = t.Clone()
	}
	return c
}

func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("refused a redirect to another origin (%s://%s)", req.URL.Scheme, req.URL.Host)
	}
	return nil
}
