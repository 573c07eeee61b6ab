package links

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/rs/zerolog"
)

// Decision links' rules (SPEC §11.4) at their seam: a Service over a real
// SQLite store, a behavioural fake of the engine and a clock the test
// moves.

// clock is a clock the test sets.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// engine is a behavioural fake of Engine: calls of tenant t, which the
// keys in deciders may decide while they await confirmation; Decide
// refuses another digest (ESTALE) and a call not pending (ECONFLICT), or
// answers failWith when set.
type engine struct {
	mu       sync.Mutex
	calls    map[string]*agentd.ToolCall
	deciders map[string]bool
	failWith error
	decided  []decided
}

// decided is one Decide the engine accepted.
type decided struct {
	key, id string
	req     agentd.DecisionRequest
}

func (e *engine) reach(p agentd.Principal, id string) (*agentd.ToolCall, error) {
	c, ok := e.calls[id]
	if !ok || c.TenantID != p.TenantID {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool call not found")
	}
	return c, nil
}

func (e *engine) MayDecideNow(_ context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.reach(p, id)
	switch {
	case err != nil:
		return nil, err
	case !e.deciders[p.KeyID]:
		return nil, agentd.Errorf(agentd.EAPPROVERNOTALLOWED, "approvers are ops")
	case c.Status != agentd.StatusRequiresConfirmation:
		return nil, agentd.Errorf(agentd.ECONFLICT, "not pending")
	}
	cp := *c
	return &cp, nil
}

func (e *engine) ToolCall(_ context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.reach(p, id)
	if err != nil {
		return nil, err
	}
	cp := *c
	return &cp, nil
}

func (e *engine) Decide(_ context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.reach(p, id)
	switch {
	case err != nil:
		return nil, err
	case e.failWith != nil:
		return nil, e.failWith
	case c.Status != agentd.StatusRequiresConfirmation:
		return nil, agentd.Errorf(agentd.ECONFLICT, "not pending")
	case req.ArgumentsSHA256 != c.ArgumentsSHA256:
		return nil, agentd.Errorf(agentd.ESTALE, "the arguments changed")
	}
	c.Status = agentd.StatusApproved
	if req.Decision == "deny" {
		c.Status = agentd.StatusDenied
	}
	e.decided = append(e.decided, decided{p.KeyID, id, req})
	return &agentd.Decision{ToolCallID: id, Decision: req.Decision, DecidedBy: p.KeyID, Via: req.Via, ArgumentsSHA256: req.ArgumentsSHA256}, nil
}

// set changes call id under the engine's lock.
func (e *engine) set(id string, f func(*agentd.ToolCall)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e.calls[id])
}

func (e *engine) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.decided = nil
}

func (e *engine) fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failWith = err
}

func (e *engine) decisions() []decided {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]decided(nil), e.decided...)
}

// store is the real SQLite store, whose LinkSpent may be told to answer
// "not used" (a concurrent use that spends between the check and the
// insert) or to fail, and whose SpendLink may fail.
type store struct {
	*sqlite.DB
	mu                 sync.Mutex
	hideSpent          bool
	spentErr, spendErr error
}

func (s *store) LinkSpent(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	hide, err := s.hideSpent, s.spentErr
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	spent, err := s.DB.LinkSpent(ctx, id)
	return spent && !hide, err
}

func (s *store) SpendLink(ctx context.Context, id, callID string, at time.Time) (bool, error) {
	s.mu.Lock()
	err := s.spendErr
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	return s.DB.SpendLink(ctx, id, callID, at)
}

func (s *store) fail(spent, spend error, hide bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spentErr, s.spendErr, s.hideSpent = spent, spend, hide
}

// fixture is a Service with one pending call, "call_1" of tenant t, which
// key "ops" may decide and key "viewer" may not; "gone" is a key the
// Service no longer knows.
type fixture struct {
	svc    *Service
	eng    *engine
	store  *store
	clock  *clock
	keys   map[string]agentd.Principal
	keysMu sync.Mutex
}

