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
	}
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
