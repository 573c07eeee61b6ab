package project

import (
	"encoding/json"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
)

// inputsFile is agent.json "inputs" (SPEC §12.3) as far as it is built:
// ask_user, timeout and answerers.
type inputsFile struct {
	AskUser   bool     `json:"ask_user"`
	Timeout   *string  `json:"timeout"`
	Answerers []string `json:"answerers"`
}

// parseInputs parses agent.json "inputs"; nil when absent.
func parseInputs(raw json.RawMessage) (*agentd.InputRule, error) {
	if strictjson.IsNull(raw) {
		return nil, nil
	}
	var f inputsFile
	if err := strictjson.DecodeStrict(raw, &f, "inputs"); err != nil {
		return nil, err
	}
	r := &agentd.InputRule{AskUser: f.AskUser, Answerers: f.Answerers}
	if f.Timeout != nil {
		d, err := time.ParseDuration(*f.Timeout)
		if err != nil || d <= 0 {
			return nil, strictjson.FieldErr("inputs.timeout", "must be a positive Go duration such as \"30m\", got %q", *f.Timeout)
		}
		r.Timeout = d
	}
	if f.Answerers != nil {
		if err := (agentd.ApprovalRule{Approvers: f.Answerers, Quorum: 1}).Check(); err != nil {
			return nil, strictjson.FieldErr("inputs.answerers", "%v", err)
		}
	}
	return r, nil
}
