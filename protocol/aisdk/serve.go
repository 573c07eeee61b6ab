package aisdk

import (
	"context"
	"net/http"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
)

// HeaderConversation names, on every response, the conversation the
// protocol request is bound to, for the native API.
const HeaderConversation = protocol.HeaderConversation

// Serve answers one POST /v1/ai-sdk/chat for p: it applies the request to
// its chat's conversation and streams the run as UI message chunks, ending
// with data: [DONE] when the run finishes or parks. An approval response
// after the call's deadline is answered on the tool part with
// tool-output-error (the call did not run). An error it returns (a
// malformed body, a chat p does not reach, a decision the engine refuses:
// conflict, stale, forbidden, …) was found before anything was written, so
// the caller answers it with an error status, which the SDK reports. A
// client that goes away ends the stream, not the run.
func Serve(ctx context.Context, w http.ResponseWriter, svc *protocol.Service, p agentd.Principal, r *ChatRequest) error {
	input, err := r.Input()
	if err != nil {
		return err
	}
	input.ExpiredIsAnswer = true // shown on the tool part, as the SDK shows errors
	conv, err := svc.Thread(ctx, p, protocol.AISDK, r.ID, true)
	if err != nil {
		return err
	}
	turn, err := svc.Apply(ctx, p, conv, input)
	if err != nil {
		return err
	}
	stream(ctx, w, svc, conv, turn)
	return nil
}

// stream writes turn's run as UI message chunks, ending with data: [DONE]
// when the run finishes or parks; a client that goes away ends it.
func stream(ctx context.Context, w http.ResponseWriter, svc *protocol.Service, conv *agentd.Conversation, turn *protocol.Turn) {
	out := svc.NewWriter(w)
	defer out.Done()
	header := http.Header{}
	header.Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	header.Set(HeaderConversation, conv.ID)
	if err := out.Start(header); err != nil {
		return
	}
	enc := NewEncoder()
	s := protocol.NewFrameSink(out, enc.Item)
	if err := s.Send(enc.Start(turn.RunID)); err != nil {
		return
	}
	for _, x := range turn.Expired {
		if err := s.Send(enc.Expired(x)); err != nil {
			return
		}
	}
	end, err := svc.Follow(ctx, turn, s)
	switch {
	case ctx.Err() != nil || s.Failed():
		return // the client went away; the run goes on
	case err != nil:
		_ = s.Send(enc.Fail(err))
	default:
		_ = s.Send(enc.End(end))
	}
	_ = out.Data(Done)
}

// Resume answers one GET /v1/ai-sdk/chat/{id}/stream for p, the AI SDK
// transport's reconnectToStream: 204 No Content when the chat has no active
// run (none, or its latest run has finished); else the active run's stream
// replayed from its start — the SDK's DefaultChatTransport treats a resumed
// stream as a replay and starts the message afresh at its start chunk, so
// each part is rendered once — then live, until the run finishes or parks.
// A chat p does not reach is as one with nothing yet: 204. An error it
// returns was found before anything was written.
func Resume(ctx context.Context, w http.ResponseWriter, svc *protocol.Service, p agentd.Principal, chatID string) error {
	conv, err := svc.Thread(ctx, p, protocol.AISDK, chatID, false)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		w.WriteHeader(http.StatusNoContent) // a chat with nothing yet, as useChat resumes on every mount
		return nil
	} else if err != nil {
		return err
	}
	turn, ok, err := svc.ActiveTurn(ctx, conv)
	if err != nil {
		return err
	}
	if !ok {
		w.Header().Set(HeaderConversation, conv.ID)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	stream(ctx, w, svc, conv, turn)
	return nil
}
