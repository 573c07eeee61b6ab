package links

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/rs/zerolog"
)

// SecretEnv names the environment variable of the signing secret; without
// it the server generates one once and keeps it in the database.
const SecretEnv = "AGENTD_LINK_SECRET"

// Secret returns the signing secret: AGENTD_LINK_SECRET when set (at least
// MinSecretBytes; never logged), else the one stored in the database,
// generated and stored by the first server that needed it.
func Secret(ctx context.Context, getenv func(string) string, store agentd.LinkStore) ([]byte, error) {
	if v := getenv(SecretEnv); v != "" {
		if len(v) < MinSecretBytes {
			return nil, fmt.Errorf("%s must be at least %d bytes long, got %d", SecretEnv, MinSecretBytes, len(v))
		}
		return []byte(v), nil
	}
	candidate := make([]byte, 32)
	rand.Read(candidate)
	return store.LinkSecret(ctx, candidate)
}

// Engine is the engine as links use it; loop.Engine implements it.
type Engine interface {
	// MayDecideNow returns the call when p may decide it now (the
	// decision path's rules), else the rule's error.
	MayDecideNow(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error)
	// ToolCall returns one call as p reaches it.
	ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error)
	// Decide is the one decision path (loop.Engine.Decide).
	Decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error)
}

// Service mints decision links and answers their use.
type Service struct {
	signer *Signer
	store  agentd.LinkStore
	engine Engine
	keys   func(keyID string) (agentd.Principal, bool)
	clock  agentd.Clock
	log    zerolog.Logger
}

// New returns a Service signing with secret. keys turns a minting key's
// id into its principal as configured now (false: no such key any more).
func New(secret []byte, store agentd.LinkStore, engine Engine, keys func(string) (agentd.Principal, bool), clock agentd.Clock, log zerolog.Logger) (*Service, error) {
	s, err := NewSigner(secret)
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = agentd.SystemClock{}
	}
	return &Service{signer: s, store: store, engine: engine, keys: keys, clock: clock, log: log}, nil
}

// Mint returns the approve and deny tokens of call id minted by p, valid
// until the earlier of the call's deadline and ttl (a Go duration,
// agentd.DefaultLinkTTL when empty, at most agentd.MaxLinkTTL). The
// DecisionLinks' Approve and Deny are tokens, not URLs. Errors: EINVALID
// (ttl), and MayDecideNow's (the rule's 403 codes, ENOTFOUND, ECONFLICT,
// EEXPIRED).
func (s *Service) Mint(ctx context.Context, p agentd.Principal, id, ttl string) (*agentd.DecisionLinks, error) {
	approve, deny, err := s.mint(ctx, p, id, ttl)
	if err != nil {
		return nil, err
	}
	return &agentd.DecisionLinks{Approve: s.signer.Sign(approve), Deny: s.signer.Sign(deny), ExpiresAt: approve.ExpiresAt()}, nil
}

// MintUnsealed is Mint by the configured key keyID (a webhook endpoint's
// links_key_id), with the default ttl, but its Approve and Deny are
// unsealed tokens (Unsealed): what a webhook delivery stores, where the
// delivery log shows it. Seal makes them links at each attempt. ENOTFOUND
// for an unknown key.
func (s *Service) MintUnsealed(ctx context.Context, keyID, id string) (*agentd.DecisionLinks, error) {
	p, ok := s.keys(keyID)
	if !ok {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "no API key %q", keyID)
	}
	approve, deny, err := s.mint(ctx, p, id, "")
	if err != nil {
		return nil, err
	}
	return &agentd.DecisionLinks{Approve: Unsealed(approve), Deny: Unsealed(deny), ExpiresAt: approve.ExpiresAt()}, nil
}

// Seal is the token of an unsealed one (MintUnsealed's), the same every
// time. ENOTFOUND for anything else.
func (s *Service) Seal(unsealed string) (string, error) { return s.signer.Seal(unsealed) }

// mint checks that p may decide call id now and returns the claims of its
// approve and deny links (Mint's rules and errors).
func (s *Service) mint(ctx context.Context, p agentd.Principal, id, ttl string) (approve, deny Claims, err error) {
	d := agentd.DefaultLinkTTL
	if ttl != "" {
		if d, err = time.ParseDuration(ttl); err != nil || d <= 0 || d > agentd.MaxLinkTTL {
			return approve, deny, agentd.Errorf(agentd.EINVALID, `"ttl" must be a positive Go duration of at most %s, such as "1h", got %q`, agentd.MaxLinkTTL, ttl)
		}
	}
	c, err := s.engine.MayDecideNow(ctx, p, id)
	if err != nil {
		return approve, deny, err
	}
	exp := s.clock.Now().Add(d)
	if c.RequiresApprovalAt != nil && c.RequiresApprovalAt.Before(exp) {
		exp = *c.RequiresApprovalAt
	}
	exp = exp.Truncate(time.Second).UTC()
	claims := func(decision string) Claims {
		n := make([]byte, 16)
		rand.Read(n)
		return Claims{CallID: c.ID, Decision: decision, Digest: c.ArgumentsSHA256, KeyID: p.KeyID, Expires: exp.Unix(), Nonce: hex.EncodeToString(n)}
	}
	s.log.Info().Str("tool_call_id", c.ID).Str("key_id", p.KeyID).Time("expires_at", exp).Msg("decision links minted")
	return claims("approve"), claims("deny"), nil
}

