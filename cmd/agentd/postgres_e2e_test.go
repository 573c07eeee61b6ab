package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/internal/pgtest"
)

// TestPostgresServe runs agentd serve on PostgreSQL (--database): a call
// parks, the server stops, a new server on the same database finds the
// parked call, its approval runs it once, and the run finishes. No SQLite
// file is written under --data.
func TestPostgresServe(t *testing.T) {
	u := pgtest.NewDatabase(t, "")
	dir, execLog := writeProject(t, projectOpts{})
	data := t.TempDir()
	t.Setenv("AGENTD_TEST_LOG", execLog)
	base, _, stop := serveWithLog(t, "--project", dir, "--addr", "127.0.0.1:0", "--data", data, "--database", u)

	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay the invoice")
	cr := st.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	st.waitFor("run_waiting", nil)
	st.close()
	stop()

	// A restarted server (AGENTD_DATABASE_URL this time) on the same database.
	t.Setenv("AGENTD_DATABASE_URL", u)
	base, _, _ = serveWithLog(t, "--project", dir, "--addr", "127.0.0.1:0", "--data", data)
	status, got := call(t, http.MethodGet, base+"/v1/tool-calls/"+callID, "", "")
	if status != 200 || got["status"] != "requires_confirmation" {
		t.Fatalf("GET the parked call after a restart: %d %v", status, got)
	}
	st = openStream(t, base, "", conv, cr.ID)
	defer st.close()
	status, dec := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "",
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, cr.Data["arguments_sha256"]))
	if status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve: %d %v", status, dec)
	}
	if fin := st.waitFor("run_finished", nil); fin.Data["status"] != "completed" {
		t.Errorf("run_finished %s", fin.Raw)
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Errorf("pay ran %d times, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(data, "agentd.db")); !os.IsNotExist(err) {
		t.Errorf("agentd.db under --data: %v, want none with --database", err)
	}
}

// TestDatabaseFlagErrors: a --database that is not a postgres:// URL is
// refused with a message that says so.
func TestDatabaseFlagErrors(t *testing.T) {
	dir, _ := writeProject(t, projectOpts{})
	err := run(t.Context(), []string{"serve", "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--database", "mysql://x"},
		os.Getenv, &syncBuffer{}, &syncBuffer{})
	if err == nil || err.Error() != "open store: --database must be a postgres:// URL" {
		t.Errorf("serve --database mysql://x = %v", err)
	}
}
