package agentd

import (
	"encoding/json"
	"fmt"
)

// CardArguments are what a person approves of a parked call: the grouped
// arguments {path, query, header, body} of a connection call, the
// arguments of other tools.
func (c *ToolCall) CardArguments() json.RawMessage {
	if len(c.Params) > 0 {
		return c.Params
	}
	return c.Arguments
}

// Card is the display summary of a parked call (confirmation_required's
// card; the chat protocols' approval prompts read the same).
func (c *ToolCall) Card() Card {
	title := fmt.Sprintf("Run %s?", c.Name)
	if c.ConnectionName != "" {
		title = fmt.Sprintf("%s %s on %s?", c.Method, c.Endpoint, c.ConnectionName)
	}
	return Card{
		Title:          title,
		Summary:        c.Reason,
		ConnectionName: nullIfEmpty(c.ConnectionName),
		Method:         c.Method,
		Endpoint:       c.Endpoint,
		PathTemplate:   nullIfEmpty(c.PathTemplate),
		Diff:           diffJSON(c.Diff),
		Arguments:      c.CardArguments(),
		Approval:       c.cardApproval(),
	}
}

// cardApproval is the card's approval block: the rule the call was parked
// with and its approvals so far; nil for a call without a rule.
func (c *ToolCall) cardApproval() *CardApproval {
	if c.Approval == nil {
		return nil
	}
	return &CardApproval{Approvers: c.Approval.Approvers, Quorum: c.Approval.Quorum, Approvals: len(c.Approvals),
		RequesterMayApprove: c.Approval.RequesterMayApprove}
}

// Announcement is what confirmation_required carries of c: the card's
// arguments (its params) and the card, with each of c's values over
// LargeValueBytes left out (null) and named in omitted, so that the event
// does not copy what the call holds (GET /v1/tool-calls/{id} has it all).
// For a call without such values it is CardArguments, Card and nil.
func (c *ToolCall) Announcement() (params json.RawMessage, card Card, omitted Omitted) {
	s, omitted := c.Summarized()
	params = s.Params
	if len(c.Params) == 0 {
		params = s.Arguments
	}
	card = s.Card()
	card.Arguments = params
	return params, card, omitted
}

// diffJSON is a card's diff: a JSON string, or null when none applies.
func diffJSON(diff string) json.RawMessage {
	if diff == "" {
		return nil
	}
	b, _ := json.Marshal(diff)
	return b
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CardRevision is the number of the call's card that a decision answers now
// (DecisionRequest.CardRevision): a parked call's first card is 1, and each
// time the call is parked again (the loop's re-park of an approved call)
// its new card is one more — every earlier card was answered by one
// decision. For a call no longer parked it is the card its last decision
// answered (0 for a call that was never parked).
func (c *ToolCall) CardRevision() int {
	if c.Status == StatusRequiresConfirmation {
		return len(c.Decisions) + 1
	}
	return len(c.Decisions)
}

// ShownCardRevision is CardRevision as cards and the tool call object
// carry it (card_revision): set for a call that was parked again (2, 3,
// …), 0 otherwise, so that a first card reads as it always did.
func (c *ToolCall) ShownCardRevision() int {
	if r := c.CardRevision(); r > 1 {
		return r
	}
	return 0
}

// MarshalJSON writes the call's fields and, for a call that was parked
// again, its card_revision (ShownCardRevision).
func (c ToolCall) MarshalJSON() ([]byte, error) {
	type plain ToolCall
	return json.Marshal(struct {
		plain
		CardRevision int `json:"card_revision,omitempty"`
	}{plain(c), c.ShownCardRevision()})
}
