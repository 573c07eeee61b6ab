package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Approval rules (SPEC §11.1, issue 22) through the HTTP API: acceptance
// 1 (two-person approval on the real binary, kill -9 between the
// approvals) and 2 (requester_may_approve false on every door).

// govKey is one API key of a governance project.
type govKey struct {
	key, id, role string
	groups        []string
}

var govKeys = []govKey{
	{key: "k-owner", id: "owner", role: "client"},
	{key: "k-op1", id: "op1", role: "operator"},
	{key: "k-op2", id: "op2", role: "operator"},
	{key: "k-fin", id: "fin", role: "client", groups: []string{"finance"}},
}

// govProject is writeProject's project with agent.json "approval" set to
// approval and govKeys as its keys.
func govProject(t *testing.T, approval string) (dir, execLog string) {
	t.Helper()
	dir, execLog = writeProject(t, projectOpts{})
	path := filepath.Join(dir, "agent.json")
	b, err := os.ReadFile(path)
	must(t, err)
	var agent map[string]any
	must(t, json.Unmarshal(b, &agent))
	agent["approval"] = json.RawMessage(approval)
	b, err = json.Marshal(agent)
	must(t, err)
	must(t, os.WriteFile(path, b, 0o644))
	var ks []map[string]any
	for _, k := range govKeys {
		sum := sha256.Sum256([]byte(k.key))
		ks = append(ks, map[string]any{"id": k.id, "sha256": hex.EncodeToString(sum[:]), "tenant_id": "t1", "project_id": "p1",
			"role": k.role, "groups": k.groups})
	}
	b, err = json.Marshal(map[string]any{"api_keys": ks})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	return dir, execLog
}

// decidableIDs is GET /v1/approvals?decidable=true as key.
func decidableIDs(t *testing.T, base, key string) []string {
	t.Helper()
	status, m := call(t, http.MethodGet, base+"/v1/approvals?decidable=true", key, "")
	if status != 200 {
		t.Fatalf("decidable list: %d %v", status, m)
	}
	var ids []string
	for _, a := range m["approvals"].([]any) {
		ids = append(ids, a.(map[string]any)["id"].(string))
	}
	return ids
}

