// Package server is agentd's server assembled: Run loads a project, opens
// the store (SQLite or PostgreSQL), wires the engine, the tool registry,
// the SSE hub, webhooks, metrics and traces, and serves the HTTP API until
// its context ends. `agentd serve` is Run with the command line's flags;
// a Go program that embeds agentd calls Run too, with tool sources of its
// own (Options.Sources, for example Go functions: package tools/gofunc),
// which join the project's in the one registry (docs/embed.md).
//
// This package is the wiring: the one package that imports a store backend
// (cmd/agentd, which calls it, may too: TestImportRules). It serves no
// project of its own: what runs when the command line names none is the
// caller's choice (Options.Default; agentd serve's is the embedded demo).
package server
