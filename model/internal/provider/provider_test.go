package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd"
)

func TestProviderRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"retry-after-ms": "1500", "Retry-After": "9"}, 1500 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-3"}, 0, false},
		{nil, 0, false},
	} {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		got, ok := RetryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%v: %v %v, want %v %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestProviderBackoffGrowsWithJitter(t *testing.T) {
	for n, full := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 7: 20 * time.Second, 30: 20 * time.Second} {
		for range 50 {
			if d := Backoff(n); d < full/2 || d > full {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, d, full/2, full)
			}
		}
	}
}

type recorder struct{ waits []time.Duration }

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return ctx.Err()
}

// Retry-After longer than the cap ends the retries at once with the
// provider's message and what it asked for.
func TestProviderDoGivesUpOnLongRetryAfter(t *testing.T) {
	rec := &recorder{}
	r := Retry{Provider: "openai", MaxAttempts: 4, Sleep: rec.sleep}
	calls := 0
	err := r.Do(context.Background(), nil, func(ctx context.Context, emit func(string)) error {
		calls++
		return HTTPFailure(429, http.Header{"Retry-After": {"300"}}, "You exceeded your current quota", nil)
	})
	want := "openai: You exceeded your current quota (HTTP 429; the provider asks to retry after 5m0s, longer than agentd waits (1m0s))"
	if agentd.ErrorMessage(err) != want || calls != 1 || len(rec.waits) != 0 {
		t.Fatalf("err %q after %d calls, waits %v", agentd.ErrorMessage(err), calls, rec.waits)
	}
}

// Without Retry-After the waits back off; the result of the attempt that
// succeeds is what Do returns.
func TestProviderDoBacksOffThenSucceeds(t *testing.T) {
	rec := &recorder{}
	r := Retry{Provider: "p", MaxAttempts: 4, Sleep: rec.sleep}
	calls := 0
	err := r.Do(context.Background(), nil, func(ctx context.Context, emit func(string)) error {
		calls++
		if calls < 3 {
			return HTTPFailure(503, nil, "", nil)
		}
		return nil
	})
	if err != nil || calls != 3 || len(rec.waits) != 2 || rec.waits[0] > 500*time.Millisecond || rec.waits[1] < 500*time.Millisecond {
		t.Fatalf("err %v, %d calls, waits %v", err, calls, rec.waits)
	}
}

// A cancelled context ends Do with ctx.Err() itself, during a wait too.
func TestProviderDoCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Retry{Provider: "p", MaxAttempts: 4}
	err := r.Do(ctx, nil, func(ctx context.Context, emit func(string)) error {
		cancel()
		return HTTPFailure(500, nil, "boom", nil)
	})
	if !errors.Is(err, context.Canceled) || err != context.Canceled {
		t.Fatalf("err %v", err)
	}
}

