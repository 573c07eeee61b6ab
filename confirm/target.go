package confirm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/agentd-dev/agentd"
)

// errNoTarget is CallTarget's answer for a call that records no request.
var errNoTarget = errors.New("the call records no HTTP request, so nothing was sent")

// CallTarget returns the HTTP request recorded on a classified connection
// call. Classify resolves a connection call's request once, when it
// classifies the call; the loop stores it on the call as ConnectionName,
// Method, Endpoint (the clean path), PathTemplate and Params (the grouped
// arguments, whose query, header and body are the request's), and an
// approved edit replaces them. Executing CallTarget's request sends what
// the card showed and the approver approved, even if the tool's definition
// (an OpenAPI path template, say) changed in between. It reads neither
// Arguments nor any configuration; Intent is "" and Grouped is Params.
//
// It fails on a call that records no request (not a classified connection
// call) or whose Params are not grouped arguments. The request is not
// checked here: the connection's client checks it again before sending.
func CallTarget(c agentd.ToolCall) (*Target, error) {
	if c.ConnectionName == "" || c.Method == "" || c.Endpoint == "" || len(c.Params) == 0 {
		return nil, errNoTarget
	}
	var g struct {
		Query  map[string]json.RawMessage `json:"query"`
		Header map[string]string          `json:"header"`
		Body   json.RawMessage            `json:"body"`
	}
	if err := json.Unmarshal(c.Params, &g); err != nil {
		return nil, fmt.Errorf("the call's recorded request is not valid: %v", err)
	}
	tg := &Target{Connection: c.ConnectionName, Method: c.Method, Path: c.Endpoint, Template: c.PathTemplate,
		Grouped: c.Params}
	for k, raw := range g.Query {
		var one string
		var many []string
		if err := json.Unmarshal(raw, &one); err == nil {
			many = []string{one}
		} else if err := json.Unmarshal(raw, &many); err != nil {
			return nil, fmt.Errorf("the call's recorded request is not valid: query %q is neither a string nor a list of strings", k)
		}
		if tg.Query == nil {
			tg.Query = url.Values{}
		}
		tg.Query[k] = many
	}
	if len(g.Header) > 0 {
		tg.Header = g.Header
	}
	tg.Body = bodyOf(g.Body)
	return tg, nil
}
