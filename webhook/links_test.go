package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// fakeLinks mints unsealed links whose seal is a fixed suffix: a token is
// whatever carries the suffix.
type fakeLinks struct{}

const sealSuffix = ".MAC-secret"

func (fakeLinks) Mint(_ context.Context, keyID string, call *agentd.ToolCall) (*agentd.DecisionLinks, error) {
	if keyID != "bot" {
		return nil, agentd.Errorf(agentd.EAPPROVERNOTALLOWED, "not an approver")
	}
	u := "https://agentd.example.com/d/" + call.ID + "-"
	return &agentd.DecisionLinks{Approve: u + "approve", Deny: u + "deny", ExpiresAt: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}, nil
}

func (fakeLinks) Seal(url string) (string, error) {
	if !strings.HasPrefix(url, "https://agentd.example.com/d/") || strings.HasSuffix(url, sealSuffix) {
		return "", agentd.Errorf(agentd.ENOTFOUND, "no such decision link")
	}
	return url + sealSuffix, nil
}

// TestDecisionLinkTokensStayOutOfTheAPI (issue 28, finding 1): an
// endpoint with include_decision_links receives working (sealed) links,
// the same bytes on every attempt of its webhook-id; the delivery log and
// a redelivery's answer, which any operator of the tenant reads, hold the
// links unsealed only — never a token.
func TestDecisionLinkTokensStayOutOfTheAPI(t *testing.T) {
	ctx := context.Background()
	svc, rc, callID := startWithLinks(t, fakeLinks{}, true)
	reqs := rc.WaitFor(t, 30*time.Second, "two deliveries", func(r []webhooktest.Request) bool { return len(r) == 2 })

	var first webhooktest.Request
	for _, r := range reqs {
		if err := webhooktest.Verify(goodSecret, r); err != nil {
			t.Fatal(err)
		}
		var p webhook.Payload
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		switch {
		case p.DecisionLinks == nil: // plain
		case p.DecisionLinks.Approve == "https://agentd.example.com/d/"+callID+"-approve"+sealSuffix &&
			p.DecisionLinks.Deny == "https://agentd.example.com/d/"+callID+"-deny"+sealSuffix:
			first = r
		default:
			t.Fatalf("the receiver's links: %+v", p.DecisionLinks)
		}
	}
	if first.Body == nil {
		t.Fatal("no delivery carried the links")
	}

	op := agentd.Principal{TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "op"}
	ds, _, err := svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{EndpointID: "bot"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %v %v", ds, err)
	}
	assertNoToken(t, "the delivery log", ds[0])
	if !bytes.Contains(ds[0].Body, []byte(`"approve":"https://agentd.example.com/d/`+callID+`-approve"`)) {
		t.Fatalf("the delivery log shows no unsealed links: %s", ds[0].Body)
	}
	d, err := svc.Redeliver(ctx, op, first.ID())
	if err != nil {
		t.Fatal(err)
	}
	assertNoToken(t, "a redelivery's answer", *d)
	reqs = rc.WaitFor(t, 30*time.Second, "the redelivery", func(r []webhooktest.Request) bool { return len(r) == 3 })
	if again := reqs[2]; again.ID() != first.ID() || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("the redelivery sent %s %s, want the first attempt's %s %s", again.ID(), again.Body, first.ID(), first.Body)
	}
}

// assertNoToken fails when d, as the API answers it, holds a sealed link.
func assertNoToken(t *testing.T, where string, d agentd.WebhookDelivery) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(sealSuffix)) {
		t.Fatalf("%s holds a decision link's token: %s", where, b)
	}
}

