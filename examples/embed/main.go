// Command embed is a Go program that embeds agentd and gives its agent two
// tools written in Go (docs/embed.md): lookup_weather, which runs at once
// (exposure open), and send_invoice, which waits for a person's approval
// (requires-confirmation) like any tool that does something.
//
//	go run ./examples/embed            # the project in examples/embed/project
//	go run ./examples/embed --addr 127.0.0.1:9000 --data /tmp/embed
//
// Its flags are agentd serve's (server.Options.Args).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/agentd-dev/agentd/server"
	"github.com/agentd-dev/agentd/tools/gofunc"
	"github.com/agentd-dev/agentd/toolset"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, server.ErrUsage) {
			fmt.Fprintln(os.Stderr, "embed:", err)
		}
		os.Exit(1)
	}
}

// run serves the example project (a later --project wins) with the Go
// tools; sent invoices are reported on stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	inv := &invoices{out: stdout}
	weather, err := gofunc.New("lookup_weather", "Today's weather in a city.", lookupWeather,
		gofunc.WithExposure(gofunc.Open), gofunc.Idempotent())
	if err != nil {
		return err
	}
	send, err := gofunc.New("send_invoice", "Send an invoice to a customer by e-mail.", inv.send,
		gofunc.WithExposure(gofunc.RequiresConfirmation), gofunc.WithPrompt("Send this invoice to the customer?"))
	if err != nil {
		return err
	}
	src, err := gofunc.NewSource(weather, send)
	if err != nil {
		return err
	}
	return server.Run(ctx, server.Options{
		Args:   append([]string{"--project", "examples/embed/project"}, args...),
		Stdout: stdout, Stderr: stderr,
		Sources: []toolset.Source{src},
	})
}

type weatherArgs struct {
	City string `json:"city" jsonschema:"the city, for example Lisbon"`
}

type forecast struct {
	City     string `json:"city"`
	Sky      string `json:"sky"`
	HighC    int    `json:"high_c"`
	Advisory string `json:"advisory,omitempty"`
}

// lookupWeather answers from a fixed table: the example runs offline.
func lookupWeather(_ context.Context, a weatherArgs) (forecast, error) {
	switch strings.ToLower(strings.TrimSpace(a.City)) {
	case "lisbon":
		return forecast{City: "Lisbon", Sky: "sunny", HighC: 24}, nil
	case "oslo":
		return forecast{City: "Oslo", Sky: "snow", HighC: -3, Advisory: "icy roads"}, nil
	}
	return forecast{}, fmt.Errorf("no forecast for %q (try Lisbon or Oslo)", a.City)
}

type invoiceArgs struct {
	Customer    string `json:"customer" jsonschema:"the customer's e-mail address"`
	AmountCents int    `json:"amount_cents" jsonschema:"the amount, in cents"`
	Currency    string `json:"currency" jsonschema:"ISO 4217 code, for example EUR"`
	Memo        string `json:"memo,omitempty"`
}

type sentInvoice struct {
	Number   string `json:"number"`
	Customer string `json:"customer"`
	Amount   string `json:"amount"`
}

// invoices "sends" an invoice by writing a line to out, numbered in
// order: what a person approved, done once.
type invoices struct {
	mu  sync.Mutex
	n   int
	out io.Writer
}

func (v *invoices) send(_ context.Context, a invoiceArgs) (sentInvoice, error) {
	if a.AmountCents <= 0 {
		return sentInvoice{}, errors.New("amount_cents must be positive")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n++
	inv := sentInvoice{Number: fmt.Sprintf("INV-%04d", v.n), Customer: a.Customer,
		Amount: fmt.Sprintf("%d.%02d %s", a.AmountCents/100, a.AmountCents%100, a.Currency)}
	fmt.Fprintf(v.out, "invoice %s sent to %s: %s\n", inv.Number, inv.Customer, inv.Amount)
	return inv, nil
}
