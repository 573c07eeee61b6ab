package server

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/feed"
	"github.com/agentd-dev/agentd/files"
	"github.com/agentd-dev/agentd/hooks"
	"github.com/agentd-dev/agentd/links"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/mcp"
	"github.com/agentd-dev/agentd/metrics"
	"github.com/agentd-dev/agentd/model/anthropic"
	"github.com/agentd-dev/agentd/model/openai"
	"github.com/agentd-dev/agentd/model/script"
	"github.com/agentd-dev/agentd/project"
	"github.com/agentd-dev/agentd/sse"
	"github.com/agentd-dev/agentd/tools"
	"github.com/agentd-dev/agentd/tools/callcontext"
	"github.com/agentd-dev/agentd/tools/direct"
	"github.com/agentd-dev/agentd/tools/registry"
	"github.com/agentd-dev/agentd/toolset"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// DefaultAddr is where the server listens without --addr or AGENTD_ADDR.
const DefaultAddr = "127.0.0.1:8787"

// ErrUsage is Run's error for flags it cannot parse; the flag package has
// already written what is wrong, and the usage, to Options.Stderr.
var ErrUsage = errors.New("usage")

// Options are what Run serves.
type Options struct {
	// Args are agentd serve's flags (--project, --addr, --data, --database,
	// …), without the command name; each defaults to its environment
	// variable, then to its default, as for agentd serve.
	Args []string
	// Getenv reads the environment (AGENTD_*, OTEL_*, the providers' API
	// keys); nil is os.Getenv.
	Getenv func(string) string
	// Stdout gets the "agentd listening on http://…" line; Stderr the log.
	// Nil is os.Stdout, os.Stderr.
	Stdout, Stderr io.Writer
	// Sources are tool sources registered with the project's own (command
	// tools, connections, file tools, MCP servers) in the one registry, as
	// if the project defined them: a name that two sources define is a load
	// error, and agent.json "tools" chooses among them all.
	Sources []toolset.Source
	// Default is the project served when neither --project nor
	// AGENTD_PROJECT names one (agentd serve's is the embedded demo); nil:
	// Run requires a project.
	Default *DefaultProject
}

// DefaultProject is a project that Run writes to disk and serves when the
// command line names none.
type DefaultProject struct {
	// Name says what it is, in --project's usage ("the embedded demo
	// project").
	Name string
	// Folder is where it is written, under the data folder
	// ("demo-project").
	Folder string
	// Write writes the project's files into dir, a folder that may hold
	// an earlier copy.
	Write func(dir string) error
	// Start, when set, runs once the project is loaded, before the store
	// opens: it starts what the project needs beside the server (the
	// demo's billing API) and returns a line for stdout after the
	// "listening" line ("" for none) and what stops it.
	Start func(proj *project.Project, log zerolog.Logger) (banner string, stop func(), err error)
}

