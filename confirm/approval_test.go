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

// TestGrantAnswers: a grant answers a call only while the call's rule as
// configured now allows remembering with a quorum of 1, and only where its
// creator could decide the call itself: it reaches the conversation and
// the rule (agentd.MayDecideCall) covers it and, with
// requester_may_approve false, it did not start the run.
func TestGrantAnswers(t *testing.T) {
	conv := &agentd.Conversation{ID: "conv_a", TenantID: "t1", ProjectID: "p1", CreatedBy: "owner"}
	key := func(id, role string, groups ...string) agentd.Principal {
		return agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: id, Role: role, Groups: groups}
	}
	remembering := func(approvers []string, requesterMay bool) agentd.ApprovalRule {
		return agentd.ApprovalRule{Approvers: approvers, RequesterMayApprove: requesterMay, Quorum: 1, AllowRemember: true}
	}
	def := remembering([]string{"owner", "operator", "admin"}, true)
	ops := remembering([]string{"operator"}, true)
	fin := remembering([]string{"group:finance"}, true)
	noReq := remembering([]string{"owner", "operator"}, false)
	noRemember := def
	noRemember.AllowRemember = false
	quorum2 := def
	quorum2.Quorum = 2
	for _, c := range []struct {
		name      string
		rule      agentd.ApprovalRule
		creator   agentd.Principal
		requester string
		want      bool
	}{
		{"the owner in its conversation", def, key("owner", agentd.RoleClient), "", true},
		{"the rule no longer allows remember", noRemember, key("owner", agentd.RoleClient), "", false},
		{"the rule now needs a quorum of 2", quorum2, key("owner", agentd.RoleClient), "", false},
		{"another client's conversation", def, key("other", agentd.RoleClient), "", false},
		{"an operator anywhere in its project", def, key("op1", agentd.RoleOperator), "", true},
		{"an operator of another project", def, agentd.Principal{TenantID: "t1", ProjectID: "p2", KeyID: "op1", Role: agentd.RoleOperator}, "", false},
		{"the owner where only operators decide", ops, key("owner", agentd.RoleClient), "", false},
		{"an operator outside group:finance", fin, key("op1", agentd.RoleOperator), "", false},
		{"an operator in group:finance", fin, key("op1", agentd.RoleOperator, "finance"), "", true},
		{"the requester where it may not approve", noReq, key("op1", agentd.RoleOperator), "op1", false},
		{"not the requester", noReq, key("op1", agentd.RoleOperator), "owner", true},
		{"the requester where it may approve", def, key("op1", agentd.RoleOperator), "op1", true},
		{"a delegate", def, key("owner", agentd.RoleDelegate), "", false},
	} {
		if got := GrantAnswers(c.rule, c.creator, conv, c.requester); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLiveApprovals: an approval counts towards a quorum only while its
// key exists and could still decide the call; without a key lookup every
// approval counts.
func TestLiveApprovals(t *testing.T) {
	conv := &agentd.Conversation{ID: "conv_a", TenantID: "t1", ProjectID: "p1", CreatedBy: "owner"}
	keys := map[string]agentd.Principal{
		"op1":     {TenantID: "t1", ProjectID: "p1", KeyID: "op1", Role: agentd.RoleOperator},
		"owner":   {TenantID: "t1", ProjectID: "p1", KeyID: "owner", Role: agentd.RoleClient},
		"fin":     {TenantID: "t1", ProjectID: "p1", KeyID: "fin", Role: agentd.RoleOperator, Groups: []string{"finance"}},
		"moved":   {TenantID: "t1", ProjectID: "p2", KeyID: "moved", Role: agentd.RoleOperator, Groups: []string{"finance"}},
		"demoted": {TenantID: "t1", ProjectID: "p1", KeyID: "demoted", Role: agentd.RoleDelegate, Groups: []string{"finance"}},
		"client":  {TenantID: "t1", ProjectID: "p1", KeyID: "client", Role: agentd.RoleClient, Groups: []string{"finance"}},
	}
	lookup := func(id string) (agentd.Principal, bool) { p, ok := keys[id]; return p, ok }
	approvals := func(ids ...string) []agentd.Approval {
		var out []agentd.Approval
		for _, id := range ids {
			out = append(out, agentd.Approval{KeyID: id, Role: agentd.RoleOperator})
		}
		return out
	}
	ids := func(as []agentd.Approval) []string {
		out := []string{}
		for _, a := range as {
			out = append(out, a.KeyID)
		}
		return out
	}
	ops := agentd.ApprovalRule{Approvers: []string{"owner", "group:finance"}, RequesterMayApprove: false, Quorum: 3}
	all := approvals("op1", "removed", "owner", "moved", "demoted", "client", "fin")
	if got := ids(LiveApprovals(ops, all, lookup, conv, "")); !slices.Equal(got, []string{"owner", "fin"}) {
		t.Errorf("live approvals %v, want [owner fin]: removed, moved, demoted, unreaching and uncovered keys do not count", got)
	}
	if got := ids(LiveApprovals(ops, all, lookup, conv, "fin")); !slices.Equal(got, []string{"owner"}) {
		t.Errorf("with fin the requester: %v, want [owner]", got)
	}
	if got := ids(LiveApprovals(ops, all, nil, conv, "")); !slices.Equal(got, ids(all)) {
		t.Errorf("without a key lookup: %v, want every approval", got)
	}
	in := approvals("fin")
	out := LiveApprovals(ops, in, lookup, conv, "")
	out[0].KeyID = "changed"
	if in[0].KeyID != "fin" {
		t.Error("LiveApprovals changed its argument")
	}
}

// TestCheckExtension: the total of a call's extensions may reach
// max_extension exactly, never pass it; max_extension 0 (the default)
// refuses every extension; a huge "by" is refused, never overflowed past
// the limit.
func TestCheckExtension(t *testing.T) {
	rule := agentd.DefaultApprovalRule()
	rule.MaxExtension = "1h"
	const maxDuration = time.Duration(1<<63 - 1)
	for _, c := range []struct {
		name         string
		rule         agentd.ApprovalRule
		extended, by time.Duration
		ok           bool
		total        time.Duration
	}{
		{"well within", rule, 0, 30 * time.Minute, true, 30 * time.Minute},
		{"exactly to the limit at once", rule, 0, time.Hour, true, time.Hour},
		{"exactly to the limit in two", rule, 40 * time.Minute, 20 * time.Minute, true, time.Hour},
		{"one nanosecond past", rule, 40 * time.Minute, 20*time.Minute + 1, false, 0},
		{"past at once", rule, 0, time.Hour + 1, false, 0},
		{"at the limit already", rule, time.Hour, 1, false, 0},
		{"a by that would overflow", rule, 40 * time.Minute, maxDuration, false, 0},
		{"extensions off", agentd.DefaultApprovalRule(), 0, time.Nanosecond, false, 0},
	} {
		total, err := CheckExtension(c.rule, c.extended, c.by)
		switch {
		case c.ok && (err != nil || total != c.total):
			t.Errorf("%s: %s, %v; want %s", c.name, total, err, c.total)
		case !c.ok && agentd.ErrorCode(err) != agentd.EEXTENSIONEXCEEDSMAX:
			t.Errorf("%s: %s, %v; want %s", c.name, total, err, agentd.EEXTENSIONEXCEEDSMAX)
		}
	}
}
