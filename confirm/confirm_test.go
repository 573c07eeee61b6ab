package confirm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

func TestDecide(t *testing.T) {
	needsAmount := func(a json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(a, &m); err != nil {
			return nil, err
		}
		if _, ok := m["amount"]; !ok {
			return nil, errors.New("missing property 'amount'")
		}
		return a, nil
	}
	open := &Tool{Name: "lookup", ServerID: "tools", Exposure: ExposureOpen}
	gated := &Tool{Name: "rotate", ServerID: "tools", Exposure: ExposureOperatorGated}
	confirmT := &Tool{Name: "refund", ServerID: "tools", Exposure: ExposureRequiresConfirmation, Validate: needsAmount}
	prompted := &Tool{Name: "pay", ServerID: "tools", Exposure: ExposureRequiresConfirmation, Prompt: "Moves money"}

	tests := []struct {
		name      string
		call      Call
		tier      agentd.Tier
		refused   bool
		reason    string // substring
		allowed   []string
		hasDigest bool
	}{
		{"open runs", Call{Name: "lookup", Arguments: json.RawMessage(`{"id":1}`), Tool: open}, agentd.TierAuto, false, "", nil, true},
		{"empty arguments are an empty object", Call{Name: "lookup", Tool: open}, agentd.TierAuto, false, "", nil, true},
		{"operator-gated is a label only", Call{Name: "rotate", Arguments: json.RawMessage(`{}`), Tool: gated}, agentd.TierAuto, false, "", nil, true},
		{"requires-confirmation parks", Call{Name: "refund", Arguments: json.RawMessage(`{"amount":5}`), Tool: confirmT}, agentd.TierConfirm, false, `Tool "refund" requires user confirmation`, []string{"approve", "deny"}, true},
		{"prompt overrides reason", Call{Name: "pay", Arguments: json.RawMessage(`{}`), Tool: prompted}, agentd.TierConfirm, false, "Moves money", []string{"approve", "deny"}, true},
		{"unknown tool refused", Call{Name: "nope", Arguments: json.RawMessage(`{}`)}, agentd.TierNever, true, `Tool "nope" is not available`, nil, true},
		{"schema-invalid refused before any card", Call{Name: "refund", Arguments: json.RawMessage(`{"x":1}`), Tool: confirmT}, agentd.TierNever, true, "missing property 'amount'", nil, false},
		{"non-object refused", Call{Name: "lookup", Arguments: json.RawMessage(`[1,2]`), Tool: open}, agentd.TierNever, true, "must be a JSON object", nil, false},
		{"garbage arguments refused", Call{Name: "lookup", Arguments: json.RawMessage(`{not json`), Tool: open}, agentd.TierNever, true, "The call was not performed: invalid arguments", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(tt.call)
			if d.Tier != tt.tier || d.Refused != tt.refused {
				t.Fatalf("tier=%s refused=%v, want %s %v (reason %q)", d.Tier, d.Refused, tt.tier, tt.refused, d.Reason)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, tt.reason)
			}
			if strings.Join(d.AllowedDecisions, ",") != strings.Join(tt.allowed, ",") {
				t.Errorf("allowed %v, want %v", d.AllowedDecisions, tt.allowed)
			}
			if d.Method != MethodTool || d.Endpoint != tt.call.Name {
				t.Errorf("method/endpoint %s %s", d.Method, d.Endpoint)
			}
			if tt.hasDigest && len(d.Digest) != 64 {
				t.Errorf("digest %q", d.Digest)
			}
			if tt.tier == agentd.TierConfirm && d.Escalated {
				t.Errorf("a tool's own confirm tier is not an escalation")
			}
		})
	}
}