// A timeout of one attempt is retryable and says which timeout it was;
// an *agentd.Error from the attempt (a limit) is returned unchanged.
func TestProviderDoTimeoutAndLimit(t *testing.T) {
	rec := &recorder{}
	r := Retry{Provider: "p", MaxAttempts: 2, Timeout: 10 * time.Millisecond, Sleep: rec.sleep}
	calls := 0
	err := r.Do(context.Background(), nil, func(ctx context.Context, emit func(string)) error {
		calls++
		<-ctx.Done()
		return ctx.Err()
	})
	if msg := agentd.ErrorMessage(err); msg != "p: no complete response within 10ms (the model's timeout) (gave up after 2 attempts)" || calls != 2 {
		t.Fatalf("err %q after %d calls", msg, calls)
	}
	limit := agentd.Errorf(agentd.EUNAVAILABLE, "p: too large")
	calls = 0
	err = r.Do(context.Background(), nil, func(ctx context.Context, emit func(string)) error {
		calls++
		return limit
	})
	if agentd.ErrorMessage(err) != "p: too large" || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

// Text that reached onDelta is never streamed twice: a failure after it
// is final even when retryable.
func TestProviderDoNoRetryAfterText(t *testing.T) {
	var deltas []string
	r := Retry{Provider: "p", MaxAttempts: 4, Sleep: (&recorder{}).sleep}
	calls := 0
	err := r.Do(context.Background(), func(d string) { deltas = append(deltas, d) }, func(ctx context.Context, emit func(string)) error {
		calls++
		emit("Hello")
		return TransportFailure(errors.New("connection reset by peer"))
	})
	if calls != 1 || len(deltas) != 1 || !strings.Contains(agentd.ErrorMessage(err), "not retried") {
		t.Fatalf("err %v after %d calls, deltas %q", err, calls, deltas)
	}
}

func TestProviderMessageFromBody(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"Rate limit","type":"requests"}}`: "Rate limit",
		`{"error":"model not found"}`:                          "model not found",
		`{"message":"bad gateway"}`:                            "bad gateway",
		`{"detail":"Not Found"}`:                               "Not Found",
		"<html>\n  <h1>502</h1>\n</html>":                      "<html> <h1>502</h1> </html>",
		"":                                                     "",
	} {
		if got := MessageFromBody([]byte(body)); got != want {
			t.Errorf("%q: %q, want %q", body, got, want)
		}
	}
	if got := MessageFromBody([]byte(strings.Repeat("é", 400))); len(got) > maxMessage+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("not clipped: %d bytes", len(got))
	}
}

func TestProviderToolCallID(t *testing.T) {
	agentdID := "call_0194f3a2-7b1c-7d4e-8f00-000000000001"
	if got := ToolCallID(agentdID, 64); got != agentdID {
		t.Errorf("kept id changed: %q", got)
	}
	short := ToolCallID(agentdID, 40)
	if len(short) > 40 || short != ToolCallID(agentdID, 40) || short == ToolCallID("call_0194f3a2-7b1c-7d4e-8f00-000000000002", 40) {
		t.Errorf("mapped id %q", short)
	}
	if got := ToolCallID("call a/b", 64); !safeID.MatchString(got) {
		t.Errorf("unsafe id kept: %q", got)
	}
}

func TestProviderResultTextAndArguments(t *testing.T) {
	if got := ResultText(agentd.ModelMessage{Role: "tool", ToolStatus: agentd.StatusCompleted}); got != "null" {
		t.Errorf("%q", got)
	}
	if got := ResultText(agentd.ModelMessage{Role: "tool", ToolStatus: agentd.StatusDenied, ToolReason: "no"}); got != "The call was denied: no" {
		t.Errorf("%q", got)
	}
	for in, want := range map[string]string{`{"a":1}`: `{"a":1}`, `"x"`: `{}`, `[1]`: `{}`, `null`: `{}`, ``: `{}`, `{bad`: `{}`} {
		if got := string(ArgumentsObject(json.RawMessage(in))); got != want {
			t.Errorf("ArgumentsObject(%q) = %q", in, got)
		}
	}
}

func TestProviderLoadDefaults(t *testing.T) {
	c, err := Load(json.RawMessage(`{"provider":"openai","model":"m","base_url":"http://localhost:11434/v1"}`), func(string) string { return "" },
		Defaults{Provider: "openai", APIKeyEnv: "OPENAI_API_KEY", MaxTemperature: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxAttempts != DefaultMaxAttempts || c.Timeout != DefaultTimeout || c.APIKey != "" || c.APIKeyEnv != "OPENAI_API_KEY" || c.MaxTokens != 0 || c.Temperature != nil {
		t.Fatalf("%+v", c)
	}
}

// TestClipNeverCutsARune: a message longer than the limit is cut on a rune
// boundary, also when the limit falls inside a multi-byte rune.
func TestClipNeverCutsARune(t *testing.T) {
	for _, s := range []string{"a" + strings.Repeat("é", 400), strings.Repeat("😀", 200), "ab" + strings.Repeat("€", 300)} {
		got := Clip(s)
		cut, ok := strings.CutSuffix(got, "…")
		if !ok || len(cut) > maxMessage || len(cut) < maxMessage-3 || !utf8.ValidString(got) || !strings.HasPrefix(s, cut) {
			t.Errorf("Clip(%.12q…) = %d bytes %.12q…", s, len(got), got)
		}
	}
}
