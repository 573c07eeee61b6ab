package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentd-dev/agentd"
)

// Writer writes one protocol stream: Server-Sent Events whose frames are
// "data: <json>\n\n" lines, each write under its own deadline and flushed.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	s   *Service
	buf []byte
}

// NewWriter returns the stream writer of w.
func (s *Service) NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w), s: s}
}

// Start sends the stream's status line and headers (text/event-stream, no
// caching, no proxy buffering, and extra).
func (w *Writer) Start(extra http.Header) error {
	h := w.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	for k, v := range extra {
		h[k] = v
	}
	if err := w.deadline(); err != nil {
		return err
	}
	w.w.WriteHeader(http.StatusOK)
	return w.flush()
}

// Data writes frames, each one line of data (JSON has no raw newline), as
// "data: <frame>\n\n", in one write.
func (w *Writer) Data(frames ...[]byte) error {
	w.buf = w.buf[:0]
	for _, f := range frames {
		w.buf = AppendFrame(w.buf, f)
	}
	return w.write()
}

// AppendFrame appends one SSE data frame holding line to dst.
func AppendFrame(dst, line []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, line...)
	return append(dst, '\n', '\n')
}

// Ping writes a ": ping" comment.
func (w *Writer) Ping() error {
	w.buf = append(w.buf[:0], ": ping\n\n"...)
	return w.write()
}

func (w *Writer) write() error {
	if err := w.deadline(); err != nil {
		return err
	}
	if _, err := w.w.Write(w.buf); err != nil {
		return fmt.Errorf("protocol: write: %w", err)
	}
	return w.flush()
}

// Done leaves time for the response's final chunk after the handler
// returns.
func (w *Writer) Done() { _ = w.deadline() }

func (w *Writer) deadline() error {
	err := w.rc.SetWriteDeadline(w.s.Now().Add(w.s.opt.WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("protocol: set write deadline: %w", err)
	}
	return nil
}

func (w *Writer) flush() error {
	if err := w.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("protocol: flush: %w", err)
	}
	return nil
}

// SafeError is the code and message of err that are safe to put in a
// frame: those of an *agentd.Error, "internal error" for any other error.
func SafeError(err error) (code, message string) {
	return agentd.ErrorCode(err), agentd.ErrorMessage(err)
}

// HeaderConversation names, on every protocol response, the conversation
// the thread or chat is bound to, for the native API.
const HeaderConversation = "X-Agentd-Conversation-Id"

// FrameSink writes a followed run's items to a Writer as frames of one
// protocol (F: an AG-UI event, an AI SDK chunk), each a data: line of its
// JSON. Once a write fails (the client went away), Failed reports it.
type FrameSink[F any] struct {
	out    *Writer
	encode func(Item) []F
	failed bool
}

// NewFrameSink returns a FrameSink that turns each item into frames with encode.
func NewFrameSink[F any](out *Writer, encode func(Item) []F) *FrameSink[F] {
	return &FrameSink[F]{out: out, encode: encode}
}

// Item writes its frames (Follow's callback).
func (s *FrameSink[F]) Item(it Item) error { return s.Send(s.encode(it)) }

// Ping writes a keep-alive comment (Follow's callback).
func (s *FrameSink[F]) Ping() error {
	if err := s.out.Ping(); err != nil {
		s.failed = true
		return err
	}
	return nil
}

// Send writes frames, in one flush; none is a no-op.
func (s *FrameSink[F]) Send(frames []F) error {
	if len(frames) == 0 {
		return nil
	}
	lines := make([][]byte, len(frames))
	for i, f := range frames {
		b, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("encode a %T frame: %w", f, err)
		}
		lines[i] = b
	}
	if err := s.out.Data(lines...); err != nil {
		s.failed = true
		return err
	}
	return nil
}

// Failed reports whether a write failed: the client is gone.
func (s *FrameSink[F]) Failed() bool { return s.failed }
