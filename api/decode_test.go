package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// TestDecodeRefusesBadBodies: every request body goes through one strict
// decoder; each bad body is 400 invalid and changes nothing.
func TestDecodeRefusesBadBodies(t *testing.T) {
	s := newServer(t, nil, api.Config{})
	conv := s.createConversation("")
	call, _ := s.parkedCall("", conv)
	approval := "/v1/tool-calls/" + call + "/approval"
	for _, tc := range []struct{ name, path, body string }{
		{"case-variant duplicate", approval, `{"decision":"approve","DeCiSiOn":"deny"}`},
		{"exact duplicate", approval, `{"decision":"deny","decision":"approve"}`},
		{"duplicate inside arguments", approval, `{"decision":"approve","arguments":{"amount":5,"Amount":500}}`},
		{"malformed", approval, `{"decision":`},
		{"trailing data", approval, `{"decision":"approve"} {"decision":"deny"}`},
		{"unknown field", approval, `{"decision":"approve","approved":true}`},
		{"wrong type", approval, `{"decision":true}`},
		{"not an object", approval, `["approve"]`},
		{"empty", approval, ``},
		{"invalid UTF-8", approval, "{\"decision\":\"approve\",\"reason\":\"\xff\xfe\"}"},
		{"invalid UTF-8 in metadata", "/v1/conversations", "{\"metadata\":{\"note\":\"\xc3\x28\"}}"},
		{"duplicate in metadata", "/v1/conversations", `{"metadata":{"a":{"x":1,"X":2}}}`},
		{"message duplicate", "/v1/conversations/" + conv + "/messages", `{"content":"a","Content":"b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want(t, tc.name, s.do("POST", tc.path, "", tc.body, nil), http.StatusBadRequest, agentd.EINVALID)
		})
	}
	if c := s.toolCall("", call); c.Status != agentd.StatusRequiresConfirmation || len(c.Decisions) != 0 {
		t.Fatalf("after bad bodies the call is %s with %d decisions, want still pending", c.Status, len(c.Decisions))
	}
	if n := s.engine.executed(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	// Valid UTF-8 metadata is stored and given back as JSON.
	r := s.do("POST", "/v1/conversations", "", `{"metadata":{"note":"café ☕"}}`, nil)
	want(t, "valid metadata", r, http.StatusCreated, "")
	if !strings.Contains(r.body, `"note":"café ☕"`) {
		t.Fatalf("metadata not echoed: %s", r.body)
	}
}
