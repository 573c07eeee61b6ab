package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/demo"
)

// The curl examples of docs/runtime.md (direct eval, the invoke trigger)
// and docs/governance.md (extending a deadline) work as written: their
// shell blocks run against the real binary on the demo project, with
// refund_payment given the invoke trigger and an approval rule of
// reminders and max_extension 2h as the pages say, keys for the
// variables they use, and a parked refund as $CALL. Each exchange is
// checked against the OpenAPI document on the way.
func TestRuntimeAndGovernanceDocCurlExamples(t *testing.T) {
	dir := t.TempDir()
	must(t, demo.WriteTo(dir))
	tool := filepath.Join(dir, "tools", "refund_payment", "tool.json")
	var def map[string]any
	b, err := os.ReadFile(tool)
	must(t, err)
	must(t, json.Unmarshal(b, &def))
	def["triggers"] = map[string]any{"invoke": true}
	def["approval"] = map[string]any{"approvers": []string{"operator"}, "reminders": []string{"10m", "1m"}, "max_extension": "2h"}
	b, err = json.Marshal(def)
	must(t, err)
	must(t, os.WriteFile(tool, b, 0o644))
	keys := map[string]string{"OPERATOR_KEY": "operator", "DELEGATE_KEY": "delegate", "OPS_KEY": "operator"}
	var list []map[string]string
	var env []string
	for name, role := range keys {
		secret := "k-" + strings.ToLower(name)
		sum := sha256.Sum256([]byte(secret))
		id := strings.ToLower(strings.TrimSuffix(name, "_KEY"))
		list = append(list, map[string]string{"id": id, "sha256": hex.EncodeToString(sum[:]), "tenant_id": "default",
			"project_id": "default", "role": role})
		env = append(env, name+"="+secret)
	}
	b, err = json.Marshal(map[string]any{"api_keys": list})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))

	base, _ := startProcess(t, agentdBinary(t), dir, t.TempDir())
	conv, st := newConversation(t, base, "k-ops_key")
	send(t, base, "k-ops_key", conv, "Please refund my order")
	callID := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	proxy := validatingProxy(t, base)
	env = append(env, "A="+proxy, "AGENTD="+proxy, "CALL="+callID)

	for _, tt := range []struct {
		file, heading string
		wants         []string
	}{
		{"docs/runtime.md", "## Direct eval", []string{`{"status":"completed","result":{"refund_id":"R-`, `"order_id":"o-1","amount":5`}},
		{"docs/runtime.md", "## The invoke trigger", []string{`{"preview":{"tool":"refund_payment"`, `"tier":"confirm"`,
			`"instruction":"Nothing ran.`, `{"status":"completed","result":{"refund_id":"R-`}},
		{"docs/governance.md", "## Reminders and extensions", []string{`"id":"` + callID + `"`, `"status":"requires_confirmation"`,
			`"extension_exceeds_max"`}},
	} {
		runShell(t, tt.file, "set -e\n"+strings.Join(docBlocks(t, tt.file, tt.heading), "\n"), env, tt.wants)
	}
}
