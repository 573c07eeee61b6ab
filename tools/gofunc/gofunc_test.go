package gofunc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/tools/gofunc"
	"github.com/agentd-dev/agentd/tools/registry"
	"github.com/agentd-dev/agentd/toolset"
)

type invoiceArgs struct {
	Customer string  `json:"customer" jsonschema:"the customer's id"`
	Amount   float64 `json:"amount"`
	Note     string  `json:"note,omitempty"`
}

type invoice struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

func sendInvoice(_ context.Context, a invoiceArgs) (invoice, error) {
	switch a.Customer {
	case "broken":
		return invoice{}, errors.New("the billing system is down")
	case "panic":
		panic("nil map")
	}
	return invoice{ID: "inv-" + a.Customer, Amount: a.Amount}, nil
}

func source(t *testing.T, tools ...*gofunc.Tool) *gofunc.Source {
	t.Helper()
	s, err := gofunc.NewSource(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func def(t *testing.T, s *gofunc.Source, name string) toolset.Tool {
	t.Helper()
	for _, d := range s.Tools() {
		if d.Spec.Name == name {
			return d
		}
	}
	t.Fatalf("no tool %q in %v", name, s.Tools())
	return toolset.Tool{}
}

func classify(d toolset.Tool, args string) confirm.Classification {
	return confirm.Classify(confirm.Call{Name: d.Spec.Name, Arguments: json.RawMessage(args), Tool: d.Confirm})
}

// The schema is derived from the Args type: json names, required unless
// omitempty, descriptions from the jsonschema tag, no other properties.
func TestSchemaFromArgs(t *testing.T) {
	s := source(t, gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice))
	d := def(t, s, "send_invoice")
	var sch struct {
		Type       string                                        `json:"type"`
		Required   []string                                      `json:"required"`
		Properties map[string]struct{ Type, Description string } `json:"properties"`
		Additional *bool                                         `json:"additionalProperties"`
	}
	if err := json.Unmarshal(d.Spec.Parameters, &sch); err != nil {
		t.Fatal(err)
	}
	if sch.Type != "object" || strings.Join(sch.Required, ",") != "customer,amount" || sch.Additional == nil || *sch.Additional ||
		sch.Properties["amount"].Type != "number" || sch.Properties["customer"].Description != "the customer's id" || len(sch.Properties) != 3 {
		t.Errorf("schema %s", d.Spec.Parameters)
	}
	if d.Confirm.ServerID != gofunc.ServerID || s.ID() != gofunc.ServerID || !d.LLMCallable || d.Idempotent {
		t.Errorf("tool %+v", d)
	}
}

// Arguments that do not fit the schema are refused before any card, with
// the reason the model reads; valid ones are the effective arguments.
func TestSchemaValidation(t *testing.T) {
	d := def(t, source(t, gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice)), "send_invoice")
	for _, tc := range []struct{ args, want string }{
		{`{"customer":"c1"}`, "amount"},
		{`{"customer":"c1","amount":"ten"}`, "amount"},
		{`{"customer":"c1","amount":1,"extra":true}`, "extra"},
		{`[1]`, "must be a JSON object"},
		{`{"customer":`, "not valid JSON"},
	} {
		c := classify(d, tc.args)
		if !c.Refused || !c.Invalid || c.Tier != agentd.TierNever || !strings.Contains(c.Reason, tc.want) {
			t.Errorf("%s: %+v, want a refusal naming %q", tc.args, c, tc.want)
		}
	}
	c := classify(d, `{ "customer": "c1", "amount": 12.5 }`)
	if c.Refused || c.Tier != agentd.TierConfirm || string(c.Arguments) != `{"customer":"c1","amount":12.5}` || c.Digest == "" {
		t.Errorf("valid arguments: %+v", c)
	}
}

// Exposure words are tool.json's, with the tiers confirm gives them; a Go
// tool without one requires confirmation.
func TestTierMapping(t *testing.T) {
	for _, tc := range []struct {
		opts []gofunc.Option
		want agentd.Tier
	}{
		{nil, agentd.TierConfirm},
		{[]gofunc.Option{gofunc.WithExposure(gofunc.RequiresConfirmation)}, agentd.TierConfirm},
		{[]gofunc.Option{gofunc.WithExposure(gofunc.Open)}, agentd.TierAuto},
		{[]gofunc.Option{gofunc.WithExposure(gofunc.OperatorGated)}, agentd.TierAuto},
	} {
		d := def(t, source(t, gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice, tc.opts...)), "send_invoice")
		if c := classify(d, `{"customer":"c1","amount":1}`); c.Tier != tc.want || c.Refused {
			t.Errorf("%s: tier %s, want %s", d.Confirm.Exposure, c.Tier, tc.want)
		}
	}
	d := def(t, source(t, gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice,
		gofunc.WithPrompt("Send money?"), gofunc.Idempotent(), gofunc.Hidden())), "send_invoice")
	if c := classify(d, `{"customer":"c1","amount":1}`); c.Reason != "Send money?" || !d.Idempotent || d.LLMCallable {
		t.Errorf("options: %+v, %+v", c, d)
	}
}