// Acceptance 1: two-person approval with two operator keys on the real
// binary. The first approval answers 200 with one of two recorded and
// streams confirmation_progress; the owner is refused with
// approver_not_allowed; kill -9 and a restart lose nothing; the first
// operator again changes nothing; the second operator's approval runs the
// call exactly once and confirmation_resolved.approved_by names both.
func TestTwoPersonApprovalKill9(t *testing.T) {
	bin := agentdBinary(t)
	dir, execLog := govProject(t, `{"approvers":["operator"],"quorum":2}`)
	data := t.TempDir()
	env := "AGENTD_TEST_LOG=" + execLog
	base, proc := startProcess(t, bin, dir, data, env)

	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	card := cr.Data["card"].(map[string]any)["approval"].(map[string]any)
	if card["quorum"] != float64(2) || card["approvals"] != float64(0) || fmt.Sprint(card["approvers"]) != "[operator]" {
		t.Fatalf("the card's approval block: %v", card)
	}
	if allowed := fmt.Sprint(cr.Data["allowed_decisions"]); strings.Contains(allowed, "edit") {
		t.Fatalf("a quorum-2 card offers %s", allowed)
	}
	if ids := decidableIDs(t, base, "k-owner"); len(ids) != 0 {
		t.Fatalf("the owner may decide %v", ids)
	}

	status, first := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-op1", `{"decision":"approve"}`)
	if status != 200 || first["status"] != "requires_confirmation" || first["quorum"] != float64(2) || len(first["approvals"].([]any)) != 1 {
		t.Fatalf("first approval: %d %v", status, first)
	}
	prog := st.waitFor("confirmation_progress", nil)
	if prog.Data["approvals"] != float64(1) || prog.Data["quorum"] != float64(2) || fmt.Sprint(prog.Data["approved_by"]) != "[op1]" {
		t.Fatalf("confirmation_progress %s", prog.Raw)
	}
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-owner", `{"decision":"approve"}`)
	if status != http.StatusForbidden || errCode(m) != "approver_not_allowed" || !strings.Contains(str(m["error"].(map[string]any), "message"), "operator") {
		t.Fatalf("the owner's approval: %d %v", status, m)
	}
	if ids := decidableIDs(t, base, "k-op1"); len(ids) != 0 {
		t.Fatalf("op1, who approved, may still decide %v", ids)
	}

	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()
	base, _ = startProcess(t, bin, dir, data, env)

	after := getCall(t, base, "k-op2", callID)
	if after["status"] != "requires_confirmation" || len(after["approvals"].([]any)) != 1 {
		t.Fatalf("after kill -9: %v", after)
	}
	if ids := decidableIDs(t, base, "k-op2"); !slices.Equal(ids, []string{callID}) {
		t.Fatalf("op2 may decide %v, want the call", ids)
	}
	status, again := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-op1", `{"decision":"approve"}`)
	if status != 200 || again["status"] != "requires_confirmation" || len(again["approvals"].([]any)) != 1 {
		t.Fatalf("op1 again: %d %v", status, again)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times before the quorum", n)
	}
	st = openStream(t, base, "k-owner", conv, prog.ID)
	status, second := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-op2", `{"decision":"approve"}`)
	if status != 200 || second["decision"] != "approved" || second["decided_by"] != "op2" || second["status"] != "approved" {
		t.Fatalf("second approval: %d %v", status, second)
	}
	res := st.waitFor("confirmation_resolved", nil)
	if fmt.Sprint(res.Data["approved_by"]) != "[op1 op2]" {
		t.Fatalf("confirmation_resolved %s", res.Raw)
	}
	if fin := st.waitFor("run_finished", nil); fin.Data["status"] != "completed" {
		t.Fatalf("run_finished %s", fin.Raw)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
	status, audit := call(t, http.MethodGet, base+"/v1/audit?tool_call_id="+callID, "k-op1", "")
	var kinds []string
	for _, e := range audit["entries"].([]any) {
		kinds = append(kinds, fmt.Sprint(e.(map[string]any)["kind"], "/", e.(map[string]any)["key_id"]))
	}
	if status != 200 || fmt.Sprint(kinds) != "[approval/op1 decision/op2]" {
		t.Fatalf("audit %d %v", status, kinds)
	}
}

// Acceptance 2: requester_may_approve false refuses the requester on every
// door — native, bulk, AG-UI resume, AI SDK approval response — with
// requester_may_not_approve, and lets an operator approve.
func TestRequesterMayNotApprove(t *testing.T) {
	dir, execLog := govProject(t, `{"approvers":["owner","operator"],"requester_may_approve":false}`)
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	cr := st.waitFor("confirmation_required", nil)
	callID, digest := str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256")
	if cr.Data["card"].(map[string]any)["approval"].(map[string]any)["requester_may_approve"] != false {
		t.Fatalf("card %s", cr.Raw)
	}

	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-owner", `{"decision":"approve"}`)
	if status != http.StatusForbidden || errCode(m) != "requester_may_not_approve" {
		t.Errorf("native: %d %v", status, m)
	}
	_, m = call(t, http.MethodPost, base+"/v1/approvals", "k-owner", fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":true}]}`, callID))
	if res, _ := m["results"].([]any); len(res) != 1 || !strings.Contains(fmt.Sprint(res[0]), "requester_may_not_approve") {
		t.Errorf("bulk: %v", m)
	}
	_, body := callRaw(t, http.MethodPost, base+"/v1/ag-ui", "k-owner", fmt.Sprintf(
		`{"threadId":%q,"runId":"r1","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true,"argumentsSha256":%q}}]}`, conv, callID, digest))
	if e := aguiFrame(t, body, "RUN_ERROR"); e == nil || e["code"] != "requester_may_not_approve" {
		t.Errorf("AG-UI: %s", body)
	}
	status, m = call(t, http.MethodPost, base+"/v1/ai-sdk/chat", "k-owner", strings.Replace(aiSDKApproval(conv, callID, callID), "tool-write_file", "tool-pay", 1))
	if status != http.StatusForbidden || errCode(m) != "requester_may_not_approve" {
		t.Errorf("AI SDK: %d %v", status, m)
	}
	if got := getCall(t, base, "k-owner", callID); got["status"] != "requires_confirmation" || got["decisions"] != nil {
		t.Fatalf("a refused door changed the call: %v", got)
	}
	if ids := decidableIDs(t, base, "k-owner"); len(ids) != 0 {
		t.Errorf("the requester may decide %v", ids)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-op1", `{"decision":"approve"}`)
	if status != 200 || m["decision"] != "approved" {
		t.Fatalf("operator: %d %v", status, m)
	}
	st.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
}

// A group approver: a client key of group finance that is not the owner
// does not reach the conversation (404 before any rule); an operator of
// the group decides.
func TestGroupApproverReach(t *testing.T) {
	dir, execLog := govProject(t, `{"approvers":["group:finance"]}`)
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	callID := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-fin", `{"decision":"approve"}`)
	if status != http.StatusNotFound {
		t.Errorf("a group client key that is not the owner: %d %v", status, m)
	}
	status, m = call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "k-op1", `{"decision":"deny"}`)
	if status != http.StatusForbidden || errCode(m) != "approver_not_allowed" || !strings.Contains(fmt.Sprint(m), "group:finance") {
		t.Errorf("an operator outside the group: %d %v", status, m)
	}
}

// A quorum on the chat protocols' doors and the bulk one: an AG-UI resume
// by the first operator records one approval (no RUN_ERROR; the call stays
// parked), the same operator's AI SDK approval changes nothing, and the
// second operator's bulk approval runs the call once.
func TestQuorumOnEveryDoor(t *testing.T) {
	dir, execLog := govProject(t, `{"approvers":["operator"],"quorum":2}`)
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "k-owner")
	send(t, base, "k-owner", conv, "pay the bill")
	cr := st.waitFor("confirmation_required", nil)
	callID, digest := str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256")

	_, body := callRaw(t, http.MethodPost, base+"/v1/ag-ui", "k-op1", fmt.Sprintf(
		`{"threadId":%q,"runId":"r1","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true,"argumentsSha256":%q}}]}`, conv, callID, digest))
	if e := aguiFrame(t, body, "RUN_ERROR"); e != nil {
		t.Fatalf("AG-UI first approval: %s", body)
	}
	if fin := aguiFrame(t, body, "RUN_FINISHED"); fin == nil || !strings.Contains(fmt.Sprint(fin["outcome"]), callID) {
		t.Fatalf("AG-UI first approval does not end with the call's interrupt open: %s", body)
	}
	if prog := st.waitFor("confirmation_progress", nil); fmt.Sprint(prog.Data["approved_by"]) != "[op1]" {
		t.Fatalf("confirmation_progress %s", prog.Raw)
	}
	status, raw := callRaw(t, http.MethodPost, base+"/v1/ai-sdk/chat", "k-op1", strings.Replace(aiSDKApproval(conv, callID, callID), "tool-write_file", "tool-pay", 1))
	if status != 200 || strings.Contains(string(raw), `"type":"error"`) {
		t.Fatalf("AI SDK repeat by op1: %d %s", status, raw)
	}
	if got := getCall(t, base, "k-op1", callID); got["status"] != "requires_confirmation" || len(got["approvals"].([]any)) != 1 {
		t.Fatalf("after op1 twice: %v", got)
	}
	_, m := call(t, http.MethodPost, base+"/v1/approvals", "k-op2", fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":true}]}`, callID))
	if res, _ := m["results"].([]any); len(res) != 1 || res[0].(map[string]any)["status"] != "applied" {
		t.Fatalf("bulk by op2: %v", m)
	}
	if res := st.waitFor("confirmation_resolved", nil); fmt.Sprint(res.Data["approved_by"]) != "[op1 op2]" {
		t.Fatalf("confirmation_resolved %s", res.Raw)
	}
	st.waitFor("run_finished", nil)
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want 1", n)
	}
}
