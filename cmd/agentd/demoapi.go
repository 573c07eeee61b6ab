package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/demo"
	"github.com/agentd-dev/agentd/demo/billing"
	"github.com/agentd-dev/agentd/project"
	"github.com/agentd-dev/agentd/server"
	"github.com/rs/zerolog"
)

// demoProject is what agentd serve runs without --project: the embedded
// demo (package demo), written under the data folder, with the demo
// billing API its "billing" connection talks to.
var demoProject = &server.DefaultProject{
	Name:   "the embedded demo project",
	Folder: "demo-project",
	Write:  demo.WriteTo,
	Start:  startDemoAPI,
}

// startDemoAPI serves the demo billing API on a free loopback port and
// points the demo's "billing" connection at it.
func startDemoAPI(proj *project.Project, log zerolog.Logger) (banner string, stop func(), err error) {
	var conn *connections.Connection
	for _, c := range proj.Connections {
		if c.Name == "billing" {
			conn = c
		}
	}
	if conn == nil {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("demo billing API: %w", err)
	}
	srv := &http.Server{Handler: billing.New().Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String() + "/api"
	if err := conn.SetBaseURL(base); err != nil {
		srv.Close()
		return "", nil, err
	}
	log.Info().Str("base_url", base).Msg("demo billing API")
	return "demo billing API on " + base, func() { srv.Close() }, nil
}

// demoAPI serves the demo billing API on its own, for a copy of the demo
// project whose billing connection keeps its base_url
// (http://127.0.0.1:8091/api).
func demoAPI(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo-api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", or(getenv("AGENTD_DEMO_API_ADDR"), "127.0.0.1:8091"), "listen address")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if !server.IsLoopback(*addr) {
		return fmt.Errorf("the demo billing API has no authentication: bind a loopback address, not %s", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: billing.New().Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "demo billing API on http://%s/api\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
