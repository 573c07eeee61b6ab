package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const goodSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

// TestParseConfigErrors: each bad setting refuses the configuration with
// an error naming the field, and never quotes a secret.
func TestParseConfigErrors(t *testing.T) {
	getenv := env(map[string]string{"OK": goodSecret, "NOPREFIX": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"NOTB64": "whsec_!!!notbase64", "SHORT": "whsec_c2hvcnQ=", "ROT": goodSecret + " whsec_bad"})
	for _, tt := range []struct{ name, json, want string }{
		{"bad url", `[{"id":"a","url":"ftp://x","secret_env":"OK"}]`, `"webhooks[0].url"`},
		{"relative url", `[{"id":"a","url":"/hooks","secret_env":"OK"}]`, `"webhooks[0].url"`},
		{"no url", `[{"id":"a","secret_env":"OK"}]`, `"webhooks[0].url"`},
		{"missing env", `[{"id":"a","url":"https://x/h","secret_env":"UNSET"}]`, `"webhooks[0].secret_env": environment variable UNSET is not set`},
		{"no secret_env", `[{"id":"a","url":"https://x/h"}]`, `"webhooks[0].secret_env"`},
		{"no prefix", `[{"id":"a","url":"https://x/h","secret_env":"NOPREFIX"}]`, `must start with "whsec_"`},
		{"not base64", `[{"id":"a","url":"https://x/h","secret_env":"NOTB64"}]`, `not standard base64`},
		{"short key", `[{"id":"a","url":"https://x/h","secret_env":"SHORT"}]`, `16 to 128 bytes`},
		{"bad rotation secret", `[{"id":"a","url":"https://x/h","secret_env":"ROT"}]`, `secret 2`},
		{"unknown event", `[{"id":"a","url":"https://x/h","secret_env":"OK","events":["llm.tool_call_exploded"]}]`, `"webhooks[0].events[0]": unknown event`},
		{"empty events", `[{"id":"a","url":"https://x/h","secret_env":"OK","events":[]}]`, `"webhooks[0].events"`},
		{"bad schedule", `[{"id":"a","url":"https://x/h","secret_env":"OK","retry_schedule":["5s","soon"]}]`, `"webhooks[0].retry_schedule": entry 1`},
		{"negative schedule", `[{"id":"a","url":"https://x/h","secret_env":"OK","retry_schedule":["-5s"]}]`, `"webhooks[0].retry_schedule"`},
		{"bad timeout", `[{"id":"a","url":"https://x/h","secret_env":"OK","timeout":"0s"}]`, `"webhooks[0].timeout"`},
		{"bad in flight", `[{"id":"a","url":"https://x/h","secret_env":"OK","max_in_flight":0}]`, `"webhooks[0].max_in_flight"`},
		{"duplicate id", `[{"id":"a","url":"https://x/h","secret_env":"OK"},{"id":"a","url":"https://y/h","secret_env":"OK"}]`, `"webhooks[1].id"`},
		{"unknown field", `[{"id":"a","url":"https://x/h","secret_env":"OK","secret":"x"}]`, `"webhooks[0].secret": unknown field`},
		{"project without tenant", `[{"id":"a","url":"https://x/h","secret_env":"OK","project_id":"p"}]`, `"webhooks[0].project_id"`},
	} {
		_, err := webhook.ParseConfig(json.RawMessage(tt.json), getenv)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %s", tt.name, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "MfKQ9r8") || strings.Contains(err.Error(), "whsec_bad")) {
			t.Errorf("%s: the error quotes a secret: %v", tt.name, err)
		}
	}
	eps, err := webhook.ParseConfig(json.RawMessage(`[{"id":"a","url":"https://x/h","secret_env":"ROT2","tenant_id":"t"}]`),
		env(map[string]string{"ROT2": goodSecret + "  " + goodSecret}))
	if err != nil || len(eps) != 1 || eps[0].Timeout != webhook.DefaultTimeout || len(eps[0].RetrySchedule) != 7 ||
		eps[0].MaxInFlight != webhook.DefaultMaxInFlight || eps[0].Events != nil {
		t.Fatalf("defaults: %+v %v", eps, err)
	}
	if s := fmt.Sprintf("%+v %#v", eps[0], eps[0]); strings.Contains(s, "MfKQ9r8") {
		t.Fatalf("printing an endpoint shows its secret: %s", s)
	}
	if !eps[0].Wants(webhook.EventStarted, "t", "any") || eps[0].Wants(webhook.EventStarted, "other", "any") {
		t.Fatal("tenant filter")
	}
}

// TestRetryTiming: jitter stays within ±20% of the schedule, Retry-After
// (seconds or an HTTP date) is a floor, and bad values are ignored.
func TestRetryTiming(t *testing.T) {
	now := time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)
	if got := webhook.RetryAt(now, 10*time.Second, 0, 0); got != now.Add(8*time.Second) {
		t.Fatalf("low jitter: %s", got)
	}
	if got := webhook.RetryAt(now, 10*time.Second, 0, 0.999999); got.Sub(now) >= 12*time.Second || got.Sub(now) < 11*time.Second {
		t.Fatalf("high jitter: %s", got.Sub(now))
	}
	if got := webhook.RetryAt(now, 10*time.Millisecond, time.Second, 0.5); got != now.Add(time.Second) {
		t.Fatalf("Retry-After floor: %s", got.Sub(now))
	}
	for h, want := range map[string]time.Duration{
		"1": time.Second, "120": 2 * time.Minute, "": 0, "-3": 0, "soon": 0, "999999999": 24 * time.Hour,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second, now.Add(-time.Hour).Format(http.TimeFormat): 0,
	} {
		if got := webhook.ParseRetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q = %s, want %s", h, got, want)
		}
	}
}