var (
	start    = time.Date(2026, 12, 7, 10, 0, 0, 500, time.UTC)
	deadline = start.Add(2 * time.Hour)
	ops      = agentd.Principal{TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "ops"}
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dl := deadline
	f := &fixture{
		eng: &engine{calls: map[string]*agentd.ToolCall{"call_1": {ID: "call_1", TenantID: "t", ProjectID: "p", Name: "pay",
			Arguments: json.RawMessage(`{"amount":5}`), ArgumentsSHA256: "digest-1", Status: agentd.StatusRequiresConfirmation,
			RequiresApprovalAt: &dl}}, deciders: map[string]bool{"ops": true, "gone": true}},
		store: &store{DB: db},
		clock: &clock{now: start},
		keys: map[string]agentd.Principal{"ops": ops,
			"viewer": {TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "viewer"},
			"gone":   {TenantID: "t", ProjectID: "p", Role: agentd.RoleOperator, KeyID: "gone"}},
	}
	f.svc, err = New(testSecret, f.store, f.eng, f.key, f.clock, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) key(id string) (agentd.Principal, bool) {
	f.keysMu.Lock()
	defer f.keysMu.Unlock()
	p, ok := f.keys[id]
	return p, ok
}

func (f *fixture) removeKey(id string) {
	f.keysMu.Lock()
	defer f.keysMu.Unlock()
	delete(f.keys, id)
}

// mint mints call_1's links as key id with ttl.
func (f *fixture) mint(t *testing.T, id, ttl string) *agentd.DecisionLinks {
	t.Helper()
	p, _ := f.key(id)
	l, err := f.svc.Mint(context.Background(), p, "call_1", ttl)
	if err != nil {
		t.Fatalf("mint as %s: %v", id, err)
	}
	return l
}

// refused asserts that the page and the use of token are both refused
// with code and a message containing msg, and that nothing was decided.
func (f *fixture) refused(t *testing.T, what, token, code, msg string) {
	t.Helper()
	ctx := context.Background()
	if v, err := f.svc.Open(ctx, token); agentd.ErrorCode(err) != code || !strings.Contains(agentd.ErrorMessage(err), msg) || v != nil {
		t.Errorf("%s: Open = %v, %v; want %s %q", what, v, err, code, msg)
	}
	if v, d, err := f.svc.Use(ctx, token, ""); agentd.ErrorCode(err) != code || !strings.Contains(agentd.ErrorMessage(err), msg) || v != nil || d != nil {
		t.Errorf("%s: Use = %v, %v, %v; want %s %q", what, v, d, err, code, msg)
	}
	if n := len(f.eng.decisions()); n != 0 {
		t.Errorf("%s: %d decisions, want none", what, n)
	}
}

// TestMintRules: a link binds the call, the decision, the digest and the
// minting key, with a nonce of its own; it expires at the earlier of the
// ttl (default one hour) and the call's deadline, to the second; a bad
// ttl and a key that may not decide mint nothing.
func TestMintRules(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l := f.mint(t, "ops", "")
	a, errA := f.svc.signer.Verify(l.Approve)
	d, errD := f.svc.signer.Verify(l.Deny)
	wantExp := start.Add(agentd.DefaultLinkTTL).Truncate(time.Second)
	if errA != nil || errD != nil || a.CallID != "call_1" || a.Decision != "approve" || d.Decision != "deny" || a.Digest != "digest-1" ||
		a.KeyID != "ops" || d.KeyID != "ops" || a.Nonce == d.Nonce || len(a.Nonce) != 32 || !l.ExpiresAt.Equal(wantExp) ||
		!a.ExpiresAt().Equal(wantExp) || !d.ExpiresAt().Equal(wantExp) || l.ExpiresAt.Location() != time.UTC {
		t.Fatalf("minted %+v: approve %+v %v, deny %+v %v; want expiry %s", l, a, errA, d, errD, wantExp)
	}
	for ttl, want := range map[string]time.Time{
		"30m":  start.Add(30 * time.Minute).Truncate(time.Second),
		"3h":   deadline.Truncate(time.Second), // the deadline comes first
		"2h":   deadline.Truncate(time.Second),
		"168h": deadline.Truncate(time.Second),
	} {
		if got := f.mint(t, "ops", ttl).ExpiresAt; !got.Equal(want) {
			t.Errorf("ttl %s: expires %s, want %s", ttl, got, want)
		}
	}
	f.eng.set("call_1", func(c *agentd.ToolCall) { c.RequiresApprovalAt = nil })
	if got := f.mint(t, "ops", "168h").ExpiresAt; !got.Equal(start.Add(agentd.MaxLinkTTL).Truncate(time.Second)) {
		t.Errorf("no deadline, the longest ttl: expires %s", got)
	}
	for _, ttl := range []string{"soon", "0s", "-1m", "168h0m1s"} {
		if _, err := f.svc.Mint(ctx, ops, "call_1", ttl); agentd.ErrorCode(err) != agentd.EINVALID || !strings.Contains(err.Error(), `"ttl"`) {
			t.Errorf("ttl %q: %v, want EINVALID naming ttl", ttl, err)
		}
	}
	viewer, _ := f.key("viewer")
	if _, err := f.svc.Mint(ctx, viewer, "call_1", ""); agentd.ErrorCode(err) != agentd.EAPPROVERNOTALLOWED {
		t.Errorf("a key that may not decide: %v", err)
	}
	if _, err := f.svc.MintUnsealed(ctx, "viewer", "call_1"); agentd.ErrorCode(err) != agentd.EAPPROVERNOTALLOWED {
		t.Errorf("unsealed, a key that may not decide: %v", err)
	}
	if _, err := f.svc.MintUnsealed(ctx, "nobody", "call_1"); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Errorf("unsealed, an unknown key: %v", err)
	}
}

