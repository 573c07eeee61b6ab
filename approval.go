package agentd

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Approvers of SPEC §11.1: the conversation's owner (the client key that
// created it), the roles of its tenant and project, and key groups
// (ApproverGroupPrefix + a name of APIKey.Groups).
const (
	ApproverOwner       = "owner"
	ApproverOperator    = RoleOperator
	ApproverAdmin       = RoleAdmin
	ApproverGroupPrefix = "group:"
)

// ApprovalRule is who decides a parked call and how (SPEC §11.1: the
// approval object of agent.json, tool.json, a policy.json endpoint or
// mcp.json). The zero value is not valid; DefaultApprovalRule is today's
// rule. A call stores the rule it was parked with (ToolCall.Approval).
type ApprovalRule struct {
	// Approvers lists ApproverOwner, ApproverOperator, ApproverAdmin and
	// "group:<name>" entries.
	Approvers []string `json:"approvers"`
	// RequesterMayApprove false refuses the key that started the run
	// (Run.RequestedBy).
	RequesterMayApprove bool `json:"requester_may_approve"`
	// Quorum is how many distinct keys must approve (1 or more).
	Quorum int `json:"quorum"`
	// Reminders are Go durations before the deadline at which a pending
	// call is reminded of (SPEC §11.3), as written ("10m").
	Reminders []string `json:"reminders,omitempty"`
	// MaxExtension bounds the total of a call's extensions (a Go
	// duration; "" or "0s": extensions are off).
	MaxExtension string `json:"max_extension,omitempty"`
	// AllowRemember lets an approval carry "remember" (SPEC §11.2; only
	// with a quorum of 1); GrantMaxTTL bounds its ttl (a Go duration; ""
	// means DefaultGrantMaxTTL).
	AllowRemember bool   `json:"allow_remember,omitempty"`
	GrantMaxTTL   string `json:"grant_max_ttl,omitempty"`
}

// GrantMaxTTLOf is r's grant_max_ttl as a duration (DefaultGrantMaxTTL
// when unset).
func (r ApprovalRule) GrantMaxTTLOf() time.Duration {
	if d, err := time.ParseDuration(r.GrantMaxTTL); err == nil && d > 0 {
		return d
	}
	return DefaultGrantMaxTTL
}

// Reminder is a reminder sent for a call (SPEC §11.3): the deadline it was
// sent for, and Before, how long before it, as the rule writes the offset
// ("10m", one of ApprovalRule.Reminders; JSON "offset"). A reminder counts
// once per deadline, so an extension (a new deadline) arms every offset
// again.
type Reminder struct {
	Deadline time.Time `json:"deadline"`
	Before   string    `json:"offset"`
}

// ReminderOffsets is r's reminders as durations (Check validated them).
func (r ApprovalRule) ReminderOffsets() []time.Duration {
	out := make([]time.Duration, 0, len(r.Reminders))
	for _, s := range r.Reminders {
		d, _ := time.ParseDuration(s)
		out = append(out, d)
	}
	return out
}

// MaxExtensionOf is r's max_extension as a duration (0: off).
func (r ApprovalRule) MaxExtensionOf() time.Duration {
	d, _ := time.ParseDuration(r.MaxExtension)
	return d
}

// CheckTimeout reports a reminder of r that is not below timeout, the
// approval deadline it would be armed against (it could never be sent).
func (r ApprovalRule) CheckTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return nil
	}
	for i, d := range r.ReminderOffsets() {
		if d >= timeout {
			return fmt.Errorf("reminders[%d]: %q is not below the approval timeout %s", i, r.Reminders[i], timeout)
		}
	}
	return nil
}

// DefaultApprovalRule is the rule where nothing is configured: the owner,
// operators and admins decide, the requester too, and one approval runs
// the call.
func DefaultApprovalRule() ApprovalRule {
	return ApprovalRule{Approvers: []string{ApproverOwner, ApproverOperator, ApproverAdmin}, RequesterMayApprove: true, Quorum: 1}
}

// Approval is one key's approval of a call whose quorum is above one,
// recorded before the call is decided (ToolCall.Approvals).
type Approval struct {
	KeyID string    `json:"key_id"`
	Role  string    `json:"role,omitempty"`
	Via   string    `json:"via,omitempty"`
	At    time.Time `json:"at"`
}

// ApprovalOf is the rule a call was parked with: its own, else the default.
func (c *ToolCall) ApprovalOf() ApprovalRule {
	if c.Approval != nil {
		return *c.Approval
	}
	return DefaultApprovalRule()
}

