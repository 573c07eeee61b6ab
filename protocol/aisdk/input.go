// Package aisdk is agentd's endpoint for the Vercel AI SDK's UI message
// stream (POST /v1/ai-sdk/chat): the body DefaultChatTransport sends in,
// UI message chunks out as "data: <json>" frames that the SDK's
// uiMessageChunkSchema accepts, ending with "data: [DONE]". A parked call
// is a tool part with a tool-approval-request whose approvalId is the
// card's id (protocol.InterruptID: the tool call's id for its first card,
// "<id>.<n>" for card n of a call parked again); the SDK's approval response (the part re-sent in state
// approval-responded) decides it through the engine, and the continuation
// streams into the same assistant message, whose id is the run's. The
// mapping of agentd's events onto chunks is the pure Encoder; Serve runs
// one request.
package aisdk

import (
	"encoding/json"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/agentd-dev/agentd/protocol"
)

// ChatRequest is the body DefaultChatTransport sends: the chat's id, its
// messages (agentd reads only the last one), the trigger and the message
// id. Fields a client adds with the transport's body option are ignored.
type ChatRequest struct {
	ID        string            `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   string            `json:"trigger,omitempty"`
	MessageID string            `json:"messageId,omitempty"`
}

// uiMessage is the part of a UIMessage agentd reads.
type uiMessage struct {
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

type uiPart struct {
	Type     string      `json:"type"`
	Text     string      `json:"text"`
	State    string      `json:"state"`
	Approval *uiApproval `json:"approval"`
}

type uiApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason"`
}

// Limits of a request.
const maxApprovals = 100

// Input returns what the request asks of the conversation: the approval
// responses of its last message when that is the assistant's, or the text
// of its last message when that is the user's. EINVALID for a missing or
// oversized id, an unsupported trigger or a last message that is not a
// UIMessage.
func (r *ChatRequest) Input() (protocol.Input, error) {
	if r.ID == "" || len(r.ID) > protocol.MaxThreadID {
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "id must be 1 to %d bytes", protocol.MaxThreadID)
	}
	switch r.Trigger {
	case "", "submit-message":
	case "regenerate-message":
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "regenerating a message is not supported: the server's history is the truth")
	default:
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, `trigger must be "submit-message"`)
	}
	if len(r.Messages) == 0 {
		return protocol.Input{}, nil
	}
	var m uiMessage
	// The keys agentd reads exactly, as the SDK writes them; the SDK's
	// other keys are ignored.
	if err := strictjson.Unmarshal(r.Messages[len(r.Messages)-1], &m, false); err != nil {
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "messages must be UIMessage objects {id, role, parts}: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	switch m.Role {
	case "user":
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return protocol.Input{Message: b.String()}, nil
	case "assistant":
		return approvals(m.Parts)
	}
	return protocol.Input{}, nil
}

// approvals are the answers of the tool parts in state approval-responded.
func approvals(parts []uiPart) (protocol.Input, error) {
	var in protocol.Input
	for i, p := range parts {
		if p.State != "approval-responded" || !(strings.HasPrefix(p.Type, "tool-") || p.Type == "dynamic-tool") {
			continue
		}
		if p.Approval == nil || p.Approval.ID == "" || p.Approval.Approved == nil {
			return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "parts[%d]: an approval response needs approval.id and approval.approved", i)
		}
		req := agentd.DecisionRequest{Decision: "approve", Reason: p.Approval.Reason, Via: agentd.ViaProtocol}
		if !*p.Approval.Approved {
			req.Decision = "deny"
		}
		in.Answers = append(in.Answers, protocol.Answer{ToolCallID: p.Approval.ID, Request: req})
	}
	if len(in.Answers) > maxApprovals {
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "more than %d approval responses", maxApprovals)
	}
	return in, nil
}
