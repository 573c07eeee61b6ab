package connections

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentd-dev/agentd"
)

// A command tool's request through its context endpoint: with writes
// false only reads are sent; with writes true a confirm-tier write is sent
// without a preview; review and never refuse either way; a tenant outside
// tenant_ids finds no connection; nothing refused reaches the server.
func TestInline(t *testing.T) {
	api := newRecorder(t, nil)
	policy := `{"endpoints": {"GET /x": {}, "POST /pay": {"confirm": true}, "POST /big": {"confirm": "review"}, "GET /secret": {"confirm": "never"}},
		"defaults": {"read": "auto", "write": "confirm"}}`
	conn := loadConn(t, `{"base_url":"`+api.URL+`","tenant_ids":["t1"]}`, nil, map[string]string{"policy.json": policy})
	d := NewDurable([]*Connection{conn})
	t1 := agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: "tool call c1"}
	do := func(p agentd.Principal, writes bool, args string) (Result, error) {
		return d.Inline(context.Background(), json.RawMessage(args), p, writes)
	}
	read := `{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`
	pay := `{"connection":"api","method":"POST","endpoint":"/pay","data":{"n":1},"intent":"write"}`
	for _, tc := range []struct {
		args   string
		writes bool
		code   string
	}{
		{read, false, ""},
		{pay, false, agentd.EWRITENOTALLOWED},
		{`{"connection":"api","method":"POST","endpoint":"/pay","intent":"confirmed_write"}`, false, agentd.EWRITENOTALLOWED},
		{`{"connection":"api","method":"POST","endpoint":"/pay","intent":"read"}`, true, agentd.EFORBIDDEN}, // a write declared as a read
		{`{"connection":"api","method":"POST","endpoint":"/big","intent":"write"}`, true, agentd.EFORBIDDEN},
		{`{"connection":"api","method":"GET","endpoint":"/secret","intent":"read"}`, true, agentd.EFORBIDDEN},
		{`{"connection":"nope","method":"GET","endpoint":"/x","intent":"read"}`, true, agentd.ENOTFOUND},
		{`{"connection":"api","method":"GET","endpoint":"/x"}`, true, agentd.EINVALID},
		{pay, true, ""},
	} {
		r, err := do(t1, tc.writes, tc.args)
		if agentd.ErrorCode(err) != tc.code || (err == nil && r.Status != 200) {
			t.Errorf("%s (writes %v): %+v %v, want %q", tc.args, tc.writes, r, err, tc.code)
		}
	}
	if _, err := do(agentd.Principal{TenantID: "t2", ProjectID: "p1"}, true, read); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Errorf("tenant t2: %v", err)
	}
	reqs := api.requests()
	if len(reqs) != 2 || reqs[0].Method != "GET" || reqs[1].Method != "POST" || reqs[1].Header.Get("Idempotency-Key") == "" {
		t.Fatalf("the server got %+v, want the read and the allowed write", reqs)
	}
}
