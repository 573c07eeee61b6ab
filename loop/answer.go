package loop

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
)

// answerer is the part of the engine that answers input requests (SPEC
// §12.3): who may answer, the content checked against the input's form
// schema, and the answer committed once with its call's result — then the
// run's driver is woken, and the model reads the answer as the call's
// result. It holds no state: every answer is read from the store and
// committed as one conditional update, so concurrent answers resolve in
// the database.
type answerer struct {
	*core
	store inputStore
	drv   *drivers
}

// input returns an input of a conversation p reaches, with the
// conversation; ENOTFOUND otherwise (another tenant's input is, for p, one
// that does not exist).
func (e *answerer) input(ctx context.Context, p agentd.Principal, id string) (*agentd.Input, *agentd.Conversation, error) {
	if err := agentd.CheckID(agentd.PrefixInput, "input id", id); err != nil {
		return nil, nil, err
	}
	in, err := e.store.Input(ctx, id)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		return nil, nil, notFound("input")
	} else if err != nil {
		return nil, nil, err
	}
	if p.TenantID != in.TenantID || p.ProjectID != in.ProjectID {
		return nil, nil, notFound("input")
	}
	conv, err := e.reach(ctx, p, in.ConversationID, "input")
	if err != nil {
		return nil, nil, err
	}
	return in, conv, nil
}

// checkAnswer checks what can be checked of an answer without its input:
// the action, and content only with accept.
func checkAnswer(a agentd.InputAnswer) error {
	switch a.Action {
	case agentd.InputAccept:
	case agentd.InputDecline, agentd.InputCancel:
		if len(a.Content) > 0 {
			return agentd.Errorf(agentd.EINVALID, "content goes only with action accept, not %s", a.Action)
		}
	default:
		return agentd.Errorf(agentd.EINVALID, "action must be accept, decline or cancel, got %q", agentd.TruncateUTF8(a.Action, 40))
	}
	return nil
}

// answer is Engine.AnswerInput.
func (e *answerer) answer(ctx context.Context, p agentd.Principal, id string, a agentd.InputAnswer) (*agentd.Input, error) {
	if err := checkAnswer(a); err != nil {
		return nil, err
	}
	in, conv, err := e.input(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := agentd.MayAnswer(in.Answerers, p, conv); err != nil {
		return nil, err
	}
	content, err := answerContent(in, a)
	if err != nil {
		return nil, err
	}
	if in.Status != agentd.InputPending {
		return settled(in, a.Action, content)
	}
	now := e.clock.Now()
	if !now.Before(in.ExpiresAt) {
		return nil, e.expire(ctx, in, now)
	}
	r := agentd.InputResolution{InputID: in.ID, Status: agentd.InputAnswered, Action: a.Action, Content: content,
		AnsweredBy: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Via: cmp.Or(a.Via, agentd.ViaSingle), At: now,
		CallStatus: agentd.StatusCompleted, Result: answerResult(a.Action, content)}
	stored, err := e.resolve(ctx, in, r)
	if agentd.ErrorCode(err) == agentd.ECONFLICT && stored != nil {
		return settled(stored, a.Action, content) // another answer won the race
	} else if err != nil {
		return nil, err
	}
	e.log.Info().Str("input_id", in.ID).Str("tool_call_id", in.ToolCallID).Str("run_id", in.RunID).
		Str("conversation_id", in.ConversationID).Str("action", a.Action).Str("via", r.Via).Str("key_id", r.AnsweredBy).Msg("input answered")
	return stored, nil
}

// answerContent is an answer's content as stored: for an accepted form,
// the content checked against the schema with its defaults filled in
// (EINVALIDINPUT naming every bad field); nil otherwise.
func answerContent(in *agentd.Input, a agentd.InputAnswer) (json.RawMessage, error) {
	if a.Action != agentd.InputAccept {
		return nil, nil
	}
	if in.Mode != agentd.InputModeForm {
		if len(a.Content) > 0 {
			return nil, agentd.Errorf(agentd.EINVALID, "a %s input's answer has no content", in.Mode)
		}
		return nil, nil
	}
	filled, bad, err := agentd.CheckContent(in.Schema, a.Content)
	if err != nil {
		return nil, fmt.Errorf("input %s: stored schema: %w", in.ID, err)
	}
	if len(bad) > 0 {
		return nil, &agentd.Error{Code: agentd.EINVALIDINPUT, Fields: bad,
			Message: fmt.Sprintf("content.%s %s", bad[0].Field, bad[0].Message)}
	}
	return filled, nil
}

// answerResult is the result an ask_user call completes with (SPEC
// §12.1), which the model reads.
func answerResult(action string, content json.RawMessage) json.RawMessage {
	out, _ := json.Marshal(struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content,omitempty"`
	}{action, content})
	return out
}

