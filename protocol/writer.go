package protocol

import (
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
