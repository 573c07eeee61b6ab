// Package api is agentd's HTTP API (SPEC §5) on echo v4: authentication,
// body limits, strict JSON decoding, the one error-code → status table, and
// thin handlers that make one call into the loop. Every route is in
// routes.go.
package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/sse"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
)

// Key is a configured API key: only its SHA-256 is known to the server.
type Key struct {
	ID        string
	SHA256    string // lowercase hex SHA-256 of the key
	TenantID  string
	ProjectID string
	Role      string
}

// Config configures the API.
type Config struct {
	// Keys are the accepted API keys. With none, the server is in dev mode:
	// every request is the single tenant default/default (cmd/agentd binds
	// loopback only then).
	Keys []Key
	// MaxBodyBytes bounds request bodies (default 1 MiB); larger get 413.
	MaxBodyBytes int64
	Logger       zerolog.Logger
	// Heartbeat of SSE streams (default 15s).
	Heartbeat time.Duration
	// Connections serves POST /v1/connections/{name}/request; nil when the
	// project has no connections.
	Connections Connections
}

// Connections is the durable/workflow request path (SPEC §2.3).
type Connections interface {
	// Request previews or performs one request-tool call on connection
	// name outside the agent loop, for caller (its tenant and project
	// namespace idempotencyKey downstream and must be allowed to use the
	// connection; a delegate role is a delegated caller). args are the
	// request tool's arguments. It returns the answer to encode and
	// whether it is a preview (nothing was sent). Errors: ENOTFOUND
	// (unknown connection, or one the caller's tenant may not use),
	// EINVALID (bad arguments), EFORBIDDEN (refused by the policy),
	// EUNAVAILABLE (the downstream request failed).
	Request(ctx context.Context, name string, args json.RawMessage, caller agentd.Principal, idempotencyKey string) (out any, preview bool, err error)
}

// Server serves the API.
type Server struct {
	engine *loop.Engine
	hub    *sse.Hub
	store  agentd.Store
	cfg    Config
	keys   map[string]Key // by SHA-256
	echo   *echo.Echo
	log    zerolog.Logger
}

// New returns the API server for one engine.
func New(engine *loop.Engine, hub *sse.Hub, store agentd.Store, cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	s := &Server{engine: engine, hub: hub, store: store, cfg: cfg, keys: map[string]Key{}, log: cfg.Logger}
	for _, k := range cfg.Keys {
		s.keys[strings.ToLower(k.SHA256)] = k
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	s.echo = e
	s.routes()
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// DevMode reports whether no API keys are configured.
func (s *Server) DevMode() bool { return len(s.keys) == 0 }

const principalKey = "agentd.principal"

func principal(c echo.Context) agentd.Principal {
	p, _ := c.Get(principalKey).(agentd.Principal)
	return p
}

// authenticate resolves the caller from "Authorization: Bearer <key>" (or,
// on SSE routes, ?access_token=). In dev mode every caller is default/default.
func (s *Server) authenticate(allowQueryToken bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if s.DevMode() {
				c.Set(principalKey, agentd.Principal{TenantID: "default", ProjectID: "default", Role: agentd.RoleAdmin, KeyID: "dev"})
				return next(c)
			}
			token := ""
			if h := c.Request().Header.Get("Authorization"); h != "" {
				scheme, rest, ok := strings.Cut(h, " ")
				if !ok || !strings.EqualFold(scheme, "Bearer") {
					return s.unauthorized(c, "Authorization must be \"Bearer <api key>\"")
				}
				token = strings.TrimSpace(rest)
			} else if allowQueryToken {
				token = c.QueryParam("access_token")
			}
			if token == "" {
				return s.unauthorized(c, "missing API key")
			}
			if len(token) > 512 {
				return s.unauthorized(c, "invalid API key")
			}
			sum := sha256.Sum256([]byte(token))
			k, ok := s.keys[hex.EncodeToString(sum[:])]
			if !ok {
				return s.unauthorized(c, "invalid API key")
			}
			c.Set(principalKey, agentd.Principal{TenantID: k.TenantID, ProjectID: k.ProjectID, Role: k.Role, KeyID: k.ID})
			return next(c)
		}
	}
}

func (s *Server) unauthorized(c echo.Context, msg string) error {
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="agentd"`)
	return agentd.Errorf(agentd.EUNAUTHORIZED, "%s", msg)
}

// limitBody rejects bodies over MaxBodyBytes with 413, before and while reading.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > s.cfg.MaxBodyBytes {
			return agentd.Errorf(agentd.ETOOLARGE, "request body is larger than %d bytes", s.cfg.MaxBodyBytes)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, s.cfg.MaxBodyBytes)
		return next(c)
	}
}

// logRequests writes one structured line per request. The query string is
// never logged (it may carry access_token).
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		ev := s.log.Info()
		if c.Response().Status >= 500 {
			ev = s.log.Error()
		}
		p := principal(c)
		ev.Str("method", c.Request().Method).Str("path", c.Request().URL.Path).Int("status", c.Response().Status).
			Dur("duration", time.Since(start)).Str("tenant_id", p.TenantID).Str("key_id", p.KeyID).Msg("request")
		return nil
	}
}
