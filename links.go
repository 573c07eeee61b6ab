package agentd

import "time"

// DecisionLinks are a call's two decision links (SPEC §11.4): POST
// /v1/tool-calls/{id}/links answers them, and a webhook endpoint with
// include_decision_links gets them in llm.tool_call_approval_required.
// Approve and Deny are URLs (package links mints tokens; the API and the
// webhooks put them after the server's base URL and /d/).
type DecisionLinks struct {
	Approve   string    `json:"approve"`
	Deny      string    `json:"deny"`
	ExpiresAt time.Time `json:"expires_at"`
}

// LinkView is what a decision link's page shows: the link's decision
// ("approve" or "deny"), its expiry, and the call as the minting key sees
// it.
type LinkView struct {
	Decision  string
	ExpiresAt time.Time
	Call      *ToolCall
}
