// Command agentd runs the agentd server (`agentd serve`) and clients of its
// API (`agentd chat`, `agentd approvals`, `agentd tail`, `agentd events`,
// `agentd approve`). main only dispatches: the server is package server
// (server.Run, with the embedded demo as the project served when none is
// named: demoapi.go), and every client is built in runIO (run for the commands
// that read no input), which tests call directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentd-dev/agentd/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runIO(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "agentd:", terminalText(err.Error()))
		}
		os.Exit(1)
	}
}

// errUsage is the error of a command whose flags did not parse (the flag
// package has said what is wrong): main prints nothing more.
var errUsage = server.ErrUsage

const usage = `agentd — an agent loop with a human in the loop.

Usage:
  agentd serve   [--project DIR] [--addr HOST:PORT] [--data DIR]   run the server (the web chat is at /)
  agentd chat    [--conversation ID]                               chat in the terminal: messages from stdin, approve? [y/n/e]
  agentd approvals [list | approve CALL_ID | deny CALL_ID] [--reason TEXT]   the pending approvals
  agentd tail    --conversation ID [--last-event-id N]             follow a conversation, for a person
  agentd events  --conversation ID [--last-event-id N]             follow a conversation's stream as JSON lines
  agentd approve CALL_ID [--deny] [--reason TEXT]                  decide a parked tool call
  agentd demo-api [--addr HOST:PORT]                                serve the demo billing API alone (default 127.0.0.1:8091)

Environment: AGENTD_PROJECT, AGENTD_ADDR, AGENTD_DATA, AGENTD_LOG_LEVEL (serve);
AGENTD_URL (default http://127.0.0.1:8787) and AGENTD_API_KEY (clients);
EDITOR or VISUAL (agentd chat's "e").
`

// run is runIO with an empty stdin (every command but chat reads none).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runIO(ctx, args, getenv, strings.NewReader(""), stdout, stderr)
}

// runIO is the whole program: args without the program name.
func runIO(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return server.Run(ctx, server.Options{Getenv: getenv, Stdout: stdout, Stderr: stderr, Default: demoProject})
	}
	switch args[0] {
	case "serve":
		return server.Run(ctx, server.Options{Args: args[1:], Getenv: getenv, Stdout: stdout, Stderr: stderr, Default: demoProject})
	case "events":
		return events(ctx, args[1:], getenv, stdout, stderr)
	case "approve":
		return approve(ctx, args[1:], getenv, stdout, stderr)
	case "chat":
		return chat(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "approvals":
		return approvals(ctx, args[1:], getenv, stdout, stderr)
	case "tail":
		return tail(ctx, args[1:], getenv, stdout, stderr)
	case "demo-api":
		return demoAPI(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// or is a unless it is empty, else b.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
