package agentd

import "encoding/json"

// DecisionRequest is a person's decision on a parked call as it arrives
// (SPEC §5 "Approval rules"): Decision is "approve", "edit" or "deny";
// Arguments replace the call's arguments (an edit); ArgumentsSHA256, when
// set, is the digest the person saw.
type DecisionRequest struct {
	Decision        string
	Reason          string
	Arguments       json.RawMessage
	ArgumentsSHA256 string
	// ConversationID, when set, is the conversation the call must be of:
	// a call of another one is not found (a chat protocol's thread names
	// its calls).
	ConversationID string
}

// ConversationDetail is a conversation with its messages and tool calls
// (each call with its decisions), in order.
type ConversationDetail struct {
	Conversation *Conversation
	Messages     []Message
	ToolCalls    []ToolCall
}
