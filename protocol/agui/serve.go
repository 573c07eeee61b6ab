package agui

import (
	"context"
	"net/http"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
)

// HeaderConversation names, on every response, the conversation the
// protocol request is bound to, for the native API.
const HeaderConversation = protocol.HeaderConversation

// Serve answers one POST /v1/ag-ui for p: it applies in to its thread's
// conversation and streams the run as AG-UI events, ending after
// RUN_FINISHED or RUN_ERROR. An error it returns (a malformed input, a
// thread p does not reach) was found before anything was written, so the
// caller answers it with an error status; what goes wrong later (an
// expired or unknown interrupt, a message while interrupts are open) is a
// RUN_ERROR frame. A client that goes away ends the stream, not the run.
func Serve(ctx context.Context, w http.ResponseWriter, svc *protocol.Service, p agentd.Principal, in *RunAgentInput) error {
	input, err := in.Input()
	if err != nil {
		return err
	}
	enc := NewEncoder(in.ThreadID, in.RunID)
	conv, err := svc.Thread(ctx, p, protocol.AGUI, in.ThreadID, len(input.Answers) == 0)
	if err != nil && !(agentd.ErrorCode(err) == agentd.ENOTFOUND && len(input.Answers) > 0) {
		return err
	}
	var turn *protocol.Turn
	if conv == nil {
		err = agentd.Errorf(agentd.ENOTFOUND, "unknown interrupt: this thread has no parked calls")
	} else {
		turn, err = svc.Apply(ctx, p, conv, input)
	}
	out := svc.NewWriter(w)
	defer out.Done()
	header := http.Header{}
	if conv != nil {
		header.Set(HeaderConversation, conv.ID)
	}
	if err := out.Start(header); err != nil {
		return nil
	}
	s := protocol.NewFrameSink(out, enc.Item)
	if err := s.Send(enc.Start(svc.Now())); err != nil {
		return nil
	}
	if err != nil {
		_ = s.Send(enc.Error(err, svc.Now()))
		return nil
	}
	end, err := svc.Follow(ctx, turn, s)
	switch {
	case ctx.Err() != nil || s.Failed():
		return nil // the client went away; the run goes on
	case err != nil:
		_ = s.Send(enc.Error(err, svc.Now()))
		return nil
	}
	_ = s.Send(enc.End(end, conv.ID, svc.Now()))
	return nil
}
