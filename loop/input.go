package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
)

// InputsServerID is the server_id of the ask_user tool (SPEC §12.1).
const InputsServerID = "inputs"

// AskUserTool is the built-in tool by which the model asks a person for
// input (agent.json "inputs": {"ask_user": true}).
const AskUserTool = "ask_user"

// askUserParams is ask_user's JSON Schema as the model sees it.
const askUserParams = `{"type":"object","properties":{` +
	`"message":{"type":"string","minLength":1,"maxLength":4096,"description":"The question, shown to the person as text."},` +
	`"schema":{"type":"object","description":"The form of the answer: a flat JSON Schema {\"type\":\"object\",\"properties\":{…},\"required\":[…]} whose properties are strings (minLength, maxLength, format email/uri/date/date-time), numbers, integers (minimum, maximum), booleans, or enums (enum, or oneOf of {const, title}; arrays of them for several choices). Omitted: one required string \"answer\"."}},` +
	`"required":["message"],"additionalProperties":false}`

// InputSource is the ask_user tool as a tool source (server_id "inputs",
// tier auto), for the registry to list beside the others when agent.json
// has "inputs": {"ask_user": true}. Its calls never run: the engine parks
// each as requires_input with its input request, and the answer is the
// call's result. Execute outside the loop refuses.
func InputSource() toolset.Source {
	return inputSource{def: toolset.Tool{
		Spec: agentd.ToolSpec{Name: AskUserTool, Parameters: json.RawMessage(askUserParams),
			Description: "Ask the person you are talking to for information and wait for their answer, given as a form. " +
				"The result is {\"action\":\"accept\",\"content\":{…}}, or {\"action\":\"decline\"} or {\"action\":\"cancel\"} when they chose not to answer."},
		Confirm:     &confirm.Tool{Name: AskUserTool, ServerID: InputsServerID, Validate: askUserArgs},
		LLMCallable: true,
		Origin:      "agent.json inputs",
	}}
}

type inputSource struct{ def toolset.Tool }

func (s inputSource) ID() string            { return InputsServerID }
func (s inputSource) Tools() []toolset.Tool { return []toolset.Tool{s.def} }
func (s inputSource) Execute(context.Context, agentd.ToolCall) (json.RawMessage, error) {
	return nil, fmt.Errorf("the ask_user tool runs only in the agent loop")
}

// askArgs are ask_user's arguments: a message and, optionally, a form
// schema (SPEC §12.1) — nothing else, so no url can be asked for.
type askArgs struct {
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema,omitempty"`
}

// askUserArgs validates ask_user's arguments: a message of 1 to 4096
// bytes, and a schema that is a form schema (SPEC §12.2); a call with
// another is refused before any card, naming the keyword or property.
func askUserArgs(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var a askArgs
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("ask_user takes {\"message\", \"schema\"?}: %v", err)
	}
	switch {
	case a.Message == "":
		return nil, fmt.Errorf("ask_user: message is required")
	case len(a.Message) > agentd.MaxInputMessageBytes:
		return nil, fmt.Errorf("ask_user: message is %d bytes, over %d", len(a.Message), agentd.MaxInputMessageBytes)
	}
	if len(a.Schema) > 0 {
		if err := agentd.CheckFormSchema(a.Schema); err != nil {
			return nil, fmt.Errorf("ask_user: schema is not a form schema: %v", err)
		}
	}
	return json.Marshal(a)
}

// ask parks an ask_user call c as requires_input with its input request
// (created with the step, StepRecord.Inputs) and returns the call and
// its input_required event.
func (e *runner) ask(run *agentd.Run, c *agentd.ToolCall, now time.Time) (*agentd.ToolCall, []agentd.EventDraft) {
	var a askArgs
	_ = json.Unmarshal(c.Arguments, &a) // validated by askUserArgs
	if len(a.Schema) == 0 {
		a.Schema = agentd.DefaultFormSchema
	}
	rule := e.agent.Inputs
	in := agentd.Input{ID: agentd.NewID(agentd.PrefixInput), TenantID: run.TenantID, ProjectID: run.ProjectID,
		ConversationID: run.ConversationID, RunID: run.ID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID,
		Status: agentd.InputPending, Source: agentd.InputSourceAskUser, Key: AskUserTool, Round: 1, Mode: agentd.InputModeForm,
		Message: a.Message, Schema: a.Schema, Answerers: rule.AnswerersOf(),
		ExpiresAt: now.Add(rule.TimeoutOf()).UTC(), CreatedAt: now.UTC()}
	c.Status, c.Inputs = agentd.StatusRequiresInput, []agentd.Input{in}
	return c, []agentd.EventDraft{e.event(run.ConversationID, &agentd.InputRequiredPayload{
		InputID: in.ID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID, RunID: run.ID, Source: in.Source,
		Key: in.Key, Round: in.Round, Mode: in.Mode, Message: in.Message, Schema: in.Schema, ExpiresAt: in.ExpiresAt,
		Answerers: in.Answerers,
	})}
}

// asks reports whether c is a call of the ask_user tool.
func asks(c *agentd.ToolCall) bool { return c.ServerID == InputsServerID && c.Name == AskUserTool }

// waitingInputs are the ids of the pending inputs the calls of asking
// wait on (run_waiting's inputs): the step's own when the driver holds
// them, else read from the store (a run recovered before it was marked
// waiting).
func (e *runner) waitingInputs(ctx context.Context, asking []agentd.ToolCall) ([]string, error) {
	var ids []string
	for _, c := range asking {
		ins := c.Inputs
		if len(ins) == 0 {
			var err error
			if ins, err = e.store.Inputs(ctx, agentd.InputFilter{TenantID: c.TenantID, ProjectID: c.ProjectID,
				ToolCallID: c.ID, Status: agentd.InputPending}); err != nil {
				return ids, err
			}
		}
		for _, in := range ins {
			if in.Status == agentd.InputPending {
				ids = append(ids, in.ID)
			}
		}
	}
	return ids, nil
}

// inputsOf are the input requests of a step's calls, for RecordStep.
func inputsOf(calls []*agentd.ToolCall) []*agentd.Input {
	var out []*agentd.Input
	for _, c := range calls {
		for i := range c.Inputs {
			out = append(out, &c.Inputs[i])
		}
	}
	return out
}