// TestUnsealedLinks: a webhook's links are stored unsealed and open
// nothing; Seal makes them working links, the same on every call, and
// refuses a sealed token or anything else.
func TestUnsealedLinks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.svc.MintUnsealed(ctx, "ops", "call_1")
	if err != nil || strings.Contains(l.Approve, ".") || strings.Contains(l.Deny, ".") {
		t.Fatalf("MintUnsealed = %+v, %v", l, err)
	}
	f.refused(t, "an unsealed link", l.Approve, agentd.ENOTFOUND, "no such decision link")
	sealed, err := f.svc.Seal(l.Approve)
	if again, err2 := f.svc.Seal(l.Approve); err != nil || err2 != nil || again != sealed || !strings.HasPrefix(sealed, l.Approve+".") {
		t.Fatalf("Seal = %q, %v; again %q, %v", sealed, err, again, err2)
	}
	for _, bad := range []string{sealed, "", "x", l.Approve + "A", Unsealed(Claims{CallID: "call_1", Decision: "edit", Nonce: "n"})} {
		if got, err := f.svc.Seal(bad); agentd.ErrorCode(err) != agentd.ENOTFOUND || got != "" {
			t.Errorf("Seal(%q) = %q, %v; want ENOTFOUND", bad, got, err)
		}
	}
	v, err := f.svc.Open(ctx, sealed)
	if err != nil || v.Decision != "approve" || v.Call.ID != "call_1" || !v.ExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("the sealed link's page: %+v, %v", v, err)
	}
	if _, dec, err := f.svc.Use(ctx, sealed, ""); err != nil || dec.DecidedBy != "ops" {
		t.Fatalf("the sealed link's use: %+v, %v", dec, err)
	}
}

// TestUseDecidesOnce: a link's page decides nothing; its use decides once
// through the engine as the minting key, with the link's decision, its
// digest, the reason and via "link"; used again it is 410 for good.
func TestUseDecidesOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l := f.mint(t, "ops", "")
	v, err := f.svc.Open(ctx, l.Deny)
	if err != nil || v.Decision != "deny" || v.Call.Name != "pay" || !v.ExpiresAt.Equal(l.ExpiresAt) || len(f.eng.decisions()) != 0 {
		t.Fatalf("Open = %+v, %v; decisions %v", v, err, f.eng.decisions())
	}
	v, dec, err := f.svc.Use(ctx, l.Deny, "not now")
	if err != nil || v.Decision != "deny" || dec.Decision != "deny" {
		t.Fatalf("Use = %+v, %+v, %v", v, dec, err)
	}
	want := decided{"ops", "call_1", agentd.DecisionRequest{Decision: "deny", Reason: "not now", ArgumentsSHA256: "digest-1", Via: agentd.ViaLink}}
	if got := f.eng.decisions(); len(got) != 1 || got[0].key != want.key || got[0].id != want.id || got[0].req.Decision != want.req.Decision ||
		got[0].req.Reason != want.req.Reason || got[0].req.ArgumentsSHA256 != want.req.ArgumentsSHA256 || got[0].req.Via != want.req.Via {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
	f.eng.reset()
	f.eng.set("call_1", func(c *agentd.ToolCall) { c.Status = agentd.StatusRequiresConfirmation }) // parked again
	f.refused(t, "a used link", l.Deny, agentd.EGONE, "already used")
}