func TestDigestIsCanonical(t *testing.T) {
	a, err := Digest(json.RawMessage(`{"b": 1.0, "a": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest(json.RawMessage(`{"a":"x","b":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("key order and number form changed the digest: %s vs %s", a, b)
	}
	sum := sha256.Sum256([]byte(`{"a":"x","b":1}`))
	if a != hex.EncodeToString(sum[:]) {
		t.Fatalf("digest is not sha256 of the RFC 8785 form")
	}
	c, _ := Digest(json.RawMessage(`{"a":"x","b":2}`))
	if c == a {
		t.Fatal("different arguments, same digest")
	}
	if _, err := Digest(json.RawMessage(`{"a":`)); err == nil {
		t.Fatal("invalid JSON digested")
	}
}

// TestClassifyRefusesInexactNumbers: arguments holding a number a double
// does not hold as written (their digest could not tell it from its
// neighbour) are refused as invalid, with a reason the model reads that
// names the number and the remedy, and no digest a grant could match;
// the same integer written within a double's precision runs.
func TestClassifyRefusesInexactNumbers(t *testing.T) {
	pay := &Tool{Name: "pay", ServerID: "tools", Exposure: ExposureRequiresConfirmation}
	for _, c := range []Call{
		{Name: "pay", Arguments: json.RawMessage(`{"account":12345678901234567}`), Tool: pay},
		{Name: "pay", Arguments: json.RawMessage(`{"account":12345678901234567}`), Tool: pay, Hook: &HookVerdict{Arguments: json.RawMessage(`{"account":12345678901234567}`)}},
		{Name: RequestToolName, Tool: requestTool(t), Arguments: json.RawMessage(
			`{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":500,"account":12345678901234567},"intent":"write"}`)},
	} {
		d := Classify(c)
		if !d.Refused || !d.Invalid || d.Tier != agentd.TierNever || d.Digest != "" {
			t.Errorf("%s: refused=%v invalid=%v tier=%s digest=%q; want refused as invalid, no digest", c.Arguments, d.Refused, d.Invalid, d.Tier, d.Digest)
		}
		for _, want := range []string{"The call was not performed", "12345678901234567", "12345678901234568", "as a string"} {
			if !strings.Contains(d.Reason, want) {
				t.Errorf("reason %q does not say %q", d.Reason, want)
			}
		}
		if !json.Valid(d.Arguments) || !strings.Contains(string(d.Arguments), "12345678901234567") {
			t.Errorf("the refused call's arguments are not kept as sent: %s", d.Arguments)
		}
	}
	d := Classify(Call{Name: "pay", Arguments: json.RawMessage(`{"account":9007199254740992}`), Tool: pay})
	if d.Refused || d.Tier != agentd.TierConfirm || len(d.Digest) != 64 {
		t.Errorf("an integer a double holds: %+v", d)
	}
}

func TestStricter(t *testing.T) {
	tiers := []agentd.Tier{agentd.TierAuto, agentd.TierConfirm, agentd.TierReview, agentd.TierNever}
	for i, a := range tiers {
		for j, b := range tiers {
			want := a
			if j > i {
				want = b
			}
			if got := agentd.Stricter(a, b); got != want {
				t.Errorf("Stricter(%s,%s)=%s want %s", a, b, got, want)
			}
		}
	}
}

// TestHookWithoutRewriteKeepsArguments: a hook verdict that rewrote
// nothing (no updated_arguments) leaves the model's arguments and their
// digest as they are; one that rewrote them replaces both.
func TestHookWithoutRewriteKeepsArguments(t *testing.T) {
	open := &Tool{Name: "lookup", ServerID: "tools", Exposure: ExposureOpen}
	plain := Classify(Call{Name: "lookup", Arguments: json.RawMessage(`{"id":1}`), Tool: open})
	d := Classify(Call{Name: "lookup", Arguments: json.RawMessage(`{"id":1}`), Tool: open, Hook: &HookVerdict{Verdict: HookAllow}})
	if string(d.Arguments) != string(plain.Arguments) || d.Digest != plain.Digest || d.Digest == "" {
		t.Fatalf("hook without a rewrite: arguments %s digest %s; want %s %s", d.Arguments, d.Digest, plain.Arguments, plain.Digest)
	}
	r := Classify(Call{Name: "lookup", Arguments: json.RawMessage(`{"id":1}`), Tool: open,
		Hook: &HookVerdict{Verdict: HookAllow, Arguments: json.RawMessage(`{"id":2}`), RewrittenBy: []string{"h"}}})
	if string(r.Arguments) != `{"id":2}` || r.Digest == plain.Digest {
		t.Fatalf("hook with a rewrite: arguments %s digest %s", r.Arguments, r.Digest)
	}
}
