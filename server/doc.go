// Package server is agentd's server assembled: Run loads a project, opens
// the store (SQLite or PostgreSQL), wires the engine, the tool registry,
// the SSE hub, webhooks, metrics and traces, and serves the HTTP API until
// its context ends. `agentd serve` is Run with the command line's flags;
// a Go program that embeds agentd calls Run too, with tool sources of its
// own (Options.Sources, for example Go functions: package tools/gofunc),
// which join the project's in the one registry (docs/embed.md).
//
// This package is the wiring: it and cmd/agentd are the only packages that
// import a store backend (TestImportRules).
package server