// TestLinkRefusals: each rule of a link's use refuses both its page and
// its use, and decides nothing.
func TestLinkRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("arguments changed", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "ops", "")
		f.eng.set("call_1", func(c *agentd.ToolCall) {
			c.ArgumentsSHA256, c.Arguments = "digest-2", json.RawMessage(`{"amount":500}`)
		})
		f.refused(t, "arguments changed", l.Approve, agentd.ECONFLICT, "arguments changed")
	})
	t.Run("minting key removed", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "gone", "")
		f.removeKey("gone")
		f.refused(t, "key removed", l.Approve, agentd.EGONE, "no longer configured")
	})
	t.Run("expired", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "ops", "30m")
		f.clock.set(l.ExpiresAt.Add(-time.Nanosecond))
		if _, err := f.svc.Open(ctx, l.Approve); err != nil {
			t.Fatalf("just before its expiry: %v", err)
		}
		f.clock.set(l.ExpiresAt)
		f.refused(t, "at its expiry", l.Approve, agentd.EGONE, "expired at "+l.ExpiresAt.Format(time.RFC3339))
	})
	t.Run("tampered", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "ops", "")
		f.refused(t, "tampered", l.Approve[:len(l.Approve)-1]+"x", agentd.ENOTFOUND, "no such decision link")
	})
	t.Run("call unreachable", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "ops", "")
		f.eng.set("call_1", func(c *agentd.ToolCall) { c.TenantID = "u" })
		f.refused(t, "another tenant's call", l.Approve, agentd.ENOTFOUND, "not found")
	})
	t.Run("decided otherwise", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "ops", "")
		f.eng.set("call_1", func(c *agentd.ToolCall) { c.Status = agentd.StatusApproved })
		f.refused(t, "decided", l.Deny, agentd.ECONFLICT, "status approved")
	})
	t.Run("call expired", func(t *testing.T) {
		f := newFixture(t)
		l := f.mint(t, "ops", "")
		f.eng.set("call_1", func(c *agentd.ToolCall) { c.Status = agentd.StatusExpired })
		f.refused(t, "call expired", l.Deny, agentd.EGONE, "deadline passed")
	})
}

// TestUseRaces: what changes between a link's check and its decision —
// another use spending it, the deadline passing, the arguments changing,
// the key losing its rights, a store failing — refuses the use; a link
// that was spent stays spent.
func TestUseRaces(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		fail      error // the engine's answer
		code, msg string
	}{
		{"deadline passed", agentd.Errorf(agentd.EEXPIRED, "deadline"), agentd.EGONE, "deadline passed"},
		{"arguments changed", agentd.Errorf(agentd.ESTALE, "stale"), agentd.ECONFLICT, "arguments changed"},
		{"key lost its rights", agentd.Errorf(agentd.EAPPROVERNOTALLOWED, "approvers are finance"), agentd.EAPPROVERNOTALLOWED, "finance"},
	} {
		f := newFixture(t)
		l := f.mint(t, "ops", "")
		f.eng.fail(tt.fail)
		if _, _, err := f.svc.Use(ctx, l.Approve, ""); agentd.ErrorCode(err) != tt.code || !strings.Contains(agentd.ErrorMessage(err), tt.msg) {
			t.Errorf("%s: %v, want %s %q", tt.name, err, tt.code, tt.msg)
		}
		f.eng.fail(nil)
		if _, _, err := f.svc.Use(ctx, l.Approve, ""); agentd.ErrorCode(err) != agentd.EGONE {
			t.Errorf("%s, used again: %v, want EGONE (spent)", tt.name, err)
		}
	}

	f := newFixture(t)
	l := f.mint(t, "ops", "")
	if _, _, err := f.svc.Use(ctx, l.Approve, ""); err != nil {
		t.Fatal(err)
	}
	f.eng.set("call_1", func(c *agentd.ToolCall) { c.Status = agentd.StatusRequiresConfirmation })
	f.store.fail(nil, nil, true) // the other use spent it after this one's check
	if _, _, err := f.svc.Use(ctx, l.Approve, ""); agentd.ErrorCode(err) != agentd.EGONE || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a concurrent use that lost: %v", err)
	}
	boom := agentd.Errorf(agentd.EUNAVAILABLE, "the store is down")
	l = f.mint(t, "ops", "")
	f.store.fail(boom, nil, false)
	if _, err := f.svc.Open(ctx, l.Approve); err != boom {
		t.Errorf("LinkSpent failing: %v", err)
	}
	f.store.fail(nil, boom, false)
	if _, _, err := f.svc.Use(ctx, l.Approve, ""); err != boom {
		t.Errorf("SpendLink failing: %v", err)
	}
	if n := len(f.eng.decisions()); n != 1 {
		t.Errorf("%d decisions, want the first use's only", n)
	}
}
