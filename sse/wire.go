package sse

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/agentd-dev/agentd"
)

// WriteEvent writes e to w as one SSE event in a single Write call:
//
//	id: <seq>\nevent: <type>\ndata: <json>\n\n
//
// JSON data that spans lines is compacted to one line (one-line data, what
// the log holds, is written as is). Data that is not valid JSON is
// written as is, except that each line break (\r\n, \r or \n) starts a new
// "data: " line, so a client reassembles it with \n line breaks and nothing
// leaks into other fields. Empty data is written as null, because browsers
// drop an event whose data is empty. Every line starts with a field name, so
// no line is ever read as a comment.
//
// An event type that is empty or contains \r or \n cannot be represented; it
// is an EINVALID error and nothing is written.
func WriteEvent(w io.Writer, e agentd.Event) error {
	b, err := appendEvent(nil, e)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteComment writes text as an SSE comment, ": text\n\n", in a single
// Write call. Each line of a multi-line text becomes its own comment line.
// Clients ignore comments; the stream uses them as a heartbeat.
func WriteComment(w io.Writer, text string) error {
	_, err := w.Write(appendComment(nil, text))
	return err
}

// appendEvent appends the wire form of e to dst. It is the one place the
// event format is written.
func appendEvent(dst []byte, e agentd.Event) ([]byte, error) {
	if e.Type == "" || strings.ContainsAny(e.Type, "\r\n") {
		return dst, agentd.Errorf(agentd.EINVALID, "sse: event type %q cannot be sent", e.Type)
	}
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, e.Seq, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, e.Type...)
	dst = append(dst, '\n')

	data := []byte(e.Data)
	if len(data) == 0 {
		data = []byte("null")
	} else if bytes.ContainsAny(data, "\r\n") {
		// Data from the log is already one line (json.Marshal output), so
		// the common case copies it as is; only multi-line JSON is compacted.
		var buf bytes.Buffer
		if json.Compact(&buf, data) == nil { // fails, writing nothing, unless data is valid JSON
			data = buf.Bytes()
		}
	}
	// Compacted JSON has no raw line breaks; anything else is split so that
	// each line is its own data field.
	dst = appendLines(dst, "data: ", data)
	return append(dst, '\n'), nil
}

// appendComment appends text as comment lines and the blank line that ends
// the block.
func appendComment(dst []byte, text string) []byte {
	dst = appendLines(dst, ": ", []byte(text))
	return append(dst, '\n')
}

// appendLines writes each line of text (split at \r\n, \r or \n) as
// prefix+line+"\n".
func appendLines(dst []byte, prefix string, text []byte) []byte {
	for {
		i := bytes.IndexAny(text, "\r\n")
		if i < 0 {
			dst = append(dst, prefix...)
			dst = append(dst, text...)
			return append(dst, '\n')
		}
		dst = append(dst, prefix...)
		dst = append(dst, text[:i]...)
		dst = append(dst, '\n')
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

// ParseLastEventID returns the sequence number a client resumes after: the
// Last-Event-ID header if it is non-empty, else the last_event_id query
// parameter, else 0 (the whole log). A value that is not a non-negative
// decimal integer is an EINVALID error.
func ParseLastEventID(header, query string) (int64, error) {
	s, name := header, "Last-Event-ID"
	if s == "" {
		s, name = query, "last_event_id"
	}
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || s[0] == '+' || s[0] == '-' {
		return 0, agentd.Errorf(agentd.EINVALID, "%s must be a non-negative integer", name)
	}
	return n, nil
}
