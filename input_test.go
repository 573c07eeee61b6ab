package agentd

import "testing"

// TestMayAnswer: SPEC §12.3's who may answer, as a table: the owner by
// default, roles and groups when the rule names them, a delegate only as
// the owner of its own conversation.
func TestMayAnswer(t *testing.T) {
	conv := &Conversation{TenantID: "t", ProjectID: "p", CreatedBy: "c1"}
	key := func(id, role string, groups ...string) Principal {
		return Principal{TenantID: "t", ProjectID: "p", KeyID: id, Role: role, Groups: groups}
	}
	owner := []string{ApproverOwner}
	for _, tt := range []struct {
		name      string
		answerers []string
		p         Principal
		ok        bool
	}{
		{"the owner", owner, key("c1", RoleClient), true},
		{"another client", owner, key("c2", RoleClient), false},
		{"an operator, owner only", owner, key("op", RoleOperator), false},
		{"an operator, operator named", []string{ApproverOwner, ApproverOperator}, key("op", RoleOperator), true},
		{"an admin, operator named", []string{ApproverOperator}, key("ad", RoleAdmin), false},
		{"a group member", []string{"group:ops"}, key("g", RoleClient, "ops"), true},
		{"another group", []string{"group:ops"}, key("g", RoleClient, "finance"), false},
		{"a delegate owning the conversation", owner, key("c1", RoleDelegate), true},
		{"a delegate, not the owner", owner, key("d2", RoleDelegate), false},
		{"a delegate, owner not named", []string{ApproverOperator, "group:ops"}, key("c1", RoleDelegate, "ops"), false},
	} {
		err := MayAnswer(tt.answerers, tt.p, conv)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		} else if err != nil && ErrorCode(err) != EANSWERERNOTALLOWED {
			t.Errorf("%s: code %s", tt.name, ErrorCode(err))
		}
	}
}