// settled answers an answer to an input that is no longer pending: the
// same answer again is the input (200); anything else is refused, saying
// what became of it.
func settled(in *agentd.Input, action string, content json.RawMessage) (*agentd.Input, error) {
	switch in.Status {
	case agentd.InputAnswered:
		if in.Action == action && sameJSON(in.Content, content) {
			return in, nil
		}
		return nil, agentd.Errorf(agentd.ECONFLICT, "the input was answered already: %s by %s", in.Action, in.AnsweredBy)
	case agentd.InputExpired:
		return nil, agentd.Errorf(agentd.EEXPIRED, "the input expired at %s; nobody answered in time", in.ExpiresAt.Format(time.RFC3339))
	}
	return nil, agentd.Errorf(agentd.ECONFLICT, "the input is %s (%s)", in.Status, cmp.Or(in.Reason, "no reason"))
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, errA := agentd.CanonicalJSON(a)
	cb, errB := agentd.CanonicalJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

// expire ends an input whose deadline passed when an answer came
// (expireInput) and refuses the answer with EEXPIRED.
func (e *answerer) expire(ctx context.Context, in *agentd.Input, now time.Time) error {
	if err := e.expireInput(ctx, in, now); err != nil && agentd.ErrorCode(err) != agentd.ECONFLICT {
		return err
	}
	return agentd.Errorf(agentd.EEXPIRED, "the input expired at %s; nobody answered in time", in.ExpiresAt.Format(time.RFC3339))
}

// expireInput ends an input whose deadline passed (SPEC §12.3): the input
// expired (input_resolved), its call expired (the model is told nobody
// answered in time), and the run woken. ECONFLICT when it was resolved
// meanwhile.
func (e *answerer) expireInput(ctx context.Context, in *agentd.Input, now time.Time) error {
	r := agentd.InputResolution{InputID: in.ID, Status: agentd.InputExpired, Via: agentd.ViaDeadline,
		Reason: "nobody answered in time", At: now, CallStatus: agentd.StatusExpired}
	_, err := e.resolve(ctx, in, r)
	if err == nil {
		e.log.Info().Str("input_id", in.ID).Str("tool_call_id", in.ToolCallID).Str("run_id", in.RunID).Msg("input expired")
	}
	return err
}

// expireDue expires every pending input whose deadline has passed on the
// engine's clock, a page at a time (as the timers expire parked calls),
// and returns how many it expired and the earliest deadline left.
func (e *answerer) expireDue(ctx context.Context) (int, time.Time, error) {
	now := e.clock.Now()
	n := 0
	for {
		due, err := e.store.DueInputs(ctx, now, expirePage)
		if err != nil {
			return n, time.Time{}, err
		}
		expired := 0
		for _, in := range due {
			if err := e.expireInput(ctx, &in, now); err == nil {
				expired++
			} else if agentd.ErrorCode(err) != agentd.ECONFLICT {
				return n + expired, time.Time{}, err
			}
		}
		n += expired
		if len(due) < expirePage || expired == 0 {
			break
		}
	}
	next, err := e.store.NextInputDeadline(ctx)
	return n, next, err
}

// resolve commits r with input_resolved and the call's tool_call_result,
// then wakes the run's driver.
func (e *answerer) resolve(ctx context.Context, in *agentd.Input, r agentd.InputResolution) (*agentd.Input, error) {
	call, err := e.store.ToolCall(ctx, in.ToolCallID)
	if err != nil {
		return nil, err
	}
	conv := in.ConversationID
	drafts := []agentd.EventDraft{e.event(conv, &agentd.InputResolvedPayload{InputID: in.ID, ToolCallID: in.ToolCallID,
		Status: r.Status, Action: r.Action, Content: r.Content, AnsweredBy: r.AnsweredBy, Via: r.Via, Reason: r.Reason}),
		e.event(conv, &agentd.ToolCallResultPayload{RunID: in.RunID, ToolCallID: in.ToolCallID, ToolName: in.ToolName,
			Status: r.CallStatus, Result: r.Result, Error: r.Reason})}
	var stored *agentd.Input
	err = e.commit(conv, func() ([]agentd.Event, error) {
		var evs []agentd.Event
		var err error
		stored, evs, err = e.store.ResolveInput(ctx, r, drafts)
		return evs, err
	})
	if err != nil {
		return stored, err
	}
	e.obs.ToolCallFinished(r.CallStatus, call.Tier)
	e.drv.wakeRun(in.RunID)
	return stored, nil
}

// inputs is Engine.Inputs.
func (e *answerer) inputs(ctx context.Context, p agentd.Principal, q agentd.InputQuery) ([]agentd.Input, string, error) {
	f, limit, err := inputFilter(p, q)
	if err != nil {
		return nil, "", err
	}
	if !p.SeesAll() && p.KeyID == "" {
		return []agentd.Input{}, "", nil // no key, no conversations of its own (fail closed)
	}
	ins, err := e.store.Inputs(ctx, f)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ins) > limit {
		ins = ins[:limit]
		next = ins[limit-1].ID
	}
	if q.Answerable {
		ins, err = e.answerable(ctx, p, ins)
	}
	if ins == nil {
		ins = []agentd.Input{}
	}
	return ins, next, err
}