// Run is agentd serve: it loads the project, opens the store, serves the
// HTTP API until ctx ends, then shuts down gracefully. Its errors are the
// reasons it could not start (a load error names the file and field), or
// ErrUsage.
func Run(ctx context.Context, o Options) error {
	getenv, stdout, stderr := o.Getenv, o.Stdout, o.Stderr
	if getenv == nil {
		getenv = os.Getenv
	}
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	cfg, err := parseServeFlags(o.Args, getenv, stderr, o.Default)
	if err != nil {
		return err
	}
	cfg.sources, cfg.fallback = o.Sources, o.Default
	level, err := zerolog.ParseLevel(or(getenv("AGENTD_LOG_LEVEL"), "info"))
	if err != nil {
		return fmt.Errorf("AGENTD_LOG_LEVEL: %w", err)
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Logger()
	var done closers
	defer done.close()

	lp, err := loadServeProject(cfg, getenv, log, &done)
	if err != nil {
		return err
	}
	if lp.tracer, lp.traceContent, err = startTracing(getenv, log, &done); err != nil {
		return err
	}
	keys := lp.proj.Server.APIKeys
	if len(keys) == 0 && !IsLoopback(cfg.addr) {
		return fmt.Errorf("refusing to listen on %s without API keys: configure api_keys in agentd.json or bind a loopback address", cfg.addr)
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	done.add(func() { store.Close() })
	if lp.linkSecret, err = links.Secret(ctx, getenv, store); err != nil {
		return fmt.Errorf("decision links: %w", err)
	}
	// Listening before the engine starts: a command tool that recovery
	// runs gets its context endpoint's URL (docs/runtime.md).
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	done.add(func() { _ = ln.Close() })
	lp.context.SetURL(contextURL(ln.Addr()))
	handler, hub, err := wireServer(ctx, lp, store, cfg.fanout, log, &done)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		log.Warn().Str("addr", ln.Addr().String()).Msg("DEV MODE: no API keys configured; serving tenant default/default to anyone on loopback without authentication")
	}
	log.Info().Str("addr", ln.Addr().String()).Str("project", lp.proj.Dir).Str("data", cfg.dataDir).Str("agent", lp.proj.Agent.Name).Msg("listening")
	fmt.Fprintf(stdout, "agentd listening on http://%s\n", ln.Addr())
	if lp.banner != "" {
		fmt.Fprintln(stdout, lp.banner)
	}
	return serveHTTP(ctx, ln, handler, hub, log)
}

// serveConfig is what agentd serve's flags and environment choose.
type serveConfig struct {
	projectDir, addr, dataDir string
	// databaseURL, when set, names the PostgreSQL database of the store
	// (else it is the SQLite file agentd.db under dataDir).
	databaseURL string
	// fanout: how other replicas' events reach this one (fanout.go).
	fanout fanoutConfig
	// sources are the embedding program's tool sources (Options.Sources).
	sources []toolset.Source
	// fallback is the project served when projectDir is empty
	// (Options.Default).
	fallback *DefaultProject
}

func parseServeFlags(args []string, getenv func(string) string, stderr io.Writer, fallback *DefaultProject) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	projectUsage := "project folder"
	if fallback != nil {
		projectUsage += " (default: " + fallback.Name + ")"
	}
	projectDir := fs.String("project", getenv("AGENTD_PROJECT"), projectUsage)
	addr := fs.String("addr", or(getenv("AGENTD_ADDR"), DefaultAddr), "listen address")
	dataDir := fs.String("data", or(getenv("AGENTD_DATA"), defaultDataDir(getenv)), "data folder (SQLite database)")
	database := fs.String("database", getenv("AGENTD_DATABASE_URL"), "PostgreSQL database URL, postgres://… (default: the SQLite file under --data)")
	notify := fs.String("feed-notify", getenv("AGENTD_FEED_NOTIFY"), "PostgreSQL: LISTEN for other replicas' events (default true)")
	poll := fs.String("feed-poll", getenv("AGENTD_FEED_POLL"), "how often the event feed re-reads the store without a wake-up (default 1s)")
	lease := fs.String("run-lease", getenv("AGENTD_RUN_LEASE"), "PostgreSQL: how long a replica's lease of a run lasts (default 15s)")
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, ErrUsage
	}
	fan, err := parseFanout(*notify, *poll, *lease)
	if err != nil {
		return serveConfig{}, err
	}
	return serveConfig{projectDir: *projectDir, addr: *addr, dataDir: *dataDir, databaseURL: *database, fanout: fan}, nil
}

// closers are what serve releases when it returns, newest first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// servedProject is a loaded project with what its agent needs.
type servedProject struct {
	proj      *project.Project
	model     agentd.Model
	tools     *registry.Toolset
	subagents []*loop.Subagent
	// banner is the default project's line for stdout (DefaultProject.Start).
	banner string
	// mcp are the MCP servers of mcp.json, started (docs/mcp.md).
	mcp []*mcp.Server
	// context is the command tools' per-call context endpoint.
	context *callcontext.Endpoint
	// tracer is nil when traces are off (otel.go); traceContent records
	// message text and tool arguments in spans.
	tracer       trace.TracerProvider
	traceContent bool
	// linkSecret signs decision links (links.Secret; never logged).
	linkSecret []byte
}

