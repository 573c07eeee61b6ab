package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

const secondSecret = "whsec_dGhlIG90aGVyIGtleSBvZiB0aGUgcm90YXRpb24="

// signedBy is the Standard Webhooks signature of r under secret, computed
// here from the specification, not with the library the service signs
// with: HMAC-SHA256 keyed by the base64-decoded key after "whsec_", over
// "<webhook-id>.<webhook-timestamp>.<body>".
func signedBy(t *testing.T, secret string, r webhooktest.Request) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", r.ID(), r.Header.Get(webhook.HeaderTimestamp), r.Body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// TestSigningAndGone: in package webhook itself, each request is signed
// with every secret of a rotation as the specification says (the key is
// the decoded whsec_ value, the timestamp is Unix seconds), and a 410
// answer fails its delivery and disables the endpoint durably: nothing
// more is sent to it until an operator enables it, and then its pending
// deliveries resume.
func TestSigningAndGone(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rc := webhooktest.NewReceiver(t)
	rc.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	eps, err := webhook.ParseConfig(json.RawMessage(fmt.Sprintf(`[{"id":"ops","url":%q,"secret_env":"S","tenant_id":"t","retry_schedule":["10ms"]}]`, rc.URL)),
		env(map[string]string{"S": goodSecret + " " + secondSecret}))
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(store, feed.Options{})
	defer f.Close()
	svc, err := webhook.New(store, f, eps, webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	seedStarted(t, store, 1)
	f.Notify()
	first := rc.WaitFor(t, 30*time.Second, "the first delivery", func(r []webhooktest.Request) bool { return len(r) == 1 })[0]
	ts, err := strconv.ParseInt(first.Header.Get(webhook.HeaderTimestamp), 10, 64)
	if err != nil || ts < time.Now().Add(-time.Minute).Unix() || ts > time.Now().Add(time.Minute).Unix() {
		t.Fatalf("webhook-timestamp %q is not the Unix time in seconds", first.Header.Get(webhook.HeaderTimestamp))
	}
	sigs := strings.Fields(first.Header.Get(webhook.HeaderSignature))
	if want := []string{signedBy(t, goodSecret, first), signedBy(t, secondSecret, first)}; !slices.Equal(sigs, want) {
		t.Fatalf("webhook-signature %q, want %q", sigs, want)
	}

	seedStarted(t, store, 1) // answered 410
	f.Notify()
	gone := rc.WaitFor(t, 30*time.Second, "the delivery answered 410", func(r []webhooktest.Request) bool { return len(r) == 2 })[1]
	var states []agentd.WebhookEndpointState
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if states, err = store.WebhookEndpointStates(ctx); err == nil && len(states) == 1 && states[0].DisabledAt != nil {
			break
		}
	}
	if len(states) != 1 || states[0].DisabledAt == nil || !strings.Contains(states[0].DisabledReason, gone.ID()) {
		t.Fatalf("endpoint states after a 410: %+v (%v)", states, err)
	}
	if got := svc.DisabledEndpoints(agentd.Principal{TenantID: "t", ProjectID: "p"}); !slices.Equal(got, []string{"ops"}) {
		t.Fatalf("disabled endpoints %v", got)
	}
	if got := svc.DisabledEndpoints(agentd.Principal{TenantID: "other", ProjectID: "p"}); len(got) != 0 {
		t.Fatalf("another tenant sees the disabled endpoints %v of tenant t", got)
	}
	d, err := store.WebhookDelivery(ctx, gone.ID())
	if err != nil || d.Status != agentd.DeliveryFailed || len(d.Attempts) != 1 || d.Attempts[0].StatusCode != http.StatusGone {
		t.Fatalf("the delivery answered 410: %+v (%v), want failed after its one attempt", d, err)
	}

	seedStarted(t, store, 1) // queued while disabled, not sent
	f.Notify()
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.Requests()); n != 2 {
		t.Fatalf("%d requests while the endpoint is disabled, want 2", n)
	}
	if _, err := svc.EnableEndpoint(ctx, agentd.Principal{TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "op"}, "ops"); err != nil {
		t.Fatal(err)
	}
	rc.WaitFor(t, 30*time.Second, "the delivery queued while disabled", func(r []webhooktest.Request) bool { return len(r) == 3 })
}
