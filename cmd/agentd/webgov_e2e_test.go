package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/jstest"
)

// The web chat's card for approval governance (SPEC §11.1–§11.3, issue
// 22) in Chromium on the real binary: web/testdata/js/governance.test.mjs.
// Two servers: one whose calls need two operators, with a reminder 15 s
// before a 20 s deadline and extensions allowed; one whose card offers
// remember. What the page shows is asserted there; here, what the
// server then holds.
func TestWebGovernanceInBrowser(t *testing.T) {
	node := jstest.Node(t)
	pkgs := jstest.Packages(t, "web/testdata/js")
	chromium := jstest.Chromium(t)
	bin := agentdBinary(t)

	qdir, qlog := govProject(t, `{"approvers":["operator"],"quorum":2,"reminders":["15s"],"max_extension":"1h"}`)
	setAgentField(t, qdir, "approval_timeout", "20s")
	quorum, _ := startProcess(t, bin, qdir, t.TempDir(), "AGENTD_TEST_LOG="+qlog)
	rdir, rlog := grantProject(t, `{"approvers":["owner","operator","admin"],"allow_remember":true}`)
	remember, _ := startProcess(t, bin, rdir, t.TempDir(), "AGENTD_TEST_LOG="+rlog)

	shots := os.Getenv("AGENTD_WEB_SCREENSHOTS") // as TestWebChatInBrowser: docs/img refreshes the committed ones
	if shots == "" {
		shots = t.TempDir()
	} else if !filepath.IsAbs(shots) {
		shots = filepath.Join(jstest.Root(t), shots)
	}
	cfg, _ := json.Marshal(map[string]string{"chromium": chromium, "screenshots": shots,
		"quorumBase": quorum, "quorumKey": "k-op1", "otherKey": "k-op2",
		"rememberBase": remember, "rememberKey": "k-owner"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=1", "governance.test.mjs")
	cmd.Dir, cmd.Env = pkgs, append(os.Environ(), "AGENTD_GOV_TEST="+string(cfg))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("governance.test.mjs: %v\n%s", err, out)
	}
	// The quorum call ran once, after both approvals; the remembered
	// call ran four times: approved, under the grant, approved again
	// after the revoke, approved in the approvals view.
	if n := execCount(t, qlog, "pay"); n != 1 {
		t.Errorf("the quorum call's pay ran %d times, want 1", n)
	}
	if n := execCount(t, rlog, "pay"); n != 4 {
		t.Errorf("pay ran %d times on the remember server, want 4", n)
	}
}