// loadServeProject loads the project (writing the default project into
// the data folder when none is given), its workspace, model and tool
// registry, and starts what the default project needs beside the server.
func loadServeProject(cfg serveConfig, getenv func(string) string, log zerolog.Logger, done *closers) (*servedProject, error) {
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	usingDefault := cfg.projectDir == ""
	if usingDefault {
		if cfg.fallback == nil {
			return nil, errors.New("no project: give --project or AGENTD_PROJECT")
		}
		cfg.projectDir = filepath.Join(cfg.dataDir, cfg.fallback.Folder)
		if err := cfg.fallback.Write(cfg.projectDir); err != nil {
			return nil, fmt.Errorf("write %s: %w", cfg.fallback.Name, err)
		}
	}
	proj, err := project.Load(cfg.projectDir, getenv)
	if err != nil {
		return nil, fmt.Errorf("load project: %w", err)
	}
	var workspace *files.Source
	if proj.Agent.Workspace != "" {
		if workspace, err = files.Open(proj.Agent.Workspace, files.Options{}); err != nil {
			return nil, fmt.Errorf("load project: agent.json: %w", err)
		}
		done.add(func() { workspace.Close() })
	}
	lp := &servedProject{proj: proj, context: callcontext.New(log)}
	if lp.model, err = newModel(proj, getenv); err != nil {
		return nil, err
	}
	lp.mcp = startMCP(proj, log, done)
	if lp.tools, lp.subagents, err = toolRegistry(proj, workspace, lp.mcp, cfg.sources, lp.model, getenv, lp.context); err != nil {
		return nil, fmt.Errorf("load project: %w", err)
	}
	if usingDefault && cfg.fallback.Start != nil {
		banner, stop, err := cfg.fallback.Start(proj, log)
		if err != nil {
			return nil, err
		}
		done.add(stop)
		lp.banner = banner
	}
	for _, w := range proj.Warnings {
		log.Warn().Str("project", proj.Dir).Msg(w)
	}
	return lp, nil
}

// wireServer wires the parts over the store: the event feed, the SSE hub,
// the one metrics registry, the webhook outbox, the engine (started: it
// recovers what must run now) and the API, and returns the API's handler
// and the hub (its streams end at shutdown).
func wireServer(ctx context.Context, lp *servedProject, store agentd.Store, fan fanoutConfig, log zerolog.Logger, done *closers) (http.Handler, *sse.Hub, error) {
	proj := lp.proj
	// The loop's commits go to the SSE hub, the streams' live path, and wake
	// the event feed, which the webhook outbox follows; on PostgreSQL the
	// hub follows the feed too, for other replicas' events (startFanout;
	// docs/architecture.md, "The event feed").
	feed := feed.New(store, feed.Options{Poll: fan.poll})
	done.add(feed.Close)
	hub := sse.NewHub()
	stopFanout, err := startFanout(ctx, store, feed, hub, fan, log)
	if err != nil {
		return nil, nil, err
	}
	done.add(stopFanout)
	// One registry for every package's collectors (docs/metrics.md).
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	keys := keyLookup(proj.Server.APIKeys)
	dl, linkEngine, err := newLinks(lp, store, keys, log)
	if err != nil {
		return nil, nil, err
	}
	outbox, err := startWebhooks(ctx, proj, store, feed, log, reg, lp.tracer != nil, webhookLinks{dl, proj.Server.PublicURL})
	if err != nil {
		return nil, nil, err
	}
	done.add(outbox.Close)
	agent := &loop.Agent{
		Name: proj.Agent.Name, System: proj.Agent.SystemPrompt, Model: lp.model, Tools: lp.tools,
		ApprovalTimeout: proj.Agent.ApprovalTimeout, MaxTurns: proj.Agent.MaxTurns, Subagents: lp.subagents,
		Approval: proj.Agent.Approval, Inputs: proj.Agent.Inputs,
	}
	if len(proj.Hooks) > 0 {
		agent.Hooks = hooks.New(proj.Hooks, log)
	}
	var durable *connections.Durable
	if len(proj.Connections) > 0 {
		durable = connections.NewDurable(proj.Connections, connections.WithAudit(store, log))
	}
	wireContext(lp.context, lp, durable, store) // before the engine starts: recovery may run tools
	engine := loop.New(store, publishers{hub, feed}, agent, loop.Options{Logger: log, Observer: metrics.NewLoop(reg, store.ParkedCount),
		Tracer: lp.tracer, TraceContent: lp.traceContent, Lease: runLease(store, fan), Keys: keys})
	linkEngine.set(engine)
	if err := engine.Start(ctx); err != nil {
		return nil, nil, err
	}
	done.add(engine.Close)
	runner := direct.New(lp.tools.Registry(), store, log)
	if sched := startSchedule(ctx, proj, store, runner, publishers{hub, feed}.Publish, log); sched != nil {
		done.add(sched.Close)
	}

	cfg := api.Config{Keys: proj.Server.APIKeys, MaxBodyBytes: proj.Server.MaxBodyBytes, MaxStreamsPerKey: proj.Server.MaxStreamsPerKey,
		Logger: log, CORSOrigins: proj.Server.CORSOrigins,
		Registerer: reg, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLogger{log}})}
	if len(proj.Server.Webhooks) > 0 {
		cfg.Webhooks = outbox
	}
	if len(lp.mcp) > 0 {
		cfg.MCPServers = mcpStatus(lp.mcp)
	}
	if durable != nil {
		cfg.Connections = durable
	}
	cfg.Context = lp.context
	cfg.Tools = toolRunner{runner}
	cfg.Links, cfg.PublicURL = dl, proj.Server.PublicURL
	return api.New(engine, hub, store, cfg).Handler(), hub, nil
}

