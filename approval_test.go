package agentd

import "testing"

// TestMayDecideCall: each approvers entry covers exactly its keys, and
// requester_may_approve false refuses the requester only.
func TestMayDecideCall(t *testing.T) {
	conv := &Conversation{TenantID: "t", ProjectID: "p", CreatedBy: "alice"}
	alice := Principal{TenantID: "t", ProjectID: "p", Role: RoleClient, KeyID: "alice"}
	op := Principal{TenantID: "t", ProjectID: "p", Role: RoleOperator, KeyID: "op"}
	adm := Principal{TenantID: "t", ProjectID: "p", Role: RoleAdmin, KeyID: "adm"}
	fin := Principal{TenantID: "t", ProjectID: "p", Role: RoleOperator, KeyID: "fin", Groups: []string{"finance"}}
	robot := Principal{TenantID: "t", ProjectID: "p", Role: RoleDelegate, KeyID: "alice"}
	for _, tc := range []struct {
		name      string
		approvers []string
		requester bool
		by        Principal
		requested string
		want      string
	}{
		{"owner covers the owner", []string{"owner"}, true, alice, "", ""},
		{"owner does not cover an operator", []string{"owner"}, true, op, "", EAPPROVERNOTALLOWED},
		{"operator covers an operator", []string{"operator"}, true, op, "", ""},
		{"operator does not cover an admin", []string{"operator"}, true, adm, "", EAPPROVERNOTALLOWED},
		{"admin covers an admin", []string{"admin"}, true, adm, "", ""},
		{"admin does not cover the owner", []string{"admin"}, true, alice, "", EAPPROVERNOTALLOWED},
		{"group covers a member", []string{"group:finance"}, true, fin, "", ""},
		{"group does not cover another group's", []string{"group:legal"}, true, fin, "", EAPPROVERNOTALLOWED},
		{"a delegate is never covered", []string{"owner", "operator", "admin"}, true, robot, "", EAPPROVERNOTALLOWED},
		{"the requester refused", []string{"owner", "operator"}, false, alice, "alice", EREQUESTERMAYNOTAPPROVE},
		{"the requester allowed when may approve", []string{"owner"}, true, alice, "alice", ""},
		{"another key than the requester", []string{"owner", "operator"}, false, op, "alice", ""},
	} {
		err := MayDecideCall(ApprovalRule{Approvers: tc.approvers, RequesterMayApprove: tc.requester, Quorum: 1}, tc.by, conv, tc.requested)
		if ErrorCode(err) != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
