package main

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// dirBytes is the size of every file under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	must(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	}))
	return n
}

// largeContent is about 0.8 MB of text in lines, as a real write would be.
var largeContent = strings.Repeat(strings.Repeat("lorem ipsum ", 6)+"dolor\n", 10_400)

// A 0.8 MB write_file is stored once: its confirmation_required, its
// tool_call_started and its four webhook bodies name the arguments and the
// diff by size and digest (the whole call is GET /v1/tool-calls/{id})
// instead of copying them, every body stays valid under its schema, and
// the approval writes exactly the content. The data folder's size after
// the run is logged (docs/performance.md has the figure).
func TestLargeWriteStoredOnce(t *testing.T) {
	dir, _ := writeProject(t, projectOpts{})
	ws := filepath.Join(dir, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	args, err := json.Marshal(map[string]string{"path": "big.txt", "content": largeContent})
	must(t, err)
	writeAgent(t, dir, `[
 {"when":{"user":"^write big"},"reply":{"tool_calls":[{"name":"write_file","arguments":`+string(args)+`}]}},
 {"when":{"tool_result":"write_file"},"reply":{"text":"write {{status}}"}}
]`, map[string]any{"workspace": "ws"})
	rc := webhooktest.NewReceiver(t)
	withWebhooks(t, dir, map[string]any{"id": "ops", "url": rc.URL, "secret_env": "OPS_WEBHOOK_SECRET"})
	data := t.TempDir()
	base, stop := startServer(t, dir, data, map[string]string{"OPS_WEBHOOK_SECRET": newSecret(t)})

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "write big")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	if status, page := callRaw(t, http.MethodGet, base+"/v1/approvals?status=pending", "", ""); status != http.StatusOK ||
		len(page) > agentd.LargeValueBytes || !strings.Contains(string(page), `"omitted"`) {
		t.Errorf("the pending list: %d, %d bytes, want the call listed by size and digest", status, len(page))
	} else {
		t.Logf("GET /v1/approvals with the write parked: %d bytes", len(page))
	}
	approveCall(t, base, callID, str(cr.Data, "arguments_sha256"))
	started := st.waitFor("tool_call_started", nil)
	st.waitFor("run_finished", nil)
	reqs := rc.WaitFor(t, waitLimit, "the four events of the call", func(r []webhooktest.Request) bool {
		return len(r) >= 4
	})
	status, whole := callRaw(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	stop()
	t.Logf("data folder after one %d-byte write_file, approved and run, with one webhook endpoint: %d bytes (%.1f MiB)",
		len(largeContent), dirBytes(t, data), float64(dirBytes(t, data))/(1<<20))

	if b, _ := os.ReadFile(filepath.Join(ws, "big.txt")); string(b) != largeContent {
		t.Fatalf("written %d bytes, want the approved %d", len(b), len(largeContent))
	}
	var c agentd.ToolCall
	if err := json.Unmarshal(whole, &c); status != http.StatusOK || err != nil || len(c.Arguments) < len(largeContent) || len(c.Diff) < len(largeContent) {
		t.Fatalf("the whole call: %d, %d bytes of arguments, %d of diff", status, len(c.Arguments), len(c.Diff))
	}
	for _, ev := range []sseEvent{cr, started} {
		if len(ev.Raw) > agentd.LargeValueBytes {
			t.Errorf("%s is %d bytes: it copies the large arguments", ev.Type, len(ev.Raw))
		}
	}
	var om struct {
		Omitted map[string]agentd.OmittedValue `json:"omitted"`
	}
	must(t, json.Unmarshal([]byte(cr.Raw), &om))
	if a := om.Omitted["arguments"]; a.Bytes != len(c.Arguments) || a.SHA256 != c.ArgumentsSHA256 {
		t.Errorf("confirmation_required omitted arguments %+v, the call has %d bytes, digest %s", a, len(c.Arguments), c.ArgumentsSHA256)
	}
	if d := om.Omitted["diff"]; d.Bytes != len(c.Diff) || d.SHA256 != agentd.TextSHA256(c.Diff) {
		t.Errorf("confirmation_required omitted diff %+v, the call's diff has %d bytes", d, len(c.Diff))
	}
	for _, r := range reqs {
		webhooktest.Validate(t, r.Body)
		if len(r.Body) > agentd.LargeValueBytes {
			t.Errorf("%s body is %d bytes: it copies the large arguments", r.EventName(), len(r.Body))
		}
		p := bodyOf(t, r)
		if p.ToolCall.ID != callID || p.ToolCall.ArgumentsOmitted == nil || p.ToolCall.ArgumentsOmitted.SHA256 != c.ArgumentsSHA256 {
			t.Errorf("%s: tool_call %+v, want the call's arguments by size and digest", r.EventName(), p.ToolCall)
		}
	}
	if n := len(webhooktest.WithEvent(reqs, webhook.EventApprovalRequired)); n != 1 {
		t.Errorf("%d approval_required bodies", n)
	}
}
