// Package agui is agentd's AG-UI endpoint (POST /v1/ag-ui): a RunAgentInput
// in, AG-UI events out as "data: <json>" frames that the @ag-ui/core
// schemas accept. Parked calls end a run with the interrupt outcome, one
// interrupt per parked call, whose id is the card's (protocol.InterruptID:
// the tool call's id for its first card, "<id>.<n>" for card n); a later run's
// resume decides them through the engine. The mapping of agentd's events
// onto AG-UI events is the pure Encoder; Serve runs one request.
package agui

import (
	"encoding/json"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/agentd-dev/agentd/protocol"
)

// RunAgentInput is the body of POST /v1/ag-ui, as @ag-ui/core defines it.
// agentd reads threadId, runId, the trailing user message of messages and
// resume; the other fields are accepted and ignored (the server holds the
// state, the tools and the context).
type RunAgentInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ParentRunID     string            `json:"parentRunId,omitempty"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	State           json.RawMessage   `json:"state,omitempty"`
	Messages        []json.RawMessage `json:"messages"`
	Tools           json.RawMessage   `json:"tools,omitempty"`
	Context         json.RawMessage   `json:"context,omitempty"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry     `json:"resume,omitempty"`
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// ResumePayload is the payload of a resolved interrupt, as the interrupt's
// responseSchema describes it.
type ResumePayload struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	// EditedArgs replace the call's arguments, where the call allows edit.
	EditedArgs json.RawMessage `json:"editedArgs,omitempty"`
	// ArgumentsSHA256, when set, is the digest of the arguments the person
	// saw (the interrupt's metadata carries it).
	ArgumentsSHA256 string `json:"argumentsSha256,omitempty"`
}

// Limits of a request.
const (
	maxRunID   = 256
	maxResumes = 100
)

// Input returns what the request asks of the conversation: its answers
// when it resumes, else its trailing user message. EINVALID for a missing
// or oversized threadId or runId, a malformed resume or a trailing user
// message whose content is neither a string nor text parts.
func (in *RunAgentInput) Input() (protocol.Input, error) {
	if in.RunID == "" || len(in.RunID) > maxRunID {
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "runId must be 1 to %d bytes", maxRunID)
	}
	if in.ThreadID == "" || len(in.ThreadID) > protocol.MaxThreadID {
		return protocol.Input{}, agentd.Errorf(agentd.EINVALID, "threadId must be 1 to %d bytes", protocol.MaxThreadID)
	}
	if len(in.Resume) > 0 {
		ds, err := answers(in.Resume)
		return protocol.Input{Answers: ds}, err
	}
	if len(in.Messages) == 0 {
		return protocol.Input{}, nil
	}
	text, err := userText(in.Messages[len(in.Messages)-1])
	return protocol.Input{Message: text}, err
}

// answers are the resume entries as answers to cards.
func answers(entries []ResumeEntry) ([]protocol.Answer, error) {
	if len(entries) > maxResumes {
		return nil, agentd.Errorf(agentd.EINVALID, "resume has more than %d entries", maxResumes)
	}
	seen := map[string]bool{}
	out := make([]protocol.Answer, 0, len(entries))
	for i, e := range entries {
		if e.InterruptID == "" {
			return nil, agentd.Errorf(agentd.EINVALID, "resume[%d].interruptId is required", i)
		}
		if seen[e.InterruptID] {
			return nil, agentd.Errorf(agentd.EINVALID, "resume answers interrupt %q twice", agentd.TruncateUTF8(e.InterruptID, 80))
		}
		seen[e.InterruptID] = true
		var p ResumePayload
		if len(e.Payload) > 0 && string(e.Payload) != "null" {
			// The responseSchema's keys exactly (additionalProperties: false).
			if err := strictjson.Unmarshal(e.Payload, &p, true); err != nil {
				return nil, agentd.Errorf(agentd.EINVALID, "resume[%d].payload must be {approved, reason?, editedArgs?, argumentsSha256?}: %s", i, strings.TrimPrefix(err.Error(), "json: "))
			}
		}
		req := agentd.DecisionRequest{Reason: p.Reason, ArgumentsSHA256: p.ArgumentsSHA256, Via: agentd.ViaProtocol}
		switch {
		case e.Status == "cancelled":
			req.Decision = "deny"
			if req.Reason == "" {
				req.Reason = "cancelled"
			}
		case e.Status != "resolved":
			return nil, agentd.Errorf(agentd.EINVALID, `resume[%d].status must be "resolved" or "cancelled"`, i)
		case p.Approved == nil:
			return nil, agentd.Errorf(agentd.EINVALID, "resume[%d].payload.approved (a boolean) is required", i)
		case !*p.Approved:
			req.Decision = "deny"
		case len(p.EditedArgs) > 0 && string(p.EditedArgs) != "null":
			req.Decision, req.Arguments = "edit", p.EditedArgs
		default:
			req.Decision = "approve"
		}
		if req.Decision == "deny" && len(p.EditedArgs) > 0 && string(p.EditedArgs) != "null" {
			return nil, agentd.Errorf(agentd.EINVALID, "resume[%d]: editedArgs may only come with an approval", i)
		}
		out = append(out, protocol.Answer{ToolCallID: e.InterruptID, Request: req})
	}
	return out, nil
}

// message is the part of an AG-UI message agentd reads.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// userText is the text of raw when it is a user message ("" for any other
// role): its string content, or its text parts joined.
func userText(raw json.RawMessage) (string, error) {
	var m message
	if err := strictjson.Unmarshal(raw, &m, false); err != nil {
		return "", agentd.Errorf(agentd.EINVALID, "messages must be AG-UI message objects")
	}
	if m.Role != "user" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := strictjson.Unmarshal(m.Content, &parts, false); err != nil {
		return "", agentd.Errorf(agentd.EINVALID, "the user message's content must be a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}
