package confirm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Every refusal carries its cause apart from the sentence (Why), so no
// caller strips a prefix off Reason; the sentence contains the cause.
func TestRefusalsCarryWhy(t *testing.T) {
	limited := &ConnectionPolicy{Name: "billing", Policy: mustPolicy(t, specPolicy), TenantIDs: []string{"t1"}}
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"billing": limited}}
	strict := &Tool{Name: "strict", Validate: func(json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("amount is required")
	}}
	req := func(args string) Call {
		return Call{Name: RequestToolName, Tool: rt, TenantID: "t1", Arguments: json.RawMessage(args)}
	}
	for _, tc := range []struct {
		name string
		call Call
		why  string
	}{
		{"unknown tool", Call{Name: "nope"}, `tool "nope" is not available to this agent`},
		{"invalid arguments", Call{Name: "strict", Tool: strict, Arguments: json.RawMessage(`{}`)}, "amount is required"},
		{"other tenant", Call{Name: RequestToolName, Tool: rt, TenantID: "t2", Arguments: json.RawMessage(
			`{"connection":"billing","method":"GET","endpoint":"/invoices/1","intent":"read"}`)}, `connection "billing" is not available to this tenant`},
		{"never endpoint", req(`{"connection":"billing","method":"DELETE","endpoint":"/invoices/1","intent":"write"}`), ""},
		{"threshold", req(`{"connection":"billing","method":"POST","endpoint":"/invoices/1/pay","data":{"amount":50000},"intent":"write"}`), ""},
		{"bad header", req(`{"connection":"billing","method":"GET","endpoint":"/invoices/1","headers":{"Cookie":"a"},"intent":"read"}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Classify(tc.call)
			if !d.Refused || d.Why == "" || !strings.Contains(strings.ToLower(d.Reason), strings.ToLower(d.Why)) || strings.HasPrefix(d.Why, "The call was not performed") {
				t.Fatalf("refused %v, why %q, reason %q", d.Refused, d.Why, d.Reason)
			}
			if tc.why != "" && d.Why != tc.why {
				t.Fatalf("why %q, want %q", d.Why, tc.why)
			}
		})
	}
}