// inputFilter is the store's filter of a page of GET /v1/inputs by p
// (client and delegate keys: their own conversations), and its size.
func inputFilter(p agentd.Principal, q agentd.InputQuery) (agentd.InputFilter, int, error) {
	limit := cmp.Or(q.Limit, 50)
	if limit < 1 || limit > 100 {
		return agentd.InputFilter{}, 0, agentd.Errorf(agentd.EINVALID, "limit must be between 1 and 100")
	}
	for _, id := range []struct{ prefix, what, v string }{
		{agentd.PrefixInput, "cursor", q.Cursor}, {agentd.PrefixConversation, "conversation_id", q.ConversationID},
	} {
		if id.v != "" {
			if err := agentd.CheckID(id.prefix, id.what, id.v); err != nil {
				return agentd.InputFilter{}, 0, err
			}
		}
	}
	switch q.Status {
	case "", agentd.InputPending, agentd.InputAnswered, agentd.InputExpired, agentd.InputCancelled, agentd.InputLost:
	default:
		return agentd.InputFilter{}, 0, agentd.Errorf(agentd.EINVALID, "status must be pending, answered, expired, cancelled or lost")
	}
	if len(q.ToolName) > 256 {
		return agentd.InputFilter{}, 0, agentd.Errorf(agentd.EINVALID, "tool_name is at most 256 bytes")
	}
	f := agentd.InputFilter{TenantID: p.TenantID, ProjectID: p.ProjectID, Status: q.Status, After: q.Cursor,
		ConversationID: q.ConversationID, ToolName: q.ToolName, Limit: limit + 1}
	if q.Answerable {
		f.Status = agentd.InputPending // only a pending input can be answered now
	}
	if !p.SeesAll() {
		f.CreatedBy = p.KeyID
	}
	return f, limit, nil
}

// answerable keeps the inputs of ins that p may answer now.
func (e *answerer) answerable(ctx context.Context, p agentd.Principal, ins []agentd.Input) ([]agentd.Input, error) {
	convs := map[string]*agentd.Conversation{}
	out := ins[:0]
	for _, in := range ins {
		conv, ok := convs[in.ConversationID]
		if !ok {
			c, err := e.store.Conversation(ctx, in.ConversationID)
			if err != nil {
				return nil, err
			}
			conv, convs[in.ConversationID] = c, c
		}
		if agentd.MayAnswer(in.Answerers, p, conv) == nil {
			out = append(out, in)
		}
	}
	return out, nil
}

// callInputs returns c with its input requests, when it has any.
func (e *answerer) callInputs(ctx context.Context, c *agentd.ToolCall) (*agentd.ToolCall, error) {
	if !asks(c) {
		return c, nil
	}
	ins, err := e.store.Inputs(ctx, agentd.InputFilter{TenantID: c.TenantID, ProjectID: c.ProjectID, ToolCallID: c.ID})
	if err != nil {
		return nil, err
	}
	c.Inputs = ins
	return c, nil
}