// seedParked stores one call of tenant t/p awaiting confirmation, with its
// confirmation_required event, and returns its id.
func seedParked(t testing.TB, store agentd.Store) string {
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
	deadline := now.Add(time.Hour)
	args := json.RawMessage(`{"amount":3}`)
	c := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p", ConversationID: conv.ID,
		RunID: run.ID, CorrelationID: "corr", Name: "pay", ServerID: "tools", Arguments: args, ArgumentsSHA256: "d",
		Tier: agentd.TierConfirm, Status: agentd.StatusRequiresConfirmation, RequiresApprovalAt: &deadline,
		Method: "TOOL", Endpoint: "pay", CreatedAt: now, UpdatedAt: now}
	d, err := agentd.NewEventDraft(conv.ID, now, &agentd.ConfirmationRequiredPayload{RunID: run.ID, CorrelationID: "corr",
		ToolCallID: c.ID, ToolName: "pay", ServerID: "tools", Endpoint: "pay", Method: "TOOL", Params: args,
		ArgumentsSHA256: "d", RequiresApprovalAt: deadline, AllowedDecisions: []string{"approve", "deny"},
		Card: agentd.Card{Title: "Run pay?", Summary: "pay", Method: "TOOL", Endpoint: "pay", Diff: json.RawMessage(`null`), Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateToolCalls(ctx, []*agentd.ToolCall{c}, []agentd.EventDraft{d}); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// sealedAtMint mints links already sealed, as versions before issue 28
// stored them in the outbox; they do not seal again (sent as stored).
type sealedAtMint struct{ fakeLinks }

func (s sealedAtMint) Mint(ctx context.Context, keyID string, call *agentd.ToolCall) (*agentd.DecisionLinks, error) {
	l, err := s.fakeLinks.Mint(ctx, keyID, call)
	if err != nil {
		return nil, err
	}
	l.Approve += sealSuffix
	l.Deny += sealSuffix
	return l, nil
}

// TestStoredSealedLinksShownUnsealed: a delivery stored with sealed links
// (by an older version) still reaches its receiver with them as stored,
// but the delivery log and a redelivery's answer show them without the
// MAC — no token through the API, whatever the outbox holds.
func TestStoredSealedLinksShownUnsealed(t *testing.T) {
	ctx := context.Background()
	svc, rc, callID := startWithLinks(t, sealedAtMint{}, false)
	reqs := rc.WaitFor(t, 30*time.Second, "the delivery", func(r []webhooktest.Request) bool { return len(r) == 1 })
	if !bytes.Contains(reqs[0].Body, []byte(callID+"-approve"+sealSuffix)) {
		t.Fatalf("the receiver did not get the stored links: %s", reqs[0].Body)
	}
	op := agentd.Principal{TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "op"}
	ds, _, err := svc.Deliveries(ctx, op, agentd.WebhookDeliveryQuery{EndpointID: "bot"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %v %v", ds, err)
	}
	assertNoToken(t, "the delivery log", ds[0])
	if !bytes.Contains(ds[0].Body, []byte(`"deny":"https://agentd.example.com/d/`+callID+`-deny"`)) {
		t.Fatalf("the delivery log shows no unsealed links: %s", ds[0].Body)
	}
	d, err := svc.Redeliver(ctx, op, reqs[0].ID())
	if err != nil {
		t.Fatal(err)
	}
	assertNoToken(t, "a redelivery's answer", *d)
	reqs = rc.WaitFor(t, 30*time.Second, "the redelivery", func(r []webhooktest.Request) bool { return len(r) == 2 })
	if !bytes.Equal(reqs[1].Body, reqs[0].Body) {
		t.Fatalf("the redelivery sent %s, want %s", reqs[1].Body, reqs[0].Body)
	}
}

// startWithLinks starts the webhook service on a new SQLite store with the
// endpoint "bot" (include_decision_links, minted by links) and, with
// plain, the endpoint "plain" (no links), both to one receiver; it parks
// one call and returns its id.
func startWithLinks(t *testing.T, links webhook.Links, plain bool) (*webhook.Service, *webhooktest.Receiver, string) {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rc := webhooktest.NewReceiver(t)
	cfg := fmt.Sprintf(`[{"id":"bot","url":%q,"secret_env":"S","include_decision_links":true,"links_key_id":"bot"}`, rc.URL)
	if plain {
		cfg += fmt.Sprintf(`,{"id":"plain","url":%q,"secret_env":"S"}`, rc.URL)
	}
	eps, err := webhook.ParseConfig(json.RawMessage(cfg+"]"), env(map[string]string{"S": goodSecret}))
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(store, feed.Options{})
	t.Cleanup(f.Close)
	svc, err := webhook.New(store, f, eps, webhook.Options{Links: links})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	callID := seedParked(t, store)
	f.Notify()
	return svc, rc, callID
}
