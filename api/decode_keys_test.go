package api

import (
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol/aisdk"
)

// TestDecodeKeysMatchExactly: a request body's keys name their fields
// exactly, at any depth, as docs/api.md promises ("unknown fields → 400"):
// a key that encoding/json would take for a field in another case is 400
// invalid naming that key, in the native bodies and in the chat protocols'
// open ones; the same bodies with the fields' own keys decode.
func TestDecodeKeysMatchExactly(t *testing.T) {
	for _, tc := range []struct {
		name, body, key string
		v               func() any
		strict          bool
	}{
		{"approval", `{"DECISION":"approve"}`, "DECISION", func() any { return new(approvalRequest) }, true},
		{"approval, snake case", `{"decision":"approve","Arguments_SHA256":"ab"}`, "Arguments_SHA256", func() any { return new(approvalRequest) }, true},
		{"message", `{"Content":"hi"}`, "Content", func() any { return new(sendMessageRequest) }, true},
		{"bulk item", `{"approvals":[{"tool_call_id":"c","APPROVE":true}]}`, "APPROVE", func() any { return new(bulkApprovalRequest) }, true},
		{"ai sdk", `{"id":"t","Messages":[]}`, "Messages", func() any { return new(aisdk.ChatRequest) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeJSON([]byte(tc.body), tc.v(), false, tc.strict)
			if agentd.ErrorCode(err) != agentd.EINVALID || !strings.Contains(agentd.ErrorMessage(err), `"`+tc.key+`"`) {
				t.Fatalf("%s: %v, want invalid naming %q", tc.body, err, tc.key)
			}
			exact := strings.ReplaceAll(tc.body, `"`+tc.key+`"`, `"`+strings.ToLower(tc.key)+`"`)
			if err := decodeJSON([]byte(exact), tc.v(), false, tc.strict); err != nil {
				t.Fatalf("%s: %v", exact, err)
			}
		})
	}
	var req approvalRequest
	if err := decodeJSON([]byte(`{"decision":"approve","reason":"ok"}`), &req, false, true); err != nil || req.Decision != "approve" || req.Reason != "ok" {
		t.Fatalf("exact keys: %+v, %v", req, err)
	}
}
