package project

import (
	"slices"
	"strings"
	"testing"
)

// TestLoadApproval: approval in agent.json, tool.json and mcp.json, and
// api_keys' groups, are loaded; a bad one names its file and field.
func TestLoadApproval(t *testing.T) {
	files := withTool(map[string]string{
		"agent.json":  `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}, "approval": {"approvers": ["operator"], "quorum": 2}}`,
		"agentd.json": `{"api_keys": [{"id": "fin", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "operator", "groups": ["finance", "audit"]}]}`,
		"mcp.json":    `{"servers": [{"id": "crm", "command": ["x"]}], "approval": {"crm__delete": {"approvers": ["admin"]}}}`,
	}, "refund", `, "approval": {"requester_may_approve": false}`)
	p, err := Load(writeProject(t, files), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Agent.Approval; a == nil || !slices.Equal(a.Approvers, []string{"operator"}) || a.Quorum != 2 || !a.RequesterMayApprove {
		t.Errorf("agent.json approval %+v", a)
	}
	if r := p.Tools["refund"].Approval; r == nil || r.RequesterMayApprove || r.Quorum != 1 {
		t.Errorf("tool.json approval %+v", r)
	}
	if r := p.MCP.Approval["crm__delete"]; r == nil || !slices.Equal(r.Approvers, []string{"admin"}) {
		t.Errorf("mcp.json approval %+v", p.MCP.Approval)
	}
	if k := p.Server.APIKeys[0]; !slices.Equal(k.Groups, []string{"finance", "audit"}) {
		t.Errorf("groups %v", k.Groups)
	}

	agent := `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}}`
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"agent": {map[string]string{"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}, "approval": {"quorum": 0}}`},
			`agent.json: field "approval": quorum: must be 1 or more`},
		"tool": {withTool(map[string]string{"agent.json": agent}, "refund", `, "approval": {"approvers": ["boss"]}`),
			`field "approval": approvers[0]: must be owner`},
		"reminder at timeout": {map[string]string{"agent.json": `{"name": "a", "model": {"provider": "script", "script": {"rules": []}}, "approval_timeout": "3s", "approval": {"reminders": ["3s"]}}`},
			`agent.json: field "approval": reminders[0]: "3s" is not below the approval timeout 3s`},
		"mcp name": {map[string]string{"agent.json": agent, "mcp.json": `{"servers": [{"id": "crm", "command": ["x"]}], "approval": {"delete": {}}}`},
			`mcp.json: field "approval.delete": must name a tool`},
		"mcp rule": {map[string]string{"agent.json": agent, "mcp.json": `{"servers": [{"id": "crm", "command": ["x"]}], "approval": {"crm__delete": {"quorum": -1}}}`},
			`mcp.json: field "approval.crm__delete": quorum`},
		"group": {map[string]string{"agent.json": agent, "agentd.json": `{"api_keys": [{"id": "k", "sha256": "` + okKey + `", "tenant_id": "t", "project_id": "p", "role": "client", "groups": ["a b"]}]}`},
			`field "api_keys[0].groups[0]": must be 1 to 128 letters`},
	} {
		_, err := Load(writeProject(t, tc.files), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
