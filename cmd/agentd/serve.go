package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/demo"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/model/script"
	"github.com/agentd-dev/agentd/project"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/sse"
	"github.com/rs/zerolog"
)

const defaultAddr = "127.0.0.1:8787"

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	projectDir := fs.String("project", getenv("AGENTD_PROJECT"), "project folder (default: the embedded demo project)")
	addr := fs.String("addr", or(getenv("AGENTD_ADDR"), defaultAddr), "listen address")
	dataDir := fs.String("data", or(getenv("AGENTD_DATA"), defaultDataDir(getenv)), "data folder (SQLite database)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}

	level, err := zerolog.ParseLevel(or(getenv("AGENTD_LOG_LEVEL"), "info"))
	if err != nil {
		return fmt.Errorf("AGENTD_LOG_LEVEL: %w", err)
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Logger()

	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	if *projectDir == "" {
		dir := filepath.Join(*dataDir, "demo-project")
		if err := demo.WriteTo(dir); err != nil {
			return fmt.Errorf("write the embedded demo project: %w", err)
		}
		*projectDir = dir
	}
	proj, err := project.Load(*projectDir)
	if err != nil {
		return fmt.Errorf("load project: %w", err)
	}
	for _, w := range proj.Warnings {
		log.Warn().Str("project", proj.Dir).Msg(w)
	}

	keys := make([]api.Key, 0, len(proj.Server.APIKeys))
	for _, k := range proj.Server.APIKeys {
		keys = append(keys, api.Key{ID: k.ID, SHA256: k.SHA256, TenantID: k.TenantID, ProjectID: k.ProjectID, Role: k.Role})
	}
	if len(keys) == 0 && !isLoopback(*addr) {
		return fmt.Errorf("refusing to listen on %s without API keys: configure api_keys in agentd.json or bind a loopback address", *addr)
	}

	model, err := newModel(proj)
	if err != nil {
		return err
	}
	store, err := sqlite.Open(filepath.Join(*dataDir, "agentd.db"))
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()

	hub := sse.NewHub()
	engine := loop.New(store, hub, &loop.Agent{
		Name: proj.Agent.Name, System: proj.Agent.SystemPrompt, Model: model, Tools: loop.CommandTools(proj.Tools),
		Visible: proj.Agent.Tools, ApprovalTimeout: proj.Agent.ApprovalTimeout, MaxTurns: proj.Agent.MaxTurns,
	}, loop.Options{Logger: log})
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Close()

	srvAPI := api.New(engine, hub, store, api.Config{Keys: keys, MaxBodyBytes: proj.Server.MaxBodyBytes, Logger: log})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           srvAPI.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second, // SSE streams clear their read deadline
		WriteTimeout:      60 * time.Second, // SSE streams set a deadline per write
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	srv.RegisterOnShutdown(hub.Close) // end streams, or Shutdown waits for them
	if len(keys) == 0 {
		log.Warn().Str("addr", ln.Addr().String()).Msg("DEV MODE: no API keys configured; serving tenant default/default to anyone on loopback without authentication")
	}
	log.Info().Str("addr", ln.Addr().String()).Str("project", proj.Dir).Str("data", *dataDir).Str("agent", proj.Agent.Name).Msg("listening")
	fmt.Fprintf(stdout, "agentd listening on http://%s\n", ln.Addr())

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

func newModel(p *project.Project) (agentd.Model, error) {
	switch p.Agent.Provider {
	case "script":
		return script.New(p.Agent.Model, p.Dir)
	default:
		return nil, fmt.Errorf("agent.json: field \"model.provider\": provider %q is not available in this build (use \"script\")", p.Agent.Provider)
	}
}

func isLoopback(addr string) bool {
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
