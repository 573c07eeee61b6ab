package confirm

import (
	"encoding/json"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
)

// approvalFile is the approval object as written (SPEC §11.1): who
// decides, remembered grants (§11.2), reminders and extensions (§11.3).
type approvalFile struct {
	Approvers           []string `json:"approvers"`
	RequesterMayApprove *bool    `json:"requester_may_approve"`
	Quorum              *int     `json:"quorum"`
	AllowRemember       *bool    `json:"allow_remember"`
	GrantMaxTTL         *string  `json:"grant_max_ttl"`
	Reminders           []string `json:"reminders"`
	MaxExtension        *string  `json:"max_extension"`
}

// ParseApproval checks an approval object at field ("approval",
// "endpoints.POST /refunds.approval", …): nil for null or absent; each
// field left out takes its default (agentd.DefaultApprovalRule).
func ParseApproval(raw json.RawMessage, field string) (*agentd.ApprovalRule, error) {
	if strictjson.IsNull(raw) {
		return nil, nil
	}
	var f approvalFile
	if err := strictjson.DecodeStrict(raw, &f, field); err != nil {
		return nil, err
	}
	r := agentd.DefaultApprovalRule()
	if f.Approvers != nil {
		r.Approvers = f.Approvers
	}
	if f.RequesterMayApprove != nil {
		r.RequesterMayApprove = *f.RequesterMayApprove
	}
	if f.Quorum != nil {
		r.Quorum = *f.Quorum
	}
	if len(f.Reminders) > 0 {
		r.Reminders = f.Reminders
	}
	if f.AllowRemember != nil {
		r.AllowRemember = *f.AllowRemember
	}
	if f.GrantMaxTTL != nil {
		r.GrantMaxTTL = *f.GrantMaxTTL
	}
	if f.MaxExtension != nil {
		r.MaxExtension = *f.MaxExtension
	}
	if err := r.Check(); err != nil {
		return nil, strictjson.FieldErr(field, "%v", err)
	}
	return &r, nil
}

// Keys looks up an API key's principal by key id as the keys are
// configured now: false for a key that no longer exists.
type Keys func(id string) (agentd.Principal, bool)

// GrantAnswers reports whether a remembered grant made by creator (the
// principal of its creator's key) may answer a call of conv, of a run
// requested by requestedBy, whose rule as configured now is rule (SPEC
// §11.2): only while rule still allows remembering with a quorum of 1,
// and only where the creator could decide the call itself — it reaches
// conv and agentd.MayDecideCall passes for it under rule.
func GrantAnswers(rule agentd.ApprovalRule, creator agentd.Principal, conv *agentd.Conversation, requestedBy string) bool {
	return rule.AllowRemember && rule.Quorum == 1 && creator.Reaches(conv) &&
		agentd.MayDecideCall(rule, creator, conv, requestedBy) == nil
}

// LiveApprovals is the approvals of a call of conv (a run requested by
// requestedBy, parked with rule) that still count towards its quorum
// (SPEC §11.1): those whose key still exists (keys) and could still
// decide the call — it reaches conv and agentd.MayDecideCall passes under
// rule. With keys nil every approval counts. The result is a new slice.
func LiveApprovals(rule agentd.ApprovalRule, approvals []agentd.Approval, keys Keys, conv *agentd.Conversation, requestedBy string) []agentd.Approval {
	out := make([]agentd.Approval, 0, len(approvals))
	for _, a := range approvals {
		if keys != nil {
			p, ok := keys(a.KeyID)
			if !ok || !p.Reaches(conv) || agentd.MayDecideCall(rule, p, conv, requestedBy) != nil {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// CheckExtension checks an extension by `by` of a call extended by
// extended so far under rule (SPEC §11.3): the total may reach rule's
// max_extension but not pass it (EEXTENSIONEXCEEDSMAX; 0 turns
// extensions off). It returns the new total. The check cannot overflow,
// whatever by is (extended is never past the limit it was checked under).
func CheckExtension(rule agentd.ApprovalRule, extended, by time.Duration) (time.Duration, error) {
	limit := rule.MaxExtensionOf()
	if by > limit-extended { // limit and extended are 0 or more: no overflow
		return 0, agentd.Errorf(agentd.EEXTENSIONEXCEEDSMAX,
			"extending by %s would pass this call's max_extension %s (extended by %s so far)", by, limit, extended)
	}
	return extended + by, nil
}