// TestDeliveryIDs: ids are derived, so re-creating a delivery gives the
// same id; two endpoints get different ids.
func TestDeliveryIDs(t *testing.T) {
	e := agentd.Event{ConversationID: "conv_1", Seq: 4}
	same := agentd.Event{ConversationID: "conv_1", Seq: 4, Position: 99} // read again later: same conversation and seq
	if webhook.EventID(e) != webhook.EventID(same) || webhook.EventID(e) == webhook.EventID(agentd.Event{ConversationID: "conv_1", Seq: 5}) {
		t.Fatal("event ids")
	}
	a, b := webhook.DeliveryID(webhook.EventID(e), "ops"), webhook.DeliveryID(webhook.EventID(e), "audit")
	if a == b || a != webhook.DeliveryID(webhook.EventID(e), "ops") || !strings.HasPrefix(a, "msg_") {
		t.Fatalf("delivery ids %s %s", a, b)
	}
}

// TestDeadEndpointBacklog: events for a dead endpoint stay in the store
// (claimed a few at a time, never all loaded; bench measures memory with
// 10,000); the metrics count the
// attempts and show the queue; a receiver that comes back gets them.
func TestDeadEndpointBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 events")
	}
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := webhooktest.NewReceiver(t)
	eps, err := webhook.ParseConfig(json.RawMessage(fmt.Sprintf(`[{"id":"dead","url":%q,"secret_env":"S","retry_schedule":["10ms"],"max_in_flight":2}]`, rc.URL)),
		env(map[string]string{"S": goodSecret}))
	if err != nil {
		t.Fatal(err)
	}
	rc.Close() // dead: connections are refused
	f := feed.New(store, feed.Options{})
	defer f.Close()
	reg := prometheus.NewRegistry()
	svc, err := webhook.New(store, f, eps, webhook.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	const n = 2000
	calls := seedStarted(t, store, n)
	f.Notify()
	deadline := time.Now().Add(60 * time.Second)
	for {
		depth, _ := store.WebhookQueueDepth(ctx, "", "")
		done, _ := store.WebhookDeliveries(ctx, agentd.WebhookDeliveryFilter{TenantID: "t", ProjectID: "p", Status: agentd.DeliveryFailed, Limit: 1000})
		if depth["dead"]+int64(len(done)) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	depth, _ := store.WebhookQueueDepth(ctx, "", "")
	if depth["dead"] < n-1000 {
		t.Fatalf("queue depth %d, want about %d (calls %d)", depth["dead"], n, len(calls))
	}
	if got := testutil.CollectAndCount(reg, "agentd_webhook_queue_depth"); got != 1 {
		t.Fatalf("queue depth series: %d", got)
	}
	if got := testutil.CollectAndCount(reg, "agentd_webhook_attempts_total"); got < 1 {
		t.Fatalf("no attempts counted")
	}
}

// seedStarted stores n executing calls of tenant t/p, each with its
// tool_call_started event, and returns their ids.
func seedStarted(t testing.TB, store agentd.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a", CreatedAt: now}
	if err := store.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t", ProjectID: "p",
		CorrelationID: "corr", Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "x", CreatedAt: now}
	if _, err := store.StartRun(ctx, run, msg, nil); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for start := 0; start < n; start += 500 {
		var calls []*agentd.ToolCall
		var drafts []agentd.EventDraft
		for i := start; i < min(n, start+500); i++ {
			c := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p", ConversationID: conv.ID,
				RunID: run.ID, CorrelationID: "corr", Step: 0, Index: i, Name: "tool", ServerID: "tools",
				Arguments: json.RawMessage(`{"i":1}`), ArgumentsSHA256: "d", Tier: agentd.TierAuto, Status: agentd.StatusExecuting,
				Method: "TOOL", Endpoint: "tool", CreatedAt: now, UpdatedAt: now}
			d, err := agentd.NewEventDraft(conv.ID, now, &agentd.ToolCallStartedPayload{RunID: run.ID, ToolCallID: c.ID, ToolName: "tool", ServerID: "tools", Arguments: c.Arguments})
			if err != nil {
				t.Fatal(err)
			}
			calls, drafts, ids = append(calls, c), append(drafts, d), append(ids, c.ID)
		}
		if _, err := store.CreateToolCalls(ctx, calls, drafts); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestRestartResumesFromCursor: events committed while the service is down
// (after a first start on an empty log, whose cursor is 0) are delivered
// when it starts again: only the very first start skips the log's history.
func TestRestartResumesFromCursor(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := webhooktest.NewReceiver(t)
	eps, err := webhook.ParseConfig(json.RawMessage(fmt.Sprintf(`[{"id":"ops","url":%q,"secret_env":"S"}]`, rc.URL)),
		env(map[string]string{"S": goodSecret}))
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(store, feed.Options{})
	defer f.Close()
	start := func() *webhook.Service {
		svc, err := webhook.New(store, f, eps, webhook.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	start().Close() // the first start, on an empty log: cursor 0
	seedStarted(t, store, 3)
	svc := start()
	defer svc.Close()
	rc.WaitFor(t, 30*time.Second, "the events committed while down", func(r []webhooktest.Request) bool { return len(r) == 3 })
}
