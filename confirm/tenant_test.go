package confirm

import (
	"encoding/json"
	"testing"

	"github.com/agentd-dev/agentd"
)

// A connection with TenantIDs is refused, before anything else, to a call
// of any other tenant — by the request tool and by operation tools; nil
// TenantIDs allow every tenant.
func TestDecideTenantIDs(t *testing.T) {
	limited := &ConnectionPolicy{Name: "billing", Policy: mustPolicy(t, specPolicy), TenantIDs: []string{"t1", "t3"}}
	open := &ConnectionPolicy{Name: "open"}
	rt := &Tool{Name: RequestToolName, Kind: KindRequest,
		Connections: map[string]*ConnectionPolicy{"billing": limited, "open": open}}
	op := &Tool{Name: "billing__payInvoice", Kind: KindOperation,
		Connection: limited, Operation: &Operation{Method: "POST", Template: "/invoices/{id}/pay"}}
	pay := `{"connection":"billing","method":"POST","endpoint":"/invoices/1/pay","data":{"amount":5},"intent":"write"}`
	tests := []struct {
		name, tenant string
		call         Call
		refused      bool
	}{
		{"listed tenant", "t1", Call{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(pay)}, false},
		{"other tenant", "t2", Call{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(pay)}, true},
		{"no tenant", "", Call{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(pay)}, true},
		{"other tenant, durable", "t2", Call{Name: RequestToolName, Tool: rt, Mode: ModeDurable, Arguments: json.RawMessage(pay)}, true},
		{"other tenant, bad header too", "t2", Call{Name: RequestToolName, Tool: rt,
			Arguments: json.RawMessage(`{"connection":"billing","method":"GET","endpoint":"/x","headers":{"Cookie":"a"},"intent":"read"}`)}, true},
		{"other tenant, open connection", "t2", Call{Name: RequestToolName, Tool: rt,
			Arguments: json.RawMessage(`{"connection":"open","method":"GET","endpoint":"/x","intent":"read"}`)}, false},
		{"operation, listed tenant", "t3", Call{Name: op.Name, Tool: op, Arguments: json.RawMessage(`{"path":{"id":"1"},"body":{"amount":5}}`)}, false},
		{"operation, other tenant", "t2", Call{Name: op.Name, Tool: op, Arguments: json.RawMessage(`{"path":{"id":"1"},"body":{"amount":5}}`)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.call.TenantID = tt.tenant
			d := Classify(tt.call)
			if !tt.refused {
				if d.Refused {
					t.Fatalf("refused: %q", d.Reason)
				}
				return
			}
			if !d.Refused || d.Tier != agentd.TierNever || d.Preview || d.AllowedDecisions != nil || d.Target != nil ||
				d.Reason != `The call was not performed: connection "billing" is not available to this tenant.` || d.Connection != "billing" {
				t.Fatalf("decision %+v", d)
			}
			if len(d.Digest) != 64 {
				t.Errorf("digest %q", d.Digest)
			}
		})
	}
	if !limited.AllowsTenant("t3") || limited.AllowsTenant("T1") || !open.AllowsTenant("anyone") {
		t.Error("AllowsTenant")
	}
}
