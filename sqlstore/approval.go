package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
)

// approvalColumn is the stored form of a call's rule and approvals (the
// tool_calls.approval column).
type approvalColumn struct {
	*agentd.ApprovalRule
	Approvals []agentd.Approval `json:"approvals,omitempty"`
	// Reminded and ExtendedMS are SPEC §11.3's state (ToolCall.Reminded,
	// ToolCall.Extended); a GovernanceUpdate writes them.
	Reminded   []agentd.Reminder `json:"reminded,omitempty"`
	ExtendedMS int64             `json:"extended_ms,omitempty"`
	// GrantedBy is ToolCall.GrantedBy (SPEC §11.2).
	GrantedBy *agentd.GrantRef `json:"granted_by,omitempty"`
}

// encodeCallApproval is the stored JSON of c's approval column as
// inserted: its rule, approvals and grant; nil (NULL) for a call without
// a rule.
func encodeCallApproval(c *agentd.ToolCall) (any, error) {
	return encodeApprovalColumn(approvalColumn{ApprovalRule: c.Approval, Approvals: c.Approvals, GrantedBy: c.GrantedBy})
}

// encodeReminders is the stored JSON of reminders (a GovernanceUpdate's
// Reminded).
func encodeReminders(rs []agentd.Reminder) (string, error) { return encodeList(rs) }

// encodeApprovalRule is the stored JSON of a call's approval rule and
// approvals; nil (NULL) for a call without a rule.
func encodeApprovalRule(r *agentd.ApprovalRule, approvals []agentd.Approval) (any, error) {
	return encodeApprovalColumn(approvalColumn{ApprovalRule: r, Approvals: approvals})
}

// encodeApprovalColumn is col's stored JSON; nil (NULL) without a rule.
func encodeApprovalColumn(col approvalColumn) (any, error) {
	if col.ApprovalRule == nil {
		return nil, nil
	}
	b, err := json.Marshal(col)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// encodeApprovals is the stored JSON of approvals alone (an
// ApprovalsUpdate's After).
func encodeApprovals(approvals []agentd.Approval) (string, error) { return encodeList(approvals) }

// encodeList is the stored JSON of a list: [] when it is nil.
func encodeList[T any](xs []T) (string, error) {
	if xs == nil {
		xs = []T{}
	}
	b, err := json.Marshal(xs)
	return string(b), err
}

// decodeApproval sets c's Approval and Approvals from the stored
// JSON (valid false: NULL, no rule).
func decodeApproval(c *agentd.ToolCall, s string, valid bool) error {
	if !valid || s == "" {
		return nil
	}
	col := approvalColumn{ApprovalRule: &agentd.ApprovalRule{}}
	if err := json.Unmarshal([]byte(s), &col); err != nil {
		return fmt.Errorf("approval of tool call %s: %w", c.ID, err)
	}
	for i := range col.Approvals {
		col.Approvals[i].At = col.Approvals[i].At.UTC()
	}
	for i := range col.Reminded {
		col.Reminded[i].Deadline = col.Reminded[i].Deadline.UTC()
	}
	c.Approval, c.Approvals = col.ApprovalRule, col.Approvals
	c.Reminded, c.Extended = col.Reminded, time.Duration(col.ExtendedMS)*time.Millisecond
	c.GrantedBy = col.GrantedBy
	return nil
}