// The function's result is the call's JSON result; its error and its
// panic are the call's failure, which the model reads.
func TestExecute(t *testing.T) {
	s := source(t, gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice))
	ctx := context.Background()
	out, err := s.Execute(ctx, agentd.ToolCall{Name: "send_invoice", Arguments: json.RawMessage(`{"customer":"c1","amount":3}`)})
	if err != nil || string(out) != `{"id":"inv-c1","amount":3}` {
		t.Errorf("result %s, %v", out, err)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"customer":"broken","amount":3}`, "the billing system is down"},
		{`{"customer":"panic","amount":3}`, `tool "send_invoice" panicked: nil map`},
		{`{"customer":"c1","amount":3,"x":1}`, "invalid arguments"},
	} {
		out, err := s.Execute(ctx, agentd.ToolCall{Name: "send_invoice", Arguments: json.RawMessage(tc.args)})
		if err == nil || out != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %s, %v; want an error containing %q", tc.args, out, err, tc.want)
		}
	}
	big := gofunc.MustNew("big", "A large result.", func(context.Context, struct{}) (string, error) {
		return strings.Repeat("x", agentd.MaxToolResultBytes), nil
	})
	if _, err := source(t, big).Execute(ctx, agentd.ToolCall{Name: "big"}); err == nil || !strings.Contains(err.Error(), "result too large") {
		t.Errorf("a result over MaxToolResultBytes: %v", err)
	}
	if _, err := s.Execute(ctx, agentd.ToolCall{Name: "other"}); err == nil {
		t.Error("a tool the source does not have ran")
	}
}

// An explicit schema replaces the derived one.
func TestExplicitSchema(t *testing.T) {
	tool := gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice,
		gofunc.WithSchema(json.RawMessage(`{"type":"object","properties":{"customer":{"type":"string","minLength":3},"amount":{"type":"number","maximum":100}},"required":["customer","amount"]}`)))
	d := def(t, source(t, tool), "send_invoice")
	if c := classify(d, `{"customer":"c1","amount":500}`); !c.Refused || !strings.Contains(c.Reason, "100") {
		t.Errorf("maximum not enforced: %+v", c)
	}
	if c := classify(d, `{"customer":"c12","amount":50}`); c.Refused {
		t.Errorf("valid arguments refused: %+v", c)
	}
}

// A bad definition is an error saying what is wrong.
func TestDefinitionErrors(t *testing.T) {
	fn := func(context.Context, struct{ C chan int }) (string, error) { return "", nil }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(gofunc.New("bad name", "d", sendInvoice)), "the name must be"},
		{second(gofunc.New("x", " ", sendInvoice)), "a description is required"},
		{second(gofunc.New("x", "d", sendInvoice, gofunc.WithExposure("auto"))), `exposure "auto"`},
		{second(gofunc.New("x", "d", fn)), "arguments"},
		{second(gofunc.New("x", "d", sendInvoice, gofunc.WithSchema(json.RawMessage(`{"type":"nope"}`)))), "schema"},
		{second(gofunc.NewSource(gofunc.MustNew("x", "d", sendInvoice), gofunc.MustNew("x", "d", sendInvoice))), "defined twice"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", tc.err, tc.want)
		}
	}
}

// A Go tool whose name another source has is a load error of the one
// registry, as between any two sources.
func TestRegistryNames(t *testing.T) {
	a := source(t, gofunc.MustNew("send_invoice", "Send an invoice.", sendInvoice))
	if _, err := registry.New(a, other{}); err == nil || !strings.Contains(err.Error(), "send_invoice") {
		t.Errorf("registry.New = %v, want a clash naming send_invoice", err)
	}
}

type other struct{}

func (other) ID() string { return "other" }
func (other) Tools() []toolset.Tool {
	return []toolset.Tool{{Spec: agentd.ToolSpec{Name: "send_invoice"}, Confirm: &confirm.Tool{Name: "send_invoice", ServerID: "other"}, LLMCallable: true}}
}
func (other) Execute(context.Context, agentd.ToolCall) (json.RawMessage, error) { return nil, nil }

func second[T any](_ T, err error) error { return err }
