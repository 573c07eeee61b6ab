package confirm

import (
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/jsonconf"
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
	if jsonconf.IsNull(raw) {
		return nil, nil
	}
	var f approvalFile
	if err := jsonconf.DecodeStrict(raw, &f, field); err != nil {
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
		return nil, jsonconf.FieldErr(field, "%v", err)
	}
	return &r, nil
}