// serveHTTP serves h on ln until ctx ends, then shuts down gracefully,
// ending the hub's streams first (or Shutdown would wait for them).
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, hub *sse.Hub, log zerolog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second, // SSE streams clear their read deadline
		WriteTimeout:      60 * time.Second, // SSE streams set a deadline per write
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	srv.RegisterOnShutdown(hub.Close)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// promLogger logs the errors of a /metrics scrape (a collector that
// failed, such as the store's count of parked calls).
type promLogger struct{ log zerolog.Logger }

// Println implements promhttp.Logger.
func (l promLogger) Println(v ...any) { l.log.Error().Msg(fmt.Sprint(v...)) }

// startWebhooks starts the webhook outbox's dispatcher and delivery workers
// for the project's endpoints (none: it does nothing). It must run before
// the loop starts, so that the dispatcher's first cursor precedes every
// event the loop commits. reg, when set, gets its metrics; traces puts the
// runs' trace context in the payloads.
func startWebhooks(ctx context.Context, proj *project.Project, store agentd.Store, feed agentd.Feed,
	log zerolog.Logger, reg prometheus.Registerer, traces bool, links webhook.Links) (*webhook.Service, error) {
	svc, err := webhook.New(store, feed, proj.Server.Webhooks, webhook.Options{Logger: log, Registerer: reg, Traces: traces, Links: links})
	if err != nil {
		return nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return nil, fmt.Errorf("start webhooks: %w", err)
	}
	for _, e := range proj.Server.Webhooks {
		log.Info().Str("endpoint", e.ID).Strs("events", e.Events).Msg("webhook endpoint")
	}
	return svc, nil
}

var _ api.Webhooks = (*webhook.Service)(nil)

// publishers hands each committed event to each of its publishers, in
// order. Like every loop.Publisher, none of them blocks.
type publishers []loop.Publisher

// Publish implements loop.Publisher.
func (ps publishers) Publish(e agentd.Event) {
	for _, p := range ps {
		p.Publish(e)
	}
}

// newModel builds the agent's model from agent.json's "model" object; the
// hosted providers read their API key through getenv. Errors of the hosted
// providers name agent.json and the field.
func newModel(p *project.Project, getenv func(string) string) (agentd.Model, error) {
	return modelFrom(p.Agent.Provider, p.Agent.Model, p.Dir, getenv)
}

// modelFrom builds a model from a "model" object of agent.json whose
// provider is given.
func modelFrom(provider string, raw json.RawMessage, dir string, getenv func(string) string) (agentd.Model, error) {
	switch provider {
	case "script":
		return script.New(raw, dir)
	case openai.Provider:
		m, err := openai.New(raw, getenv)
		if err != nil {
			return nil, fmt.Errorf("agent.json: %w", err)
		}
		return m, nil
	case anthropic.Provider:
		m, err := anthropic.New(raw, getenv)
		if err != nil {
			return nil, fmt.Errorf("agent.json: %w", err)
		}
		return m, nil
	default:
		return nil, fmt.Errorf("agent.json: field \"model.provider\": provider %q is not available in this build (use \"script\", \"openai\" or \"anthropic\")", provider)
	}
}

