package confirm

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

// The hooks' verdict combines with the tool's tier (SPEC §4.3): deny
// refuses, ask raises to confirm (escalated only when it raised it),
// allow never lowers, and a refused call stays refused.
func TestHookVerdicts(t *testing.T) {
	open := &Tool{Name: "lookup", Exposure: ExposureOpen}
	gated := &Tool{Name: "pay", Exposure: ExposureRequiresConfirmation, Prompt: "Moves money"}
	tests := []struct {
		name      string
		tool      *Tool
		hook      HookVerdict
		tier      agentd.Tier
		refused   bool
		escalated bool
		reason    string // exact
		allowed   []string
	}{
		{"deny with a reason", open, HookVerdict{Verdict: HookDeny, Hook: "guard", Reason: "too risky"},
			agentd.TierNever, true, true, `The call was not performed: hook "guard" denied it: too risky.`, nil},
		{"deny without a reason", gated, HookVerdict{Verdict: HookDeny, Hook: "guard"},
			agentd.TierNever, true, true, `The call was not performed: hook "guard" denied it.`, nil},
		{"ask raises auto", open, HookVerdict{Verdict: HookAsk, Hook: "guard", Reason: "first use"},
			agentd.TierConfirm, false, true, `Hook "guard" asks for confirmation: first use`, []string{"approve", "deny"}},
		{"ask without a reason", open, HookVerdict{Verdict: HookAsk, Hook: "guard"},
			agentd.TierConfirm, false, true, `Hook "guard" asks for confirmation`, []string{"approve", "deny"}},
		{"ask keeps confirm as it is", gated, HookVerdict{Verdict: HookAsk, Hook: "guard", Reason: "first use"},
			agentd.TierConfirm, false, false, "Moves money", []string{"approve", "deny"}},
		{"allow does not lower confirm", gated, HookVerdict{Verdict: HookAllow, Hook: "guard"},
			agentd.TierConfirm, false, false, "Moves money", []string{"approve", "deny"}},
		{"allow keeps auto", open, HookVerdict{Verdict: HookAllow, Hook: "guard"},
			agentd.TierAuto, false, false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.hook
			d := Classify(Call{Name: tt.tool.Name, Tool: tt.tool, Arguments: json.RawMessage(`{"id":1}`), Hook: &h})
			if d.Tier != tt.tier || d.Refused != tt.refused || d.Escalated != tt.escalated || d.Reason != tt.reason ||
				!slices.Equal(d.AllowedDecisions, tt.allowed) {
				t.Fatalf("tier %s refused %v escalated %v reason %q allowed %v; want %s %v %v %q %v",
					d.Tier, d.Refused, d.Escalated, d.Reason, d.AllowedDecisions, tt.tier, tt.refused, tt.escalated, tt.reason, tt.allowed)
			}
		})
	}
}

// A call refused before the hooks stays refused whatever they say; when
// hooks rewrote the arguments into ones the tool refuses, the refusal
// names them.
func TestHookOnARefusedCall(t *testing.T) {
	strict := &Tool{Name: "refund", Validate: func(a json.RawMessage) (json.RawMessage, error) {
		if !strings.Contains(string(a), "amount") {
			return nil, errors.New("missing property 'amount'")
		}
		return a, nil
	}}
	for _, c := range []struct {
		name string
		hook HookVerdict
		why  string // exact
	}{
		{"no rewrite", HookVerdict{Verdict: HookAllow}, "missing property 'amount'"},
		{"ask does not revive it", HookVerdict{Verdict: HookAsk, Hook: "guard"}, "missing property 'amount'"},
		{"one rewriter", HookVerdict{Verdict: HookAllow, Arguments: json.RawMessage(`{"id":2}`), RewrittenBy: []string{"fix"}},
			`hook "fix" rewrote the arguments into ones the tool does not accept: missing property 'amount'`},
		{"two rewriters", HookVerdict{Verdict: HookAllow, Arguments: json.RawMessage(`{"id":2}`), RewrittenBy: []string{"a", "b"}},
			`hook ["a","b"] rewrote the arguments into ones the tool does not accept: missing property 'amount'`},
		{"no rewriter named", HookVerdict{Verdict: HookAllow, Arguments: json.RawMessage(`{"id":2}`)},
			`hook "" rewrote the arguments into ones the tool does not accept: missing property 'amount'`},
	} {
		h := c.hook
		d := Classify(Call{Name: strict.Name, Tool: strict, Arguments: json.RawMessage(`{"id":1}`), Hook: &h})
		if !d.Refused || d.Tier != agentd.TierNever || d.Escalated || d.Why != c.why || d.Reason != "The call was not performed: "+c.why {
			t.Errorf("%s: tier %s refused %v escalated %v why %q reason %q; want why %q", c.name, d.Tier, d.Refused, d.Escalated, d.Why, d.Reason, c.why)
		}
	}
	// A tool the agent does not have: the hook cannot make it run.
	h := HookVerdict{Verdict: HookAllow, Arguments: json.RawMessage(`{"id":2}`), RewrittenBy: []string{"fix"}}
	if d := Classify(Call{Name: "ghost", Arguments: json.RawMessage(`{}`), Hook: &h}); !d.Refused || strings.Contains(d.Why, "rewrote") {
		t.Errorf("unknown tool: refused %v why %q", d.Refused, d.Why)
	}
}
