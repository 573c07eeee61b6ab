package confirm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// TestParseApproval: each field's default, each bad value refused with
// the field named; allow_remember only with a quorum of 1.
func TestParseApproval(t *testing.T) {
	r, err := ParseApproval(json.RawMessage(`{"quorum":2}`), "approval")
	if err != nil || !slices.Equal(r.Approvers, []string{"owner", "operator", "admin"}) || !r.RequesterMayApprove || r.Quorum != 2 {
		t.Fatalf("defaults: %+v, %v", r, err)
	}
	r, err = ParseApproval(json.RawMessage(`{"approvers":["group:finance","admin"],"requester_may_approve":false}`), "approval")
	if err != nil || !slices.Equal(r.Approvers, []string{"group:finance", "admin"}) || r.RequesterMayApprove || r.Quorum != 1 {
		t.Fatalf("set: %+v, %v", r, err)
	}
	r, err = ParseApproval(json.RawMessage(`{"allow_remember":true,"grant_max_ttl":"2h"}`), "approval")
	if err != nil || !r.AllowRemember || r.GrantMaxTTLOf() != 2*time.Hour {
		t.Fatalf("remember: %+v, %v", r, err)
	}
	if r, _ := ParseApproval(json.RawMessage(`{}`), "approval"); r.AllowRemember || r.GrantMaxTTLOf() != agentd.DefaultGrantMaxTTL {
		t.Fatalf("remember defaults: %+v", r)
	}
	if r, err := ParseApproval(json.RawMessage(`null`), "approval"); r != nil || err != nil {
		t.Fatalf("null: %+v, %v", r, err)
	}
	for raw, want := range map[string]string{
		`{"approvers":[]}`:                    `"approval": approvers: must name at least one`,
		`{"approvers":["boss"]}`:              `approvers[0]: must be owner, operator, admin or group:<name>, got "boss"`,
		`{"approvers":["group:"]}`:            `approvers[0]: must be owner`,
		`{"approvers":["owner","owner"]}`:     `approvers[1]: "owner" is listed twice`,
		`{"quorum":0}`:                        `quorum: must be 1 or more, got 0`,
		`{"quorum":"2"}`:                      `approval.quorum`,
		`{"quorom":2}`:                        `quorom`,
		`{"allow_remember":true,"quorum":2}`:  `allow_remember: needs a quorum of 1`,
		`{"allow_remember":"yes"}`:            `allow_remember`,
		`{"reminders":["soon"]}`:              `reminders[0]: must be a Go duration such as "10m", got "soon"`,
		`{"reminders":["-1m"]}`:               `reminders[0]: must be positive, got "-1m"`,
		`{"reminders":["0s"]}`:                `reminders[0]: must be positive`,
		`{"reminders":["1m","1m"]}`:           `reminders[1]: "1m" is listed twice`,
		`{"reminders":"1m"}`:                  `reminders`,
		`{"max_extension":"-1h"}`:             `max_extension: must not be negative, got "-1h"`,
		`{"max_extension":"long"}`:            `max_extension: must be a Go duration such as "2h", got "long"`,
		`{"grant_max_ttl":"soon"}`:            `grant_max_ttl: must be a positive Go duration such as "24h", got "soon"`,
		`{"grant_max_ttl":"-1h"}`:             `grant_max_ttl: must be a positive`,
		`{"requester_may_approve":"no"}`:      `requester_may_approve`,
		`{"approvers":"operator","quorum":1}`: `approvers`,
	} {
		_, err := ParseApproval(json.RawMessage(raw), "approval")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

// Reminders and max_extension parse to the rule; a reminder not below
// an endpoint's own approval_timeout is refused with the field named.
func TestParseApprovalReminders(t *testing.T) {
	r, err := ParseApproval(json.RawMessage(`{"reminders":["10m","1m"],"max_extension":"2h"}`), "approval")
	if err != nil || !slices.Equal(r.Reminders, []string{"10m", "1m"}) || r.MaxExtensionOf() != 2*time.Hour ||
		!slices.Equal(r.ReminderOffsets(), []time.Duration{10 * time.Minute, time.Minute}) {
		t.Fatalf("%+v, %v", r, err)
	}
	if r, _ := ParseApproval(json.RawMessage(`{"quorum":1}`), "approval"); r.MaxExtensionOf() != 0 || len(r.Reminders) != 0 {
		t.Fatalf("defaults: %+v", r)
	}
	if err := r.CheckTimeout(10 * time.Minute); err == nil || !strings.Contains(err.Error(), `reminders[0]: "10m" is not below the approval timeout 10m0s`) {
		t.Fatalf("a reminder at the timeout: %v", err)
	}
	if err := r.CheckTimeout(11 * time.Minute); err != nil {
		t.Fatalf("below the timeout: %v", err)
	}
	_, err = ParsePolicy([]byte(`{"endpoints":{"POST /refunds":{"confirm":true,"approval_timeout":"5m","approval":{"reminders":["5m"]}}}}`))
	if err == nil || !strings.Contains(err.Error(), `endpoints.POST /refunds.approval`) || !strings.Contains(err.Error(), "not below the approval timeout") {
		t.Fatalf("an endpoint's reminder at its timeout: %v", err)
	}
}

// A policy.json endpoint's rule is the classification's; a tool's is
// used where the endpoint has none.
func TestEndpointApproval(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"endpoints":{"POST /refunds":{"confirm":true,"approval":{"approvers":["operator"],"quorum":2}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ep := p.Endpoints[0]
	if ep.Approval == nil || ep.Approval.Quorum != 2 {
		t.Fatalf("endpoint rule %+v", ep.Approval)
	}
	if _, err := ParsePolicy([]byte(`{"endpoints":{"POST /refunds":{"confirm":true,"approval":{"quorum":0}}}}`)); err == nil ||
		!strings.Contains(err.Error(), `endpoints.POST /refunds.approval`) {
		t.Fatalf("a bad endpoint rule: %v", err)
	}
	tool := &Tool{Name: "pay", ServerID: "tools", Exposure: ExposureRequiresConfirmation,
		Approval: &agentd.ApprovalRule{Approvers: []string{"admin"}, Quorum: 1}}
	if d := Classify(Call{Name: "pay", Arguments: json.RawMessage(`{}`), Tool: tool}); d.Approval != tool.Approval {
		t.Fatalf("a tool's rule is not the classification's: %+v", d.Approval)
	}
}

// A connection call takes its endpoint's rule (policy.json); another
// endpoint of the same connection has none.
func TestConnectionEndpointApproval(t *testing.T) {
	pol := mustPolicy(t, `{"defaults":{"read":"auto","write":"confirm"},"endpoints":{"POST /refunds":{"confirm":true,"approval":{"approvers":["operator"],"quorum":2}}}}`)
	rt := &Tool{Name: RequestToolName, ServerID: "connections", Kind: KindRequest,
		Connections: map[string]*ConnectionPolicy{"billing": {Name: "billing", Policy: pol}}}
	d := Classify(Call{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(`{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"amount":1},"intent":"write"}`)})
	if d.Tier != agentd.TierConfirm || d.Approval == nil || d.Approval.Quorum != 2 {
		t.Fatalf("POST /refunds: %s, rule %+v", d.Tier, d.Approval)
	}
	d = Classify(Call{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(`{"connection":"billing","method":"POST","endpoint":"/other","data":{},"intent":"write"}`)})
	if d.Tier != agentd.TierConfirm || d.Approval != nil {
		t.Fatalf("POST /other: %s, rule %+v", d.Tier, d.Approval)
	}
}