// IsLoopback reports whether addr (host:port) is a loopback address or
// localhost, where the server may run without API keys.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultDataDir is $XDG_STATE_HOME/agentd, ~/.local/state/agentd, or ./.agentd.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agentd")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "agentd")
	}
	return ".agentd"
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// toolRegistry builds the project's one tool registry from its tool
// sources — the command tools, the request tool, each connection's
// operations, the workspace's file tools (nil: no workspace), the MCP
// servers (started), the embedding program's sources (Options.Sources),
// and the subagents' task tool — and returns the tools the agent's model sees and
// the subagents, each with its model (the parent's by default) and its
// tools (never the task tool: subagents cannot start subagents). Its
// errors are load errors: a name two sources define, an agent.json "tools"
// entry no source has or the model may not see.
func toolRegistry(proj *project.Project, workspace *files.Source, servers []*mcp.Server, extra []toolset.Source, parent agentd.Model, getenv func(string) string,
	ctxEndpoint tools.Context) (*registry.Toolset, []*loop.Subagent, error) {
	sources := append([]toolset.Source{tools.NewSource(proj.Tools, tools.WithContext(ctxEndpoint))}, connections.Sources(proj.Connections)...)
	if workspace != nil {
		sources = append(sources, workspace)
	}
	for _, s := range servers {
		sources = append(sources, s)
	}
	sources = append(sources, extra...)
	inner, err := registry.New(sources...)
	if err != nil {
		return nil, nil, err
	}
	var subs []*loop.Subagent
	for i, sa := range proj.Agent.Subagents {
		set, err := inner.Toolset(sa.Tools)
		if err != nil {
			return nil, nil, fmt.Errorf("agent.json: subagents[%d]: %w", i, err)
		}
		m := parent
		if sa.Model != nil {
			var p struct {
				Provider string `json:"provider"`
			}
			if err := json.Unmarshal(sa.Model, &p); err != nil {
				return nil, nil, fmt.Errorf("agent.json: subagents[%d]: field \"model\": %w", i, err)
			}
			if m, err = modelFrom(p.Provider, sa.Model, proj.Dir, getenv); err != nil {
				return nil, nil, fmt.Errorf("subagents[%d]: %w", i, err)
			}
		}
		subs = append(subs, &loop.Subagent{Name: sa.Name, Description: sa.Description, System: sa.SystemPrompt,
			Model: m, Tools: set, MaxTurns: sa.MaxTurns})
	}
	if len(subs) > 0 {
		sources = append(sources, loop.TaskSource(subs))
	}
	if in := proj.Agent.Inputs; in != nil && in.AskUser {
		sources = append(sources, loop.InputSource()) // SPEC §12.1: opt-in per agent
	}
	reg, err := registry.New(sources...)
	if err != nil {
		return nil, nil, err
	}
	set, err := reg.Toolset(proj.Agent.Tools)
	if err != nil {
		return nil, nil, fmt.Errorf("agent.json: %w", err)
	}
	return set, subs, nil
}

// startMCP starts the project's MCP servers, all at once, and waits until
// each is up with its tools listed or has failed (logged, reported in
// /readyz, tried again in the background): a failed server has no tools
// and the rest of the agent works without it. done stops them.
func startMCP(proj *project.Project, log zerolog.Logger, done *closers) []*mcp.Server {
	servers := mcp.NewServers(proj.MCP, log)
	var wg sync.WaitGroup
	for _, s := range servers {
		done.add(s.Close)
		wg.Go(func() { _ = s.Start(context.Background()) })
	}
	wg.Wait()
	if proj.MCP != nil {
		for name := range proj.MCP.Tiers {
			if !slices.ContainsFunc(servers, func(s *mcp.Server) bool { return slices.Contains(s.Status().Tools, name) }) {
				log.Warn().Str("tool", name).Msg("mcp.json: tiers names a tool its server does not offer now")
			}
		}
	}
	return servers
}

// mcpStatus is the MCP servers' part of /readyz.
func mcpStatus(servers []*mcp.Server) func(tenantID string) any {
	return func(tenantID string) any {
		out := make([]mcp.Status, 0, len(servers))
		for _, s := range servers {
			if s.ForTenant(tenantID) {
				out = append(out, s.Status())
			}
		}
		return out
	}
}
