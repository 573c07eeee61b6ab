package agentd

import (
	"encoding/json"
	"time"
)

// DecisionRequest is a person's decision on a parked call as it arrives
// (SPEC §5 "Approval rules"): Decision is "approve", "edit" or "deny";
// Arguments replace the call's arguments (an edit); ArgumentsSHA256, when
// set, is the digest the person saw.
type DecisionRequest struct {
	Decision        string
	Reason          string
	Arguments       json.RawMessage
	ArgumentsSHA256 string
	// CardRevision, when set (1, 2, …), is the card of the call the
	// decision answers (ToolCall.CardRevision). When 0 the card is the
	// first that showed ArgumentsSHA256 (the pending card when none did),
	// or, without a digest, the first card.
	CardRevision int
	// Via is the door the decision came through (ViaSingle when empty).
	Via string
	// ConversationID, when set, is the conversation the call must be of:
	// a call of another one is not found (a chat protocol's thread names
	// its calls).
	ConversationID string
	// Remember, when set on an approval, makes a grant (SPEC §11.2).
	Remember *Remember
}

// ExtendRequest is the body of POST /v1/tool-calls/{id}/extend (SPEC
// §11.3): Extension (JSON "by") is a Go duration ("30m"), Reason an optional note.
type ExtendRequest struct {
	Extension string `json:"by"`
	Reason    string `json:"reason,omitempty"`
}

// CallDecision is a decision on one named call: an item of a chat
// protocol's request, decided all or nothing (loop.Engine.DecideAll).
type CallDecision struct {
	ToolCallID string
	Request    DecisionRequest
}

// ConversationDetail is a conversation with its messages and tool calls
// (each call with its decisions), in order.
type ConversationDetail struct {
	Conversation *Conversation
	Messages     []Message
	ToolCalls    []ToolCall
}

// PendingQuery is a page of GET /v1/approvals: the cursor (a tool call id),
// the page size and the filters (SPEC §5).
type PendingQuery struct {
	Cursor         string
	Limit          int
	ToolName       string
	ServerID       string
	ConversationID string
	// ExpiresBefore, when set, keeps the calls whose deadline is before it.
	ExpiresBefore time.Time
	// Decidable keeps only the calls the principal may decide now (SPEC
	// §11.1: its approval rule covers the key, and the key has not
	// approved it already).
	Decidable bool
}

// AuditQuery is a page of GET /v1/audit: the cursor (an entry id, 0 for
// the first page), the page size and the filters.
type AuditQuery struct {
	Cursor         int64
	Limit          int
	Kind           string
	ToolCallID     string
	ConversationID string
	// Since and Until bound the entries' time: Since <= at < Until.
	Since, Until time.Time
}
