package server

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/links"
	"github.com/agentd-dev/agentd/loop"
	"github.com/rs/zerolog"
)

// lateEngine is the engine as decision links use it, set once it exists:
// the webhook outbox, which mints links, starts before the engine (its
// first cursor must precede the engine's first event).
type lateEngine struct{ e atomic.Pointer[loop.Engine] }

func (l *lateEngine) set(e *loop.Engine) { l.e.Store(e) }

func (l *lateEngine) engine() (*loop.Engine, error) {
	if e := l.e.Load(); e != nil {
		return e, nil
	}
	return nil, agentd.Errorf(agentd.EUNAVAILABLE, "the engine is starting")
}

func (l *lateEngine) MayDecideNow(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	e, err := l.engine()
	if err != nil {
		return nil, err
	}
	return e.MayDecideNow(ctx, p, id)
}

func (l *lateEngine) ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	e, err := l.engine()
	if err != nil {
		return nil, err
	}
	return e.ToolCall(ctx, p, id)
}

func (l *lateEngine) Decide(ctx context.Context, p agentd.Principal, id string, req agentd.DecisionRequest) (*agentd.Decision, error) {
	e, err := l.engine()
	if err != nil {
		return nil, err
	}
	return e.Decide(ctx, p, id, req)
}

// newLinks is the decision links' service (SPEC §11.4) over the store and
// the engine to come. A link's minting key is looked up by id in keys,
// agentd.json api_keys as they are now (keyLookup).
func newLinks(lp *servedProject, store agentd.LinkStore, keys confirm.Keys, log zerolog.Logger) (*links.Service, *lateEngine, error) {
	eng := &lateEngine{}
	svc, err := links.New(lp.linkSecret, store, eng, keys, nil, log)
	return svc, eng, err
}

// keyLookup finds a key's principal by id among keys, agentd.json
// api_keys as they are now; without keys (the development server) the
// one key is agentd.DevKeyID, the API's. The decision links' minting key,
// a quorum's approvals and a grant's creator are looked up with it.
func keyLookup(keys []agentd.APIKey) confirm.Keys {
	byID := map[string]agentd.Principal{}
	for _, k := range keys {
		byID[k.ID] = k.Principal()
	}
	if len(byID) == 0 {
		byID[agentd.DevKeyID] = agentd.DevPrincipal
	}
	return func(id string) (agentd.Principal, bool) { p, ok := byID[id]; return p, ok }
}

// webhookLinks are a webhook's decision links (webhook.Links) minted by
// svc as a configured key, with URLs under agentd.json public_url (project
// requires it for such endpoints).
type webhookLinks struct {
	svc       *links.Service
	publicURL string
}

func (w webhookLinks) Mint(ctx context.Context, keyID string, call *agentd.ToolCall) (*agentd.DecisionLinks, error) {
	l, err := w.svc.MintUnsealed(ctx, keyID, call.ID)
	if err != nil {
		return nil, err
	}
	return &agentd.DecisionLinks{Approve: api.LinkURL(w.publicURL, l.Approve), Deny: api.LinkURL(w.publicURL, l.Deny), ExpiresAt: l.ExpiresAt}, nil
}

// Seal seals the token after the URL's last slash (a token has none).
func (w webhookLinks) Seal(url string) (string, error) {
	i := strings.LastIndexByte(url, '/')
	tok, err := w.svc.Seal(url[i+1:])
	if err != nil {
		return "", err
	}
	return url[:i+1] + tok, nil
}
