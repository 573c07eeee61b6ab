package confirm

import (
	"encoding/json"
	"fmt"

	"github.com/agentd-dev/agentd"
)

// Hook verdicts (SPEC §4.3): the "decision" key of a preToolUse hook's output.
const (
	HookAllow = "allow"
	HookAsk   = "ask"
	HookDeny  = "deny"
)

// HookVerdict is what a call's preToolUse hooks decided together (package
// hooks runs them in name order and combines them: deny > ask > allow).
type HookVerdict struct {
	// Verdict is HookAllow, HookAsk or HookDeny.
	Verdict string
	// Reason is the deciding hook's reason ("" when it gave none).
	Reason string
	// Hook names the hook that decided (ask or deny).
	Hook string
	// Arguments are the arguments as the last rewriting hook left them
	// (updated_arguments); nil when no hook rewrote them.
	Arguments json.RawMessage
	// RewrittenBy names the hooks that rewrote the arguments, in order.
	RewrittenBy []string
}

// applyHook combines the hooks' verdict with the tool's classification d,
// the one place where it happens: arguments a hook rewrote into ones the
// tool's schema refuses make the call refused; deny refuses it (tier never); ask
// makes the tier at least confirm (escalated when it raised it); allow
// never lowers a tier. A call already refused stays refused.
func applyHook(c Call, d Classification) Classification {
	h := c.Hook
	if h == nil {
		return d
	}
	if d.Refused {
		if d.Invalid && h.Arguments != nil {
			d.Why = fmt.Sprintf("hook %s rewrote the arguments into ones the tool does not accept: %s", quoteList(h.RewrittenBy), d.Why)
			d.Reason = fmt.Sprintf("The call was not performed: %s", d.Why)
		}
		return d
	}
	switch h.Verdict {
	case HookDeny:
		d.Tier, d.Refused, d.Escalated = agentd.TierNever, true, true
		d.Why = fmt.Sprintf("hook %q denied it", h.Hook)
		if h.Reason != "" {
			d.Why += ": " + h.Reason
		}
		d.Reason = fmt.Sprintf("The call was not performed: %s.", d.Why)
		d.AllowedDecisions = nil
	case HookAsk:
		if d.Tier.Rank() >= agentd.TierConfirm.Rank() {
			return d // confirm already (review and never were refused above)
		}
		d.Tier, d.Escalated = agentd.TierConfirm, true
		d.Reason = fmt.Sprintf("Hook %q asks for confirmation", h.Hook)
		if h.Reason != "" {
			d.Reason += ": " + h.Reason
		}
		d.AllowedDecisions = []string{"approve", "deny"}
	}
	return d
}

func quoteList(names []string) string {
	switch len(names) {
	case 0:
		return `""`
	case 1:
		return fmt.Sprintf("%q", names[0])
	}
	b, _ := json.Marshal(names)
	return string(b)
}
