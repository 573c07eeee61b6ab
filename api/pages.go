package api

import (
	"encoding/json"
	"fmt"

	"github.com/agentd-dev/agentd"
)

// listedCall is a call as a GET /v1/approvals page lists it: its values
// over agentd.LargeValueBytes left out and named in omitted.
type listedCall struct {
	callFields
	CardRevision int            `json:"card_revision,omitempty"`
	Omitted      agentd.Omitted `json:"omitted,omitempty"`
}

// callFields is agentd.ToolCall without its MarshalJSON, so that a
// listedCall's JSON is the call's fields and its own.
type callFields agentd.ToolCall

// pageOverhead is what a page's JSON holds besides its calls: the object,
// the field names and a next_cursor (a call id).
const pageOverhead = 128

// boundPage summarises calls (agentd.ToolCall.Summarized) and keeps the
// first of them whose JSON fits in maxBytes with the page around them —
// at least one, so that the list always moves on — and returns them,
// encoded, with the next cursor: the last kept call's id when the bound
// cut the page, next otherwise.
func boundPage(calls []agentd.ToolCall, next string, maxBytes int) ([]json.RawMessage, string, error) {
	out := make([]json.RawMessage, 0, len(calls))
	size := pageOverhead
	for i, c := range calls {
		listed, om := c.Summarized()
		b, err := json.Marshal(listedCall{callFields: callFields(listed), CardRevision: listed.ShownCardRevision(), Omitted: om})
		if err != nil {
			return nil, "", fmt.Errorf("list approvals: %w", err)
		}
		if len(out) > 0 && size+len(b)+1 > maxBytes {
			return out, calls[i-1].ID, nil
		}
		out = append(out, b)
		size += len(b) + 1
	}
	return out, next, nil
}
