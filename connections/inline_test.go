package connections

import (
	"context"
	"encoding/json"
	"strings"
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
		out, preview, err := d.Inline(context.Background(), json.RawMessage(args), p, InlineOptions{Writes: writes})
		if preview {
			t.Errorf("%s: a preview outside a durable tool", args)
		}
		r, _ := out.(Result)
		return r, err
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

// A durable tool's request (SPEC §2.3's durable context): a confirm-tier
// write with intent write answers the preview object and sends nothing;
// confirmed_write is sent with the Idempotency-Key derived from the
// caller's key as the durable path derives it; review and never still
// refuse; a confirm false tool still may not write; reads run.
func TestInlineDurablePreview(t *testing.T) {
	api := newRecorder(t, nil)
	policy := `{"endpoints": {"GET /x": {}, "POST /pay": {"confirm": true, "reason": "Moves money"}, "POST /big": {"confirm": "review"}, "POST /gone": {"confirm": "never"}},
		"defaults": {"read": "auto", "write": "confirm"}}`
	conn := loadConn(t, `{"base_url":"`+api.URL+`"}`, nil, map[string]string{"policy.json": policy})
	d := NewDurable([]*Connection{conn})
	caller := agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: "tool call c1"}
	durable := InlineOptions{Writes: true, Durable: true, IdempotencyKey: "c1#2"}
	do := func(o InlineOptions, args string) (any, bool, error) {
		return d.Inline(context.Background(), json.RawMessage(args), caller, o)
	}

	out, preview, err := do(durable, `{"connection":"api","method":"POST","endpoint":"/pay","data":{"amount":5},"intent":"write"}`)
	p, _ := out.(map[string]Preview)
	if err != nil || !preview || p["preview"].Connection != "api" || p["preview"].Method != "POST" || p["preview"].Endpoint != "/pay" ||
		p["preview"].Tier != agentd.TierConfirm || p["preview"].Reason != "Moves money" || p["preview"].ArgumentsSHA256 == "" ||
		!strings.Contains(p["preview"].Instruction, "confirmed_write") || !strings.Contains(string(p["preview"].Arguments), `"amount":5`) {
		t.Fatalf("a durable confirm-tier write = %+v %v %v, want the preview object", out, preview, err)
	}
	if n := len(api.requests()); n != 0 {
		t.Fatalf("a preview sent %d requests", n)
	}
	if _, _, err := do(InlineOptions{Durable: true}, `{"connection":"api","method":"POST","endpoint":"/pay","intent":"write"}`); agentd.ErrorCode(err) != agentd.EWRITENOTALLOWED {
		t.Errorf("a durable tool with confirm false: %v, want write_not_allowed", err)
	}
	for _, ep := range []string{"/big", "/gone"} {
		for _, intent := range []string{"write", "confirmed_write"} {
			if _, _, err := do(durable, `{"connection":"api","method":"POST","endpoint":"`+ep+`","intent":"`+intent+`"}`); agentd.ErrorCode(err) != agentd.EFORBIDDEN {
				t.Errorf("%s %s: %v, want forbidden", ep, intent, err)
			}
		}
	}
	out, preview, err = do(durable, `{"connection":"api","method":"POST","endpoint":"/pay","data":{"amount":5},"intent":"confirmed_write"}`)
	r, _ := out.(Result)
	want := namespacedKey(caller, "c1#2")
	if err != nil || preview || r.Status != 200 || r.IdempotencyKey != want {
		t.Fatalf("confirmed_write = %+v %v %v, want sent with key %s", out, preview, err, want)
	}
	if _, _, err := do(durable, `{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`); err != nil {
		t.Errorf("a durable read: %v", err)
	}
	reqs := api.requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Idempotency-Key") != want || reqs[1].Method != "GET" {
		t.Fatalf("the server got %+v, want the confirmed write with key %s and the read", reqs, want)
	}
}

// A delegated call's request through its context endpoint is classified
// as delegated: with delegations.escalateConfirm a confirm-tier write is
// review, refused (403) for a tool allowed to write, inline and durable
// alike, and nothing is sent; a read and an auto write still run; the
// same write of a call that is not delegated is sent.
func TestInlineDelegated(t *testing.T) {
	api := newRecorder(t, nil)
	policy := `{"endpoints": {"GET /x": {}, "POST /pay": {"confirm": true}, "POST /note": {"confirm": false}},
		"defaults": {"read": "auto", "write": "confirm"}, "delegations": {"escalateConfirm": true}}`
	conn := loadConn(t, `{"base_url":"`+api.URL+`"}`, nil, map[string]string{"policy.json": policy})
	d := NewDurable([]*Connection{conn})
	caller := agentd.Principal{TenantID: "t1", ProjectID: "p1", KeyID: "tool call c1"}
	pay := `{"connection":"api","method":"POST","endpoint":"/pay","data":{"n":1},"intent":"confirmed_write"}`
	for _, tc := range []struct {
		args string
		o    InlineOptions
		code string
	}{
		{pay, InlineOptions{Writes: true, Delegated: true}, agentd.EFORBIDDEN},
		{pay, InlineOptions{Writes: true, Durable: true, Delegated: true}, agentd.EFORBIDDEN},
		{`{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`, InlineOptions{Writes: true, Delegated: true}, ""},
		{`{"connection":"api","method":"POST","endpoint":"/note","intent":"write"}`, InlineOptions{Writes: true, Delegated: true}, ""},
		{pay, InlineOptions{Writes: true}, ""},
	} {
		out, preview, err := d.Inline(context.Background(), json.RawMessage(tc.args), caller, tc.o)
		if agentd.ErrorCode(err) != tc.code || preview {
			t.Errorf("%s %+v: %v %v %v, want %q", tc.args, tc.o, out, preview, err, tc.code)
		}
		if err != nil && !strings.Contains(err.Error(), "review") {
			t.Errorf("the refusal does not say the write needs review: %v", err)
		}
	}
	reqs := api.requests()
	if len(reqs) != 3 || reqs[0].Path != "/x" || reqs[1].Path != "/note" || reqs[2].Path != "/pay" {
		t.Fatalf("the server got %d requests, want the read, the auto write and the undelegated write", len(reqs))
	}
}