// Check validates r: known approvers, at least one, a quorum of 1 or more.
func (r ApprovalRule) Check() error {
	if len(r.Approvers) == 0 {
		return fmt.Errorf("approvers: must name at least one of owner, operator, admin, group:<name>")
	}
	for i, a := range r.Approvers {
		switch {
		case a == ApproverOwner, a == ApproverOperator, a == ApproverAdmin:
		case strings.HasPrefix(a, ApproverGroupPrefix) && len(a) > len(ApproverGroupPrefix):
		default:
			return fmt.Errorf("approvers[%d]: must be owner, operator, admin or group:<name>, got %q", i, a)
		}
		if slices.Index(r.Approvers, a) != i {
			return fmt.Errorf("approvers[%d]: %q is listed twice", i, a)
		}
	}
	if r.Quorum < 1 {
		return fmt.Errorf("quorum: must be 1 or more, got %d", r.Quorum)
	}
	if r.AllowRemember && r.Quorum != 1 {
		return fmt.Errorf("allow_remember: needs a quorum of 1 (a grant would let one key stand for %d), got quorum %d", r.Quorum, r.Quorum)
	}
	if r.GrantMaxTTL != "" {
		if d, err := time.ParseDuration(r.GrantMaxTTL); err != nil || d <= 0 {
			return fmt.Errorf("grant_max_ttl: must be a positive Go duration such as \"24h\", got %q", r.GrantMaxTTL)
		}
	}
	return r.checkReminders()
}

// checkReminders validates r's reminders (positive Go durations, each
// once) and max_extension (a Go duration, 0 or more).
func (r ApprovalRule) checkReminders() error {
	for i, s := range r.Reminders {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return fmt.Errorf("reminders[%d]: must be a Go duration such as \"10m\", got %q", i, s)
		case d <= 0:
			return fmt.Errorf("reminders[%d]: must be positive, got %q", i, s)
		case slices.Index(r.Reminders, s) != i:
			return fmt.Errorf("reminders[%d]: %q is listed twice", i, s)
		}
	}
	if r.MaxExtension != "" {
		d, err := time.ParseDuration(r.MaxExtension)
		if err != nil {
			return fmt.Errorf("max_extension: must be a Go duration such as \"2h\", got %q", r.MaxExtension)
		}
		if d < 0 {
			return fmt.Errorf("max_extension: must not be negative, got %q", r.MaxExtension)
		}
	}
	return nil
}

// Covers reports whether r's approvers include p on a call of conv (the
// principal already reaches conv: Principal.Reaches). Delegate keys are
// never covered (Principal.MayDecide).
func (r ApprovalRule) Covers(p Principal, conv *Conversation) bool {
	if !p.MayDecide() {
		return false
	}
	for _, a := range r.Approvers {
		switch {
		case a == ApproverOwner:
			if conv != nil && p.KeyID != "" && conv.CreatedBy == p.KeyID {
				return true
			}
		case a == ApproverOperator || a == ApproverAdmin:
			if p.Role == a {
				return true
			}
		case strings.HasPrefix(a, ApproverGroupPrefix):
			if slices.Contains(p.Groups, strings.TrimPrefix(a, ApproverGroupPrefix)) {
				return true
			}
		}
	}
	return false
}

// MayDecideCall is the one check of SPEC §11.1 of who may decide a call
// parked with rule r, in conversation conv, of a run requested by
// requestedBy ("" when unknown): nil, or EAPPROVERNOTALLOWED or
// EREQUESTERMAYNOTAPPROVE naming the rule. Every decision path, the
// pending list's ?decidable=true and the card's buttons read it.
func MayDecideCall(r ApprovalRule, p Principal, conv *Conversation, requestedBy string) error {
	if !r.Covers(p, conv) {
		return Errorf(EAPPROVERNOTALLOWED, "key %q may not decide this call: its approval rule allows approvers %s",
			p.KeyID, strings.Join(r.Approvers, ", "))
	}
	if !r.RequesterMayApprove && requestedBy != "" && p.KeyID == requestedBy {
		return Errorf(EREQUESTERMAYNOTAPPROVE, "key %q started this run and the call's approval rule has requester_may_approve false: another approver must decide", p.KeyID)
	}
	return nil
}

// ApprovedBy lists the key ids of approvals in order, then last when it is
// not among them.
func ApprovedBy(approvals []Approval, last string) []string {
	out := make([]string, 0, len(approvals)+1)
	for _, a := range approvals {
		out = append(out, a.KeyID)
	}
	if last != "" && !slices.Contains(out, last) {
		out = append(out, last)
	}
	return out
}
