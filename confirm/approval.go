package confirm

import (
	"encoding/json"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/jsonconf"
)

// approvalFile is the approval object as written (SPEC §11.1). The rules
// of who decides, reminders and extensions (§11.3) are built; remembered
// grants are not yet, and their fields are refused by name.
type approvalFile struct {
	Approvers           []string        `json:"approvers"`
	RequesterMayApprove *bool           `json:"requester_may_approve"`
	Quorum              *int            `json:"quorum"`
	AllowRemember       json.RawMessage `json:"allow_remember"`
	GrantMaxTTL         json.RawMessage `json:"grant_max_ttl"`
	Reminders           []string        `json:"reminders"`
	MaxExtension        *string         `json:"max_extension"`
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
	for name, v := range map[string]json.RawMessage{"allow_remember": f.AllowRemember, "grant_max_ttl": f.GrantMaxTTL} {
		if !jsonconf.IsNull(v) {
			return nil, jsonconf.FieldErr(field+"."+name, "is not supported yet (remembered grants are not built; docs/governance.md)")
		}
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
	if f.MaxExtension != nil {
		r.MaxExtension = *f.MaxExtension
	}
	if err := r.Check(); err != nil {
		return nil, jsonconf.FieldErr(field, "%v", err)
	}
	return &r, nil
}