// open checks a token against everything but its single use being
// claimed: the signature (ENOTFOUND), spent or expired (EGONE), the
// minting key still configured (EGONE), the call reachable by it
// (ENOTFOUND), pending (ECONFLICT; expired: EGONE) and with the arguments
// the link was made for (ECONFLICT).
func (s *Service) open(ctx context.Context, token string) (Claims, agentd.Principal, *agentd.LinkView, error) {
	c, err := s.signer.Verify(token)
	if err != nil {
		return Claims{}, agentd.Principal{}, nil, err
	}
	if spent, err := s.store.LinkSpent(ctx, c.Nonce); err != nil {
		return c, agentd.Principal{}, nil, err
	} else if spent {
		return c, agentd.Principal{}, nil, errSpent()
	}
	if !s.clock.Now().Before(c.ExpiresAt()) {
		return c, agentd.Principal{}, nil, agentd.Errorf(agentd.EGONE, "this decision link expired at %s", c.ExpiresAt().Format(time.RFC3339))
	}
	p, ok := s.keys(c.KeyID)
	if !ok {
		return c, p, nil, agentd.Errorf(agentd.EGONE, "the key that made this decision link is no longer configured")
	}
	call, err := s.engine.ToolCall(ctx, p, c.CallID)
	if err != nil {
		return c, p, nil, err
	}
	if err := refusal(call, c); err != nil {
		return c, p, nil, err
	}
	return c, p, &agentd.LinkView{Decision: c.Decision, ExpiresAt: c.ExpiresAt(), Call: call}, nil
}

// refusal is why a link of claims c may not decide call as it is now: its
// deadline passed (EGONE), it was decided (ECONFLICT), its arguments are
// not those the link was made for (ECONFLICT); nil when it may.
func refusal(call *agentd.ToolCall, c Claims) error {
	if call.Status == agentd.StatusExpired {
		return errDeadlinePassed()
	}
	if call.Status != agentd.StatusRequiresConfirmation {
		return agentd.Errorf(agentd.ECONFLICT, "the call was already decided another way (status %s)", call.Status)
	}
	if call.ArgumentsSHA256 != c.Digest {
		return errArgumentsChanged()
	}
	return nil
}

// Open returns what the link's page shows; it decides nothing (a GET of
// the link: mail scanners follow links). Errors as open's.
func (s *Service) Open(ctx context.Context, token string) (*agentd.LinkView, error) {
	_, _, v, err := s.open(ctx, token)
	return v, err
}

// Use decides the link's call once, as the minting key, through the
// engine's decision path with via "link": the link is recorded as spent
// first (a second use, or a concurrent one that lost, is EGONE), then
// decided. Errors: open's, EGONE (spent; the deadline passed meanwhile),
// ECONFLICT (decided meanwhile), and Decide's (the rule's 403 codes when
// the minting key may no longer decide, EINVALID for a long reason).
func (s *Service) Use(ctx context.Context, token, reason string) (*agentd.LinkView, *agentd.Decision, error) {
	c, p, v, err := s.open(ctx, token)
	if err != nil {
		return nil, nil, err
	}
	if ok, err := s.store.SpendLink(ctx, c.Nonce, c.CallID, s.clock.Now()); err != nil {
		return nil, nil, err
	} else if !ok {
		return nil, nil, errSpent()
	}
	dec, err := s.engine.Decide(ctx, p, c.CallID, agentd.DecisionRequest{Decision: c.Decision, Reason: reason,
		ArgumentsSHA256: c.Digest, Via: agentd.ViaLink})
	switch agentd.ErrorCode(err) {
	case "":
	case agentd.EEXPIRED:
		return nil, nil, errDeadlinePassed()
	case agentd.ESTALE:
		return nil, nil, errArgumentsChanged()
	default:
		return nil, nil, err
	}
	s.log.Info().Str("tool_call_id", c.CallID).Str("key_id", c.KeyID).Str("decision", c.Decision).Msg("decision link used")
	return v, dec, nil
}

// The refusals that open and Use both answer.
func errSpent() error { return agentd.Errorf(agentd.EGONE, "this decision link was already used") }

func errDeadlinePassed() error {
	return agentd.Errorf(agentd.EGONE, "the call's approval deadline passed; nothing was done")
}

func errArgumentsChanged() error {
	return agentd.Errorf(agentd.ECONFLICT, "the call's arguments changed since this link was made")
}
