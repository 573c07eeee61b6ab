package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	r3 "github.com/r3labs/sse/v2"

	"github.com/agentd-dev/agentd"
)

func TestWriteEvent(t *testing.T) {
	tests := []struct {
		name string
		e    agentd.Event
		want string
	}{
		{
			name: "one-line json is sent as is",
			e:    agentd.Event{Seq: 1, Type: "message", Data: json.RawMessage(`{"type": "message",  "n": [1, 2]}`)},
			want: "id: 1\nevent: message\ndata: {\"type\": \"message\",  \"n\": [1, 2]}\n\n",
		},
		{
			name: "multi-line json is compacted",
			e:    agentd.Event{Seq: 1, Type: "message", Data: json.RawMessage("{\"type\": \"message\",\n  \"n\": [1,\r\n 2]}")},
			want: "id: 1\nevent: message\ndata: {\"type\":\"message\",\"n\":[1,2]}\n\n",
		},
		{
			name: "indented json becomes one line",
			e:    agentd.Event{Seq: 42, Type: "text_delta", Data: json.RawMessage("{\n  \"delta\": \"a\\nb\"\r\n}\n")},
			want: "id: 42\nevent: text_delta\ndata: {\"delta\":\"a\\nb\"}\n\n",
		},
		{
			name: "empty data is null",
			e:    agentd.Event{Seq: 7, Type: "run_started"},
			want: "id: 7\nevent: run_started\ndata: null\n\n",
		},
		{
			name: "json string starting with colon",
			e:    agentd.Event{Seq: 2, Type: "x", Data: json.RawMessage(`":not a comment"`)},
			want: "id: 2\nevent: x\ndata: \":not a comment\"\n\n",
		},
		{
			name: "non-json data starting with colon stays data",
			e:    agentd.Event{Seq: 3, Type: "x", Data: json.RawMessage(`:ping`)},
			want: "id: 3\nevent: x\ndata: :ping\n\n",
		},
		{
			name: "non-json newlines split into data lines",
			e:    agentd.Event{Seq: 4, Type: "x", Data: json.RawMessage("a\nb\r\nc\rd")},
			want: "id: 4\nevent: x\ndata: a\ndata: b\ndata: c\ndata: d\n\n",
		},
		{
			name: "non-json trailing newline keeps an empty data line",
			e:    agentd.Event{Seq: 5, Type: "x", Data: json.RawMessage("tail\n")},
			want: "id: 5\nevent: x\ndata: tail\ndata: \n\n",
		},
		{
			name: "non-json blank lines cannot end the event",
			e:    agentd.Event{Seq: 6, Type: "x", Data: json.RawMessage("a\n\n\nid: 99")},
			want: "id: 6\nevent: x\ndata: a\ndata: \ndata: \ndata: id: 99\n\n",
		},
		{
			name: "largest seq",
			e:    agentd.Event{Seq: 1<<63 - 1, Type: "run_finished", Data: json.RawMessage(`{}`)},
			want: "id: 9223372036854775807\nevent: run_finished\ndata: {}\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &countingWriter{}
			if err := WriteEvent(w, tt.e); err != nil {
				t.Fatal(err)
			}
			if got := w.buf.String(); got != tt.want {
				t.Errorf("WriteEvent:\n got %q\nwant %q", got, tt.want)
			}
			if w.writes != 1 {
				t.Errorf("WriteEvent made %d writes, want 1", w.writes)
			}
		})
	}
}

func TestWriteEventRejectsUnsendableType(t *testing.T) {
	for _, typ := range []string{"", "a\nb", "a\rb", "\n"} {
		var buf bytes.Buffer
		err := WriteEvent(&buf, agentd.Event{Seq: 1, Type: typ, Data: json.RawMessage(`{}`)})
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("type %q: err = %v, want EINVALID", typ, err)
		}
		if buf.Len() != 0 {
			t.Errorf("type %q: wrote %q", typ, buf.String())
		}
	}
}

func TestWriteEventReportsWriteError(t *testing.T) {
	boom := errors.New("boom")
	if err := WriteEvent(failWriter{boom}, agentd.Event{Seq: 1, Type: "x"}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if err := WriteComment(failWriter{boom}, "ping"); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func TestWriteComment(t *testing.T) {
	tests := []struct{ text, want string }{
		{"ping", ": ping\n\n"},
		{"", ": \n\n"},
		{"a\nb", ": a\n: b\n\n"},
		{"a\r\nb\rc", ": a\n: b\n: c\n\n"},
	}
	for _, tt := range tests {
		w := &countingWriter{}
		if err := WriteComment(w, tt.text); err != nil {
			t.Fatal(err)
		}
		if got := w.buf.String(); got != tt.want || w.writes != 1 {
			t.Errorf("WriteComment(%q) = %q in %d writes, want %q in 1", tt.text, got, w.writes, tt.want)
		}
	}
}

func TestParseLastEventID(t *testing.T) {
	tests := []struct {
		header, query string
		want          int64
		ok            bool
	}{
		{"", "", 0, true},
		{"0", "", 0, true},
		{"17", "", 17, true},
		{"", "17", 17, true},
		{"5", "9", 5, true}, // the header wins
		{"9223372036854775807", "", 1<<63 - 1, true},
		{"-1", "", 0, false},
		{"-0", "", 0, false},
		{"+3", "", 0, false},
		{"abc", "", 0, false},
		{" 3", "", 0, false},
		{"3.0", "", 0, false},
		{"9223372036854775808", "", 0, false},
		{"", "x", 0, false},
		{"", "-4", 0, false},
		{"abc", "4", 0, false}, // a bad header is not rescued by the query
	}
	for _, tt := range tests {
		got, err := ParseLastEventID(tt.header, tt.query)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("ParseLastEventID(%q, %q) = %d, %v; want %d", tt.header, tt.query, got, err, tt.want)
			}
			continue
		}
		if agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("ParseLastEventID(%q, %q) = %d, %v; want EINVALID", tt.header, tt.query, got, err)
		}
	}
}

// FuzzWriteEvent checks that whatever the event, the output is exactly one
// well-formed SSE event that parses back to the same id, type and data.
func FuzzWriteEvent(f *testing.F) {
	f.Add(int64(1), "message", []byte(`{"type":"message","content":"hi"}`))
	f.Add(int64(0), "x", []byte(""))
	f.Add(int64(-5), "text_delta", []byte("{\n \"delta\": \"\\n\"\n}"))
	f.Add(int64(9), "x", []byte(":comment"))
	f.Add(int64(9), "x", []byte("a\r\n\r\nb\r"))
	f.Add(int64(9), " lead", []byte("\n\n"))
	f.Add(int64(9), "a:b", []byte(`"\u2028"`))
	f.Add(int64(9), "bad\ntype", []byte(`{}`))
	f.Add(int64(9), "", []byte(`{}`))
	f.Fuzz(func(t *testing.T, seq int64, typ string, data []byte) {
		var buf bytes.Buffer
		err := WriteEvent(&buf, agentd.Event{Seq: seq, Type: typ, Data: data})
		if typ == "" || strings.ContainsAny(typ, "\r\n") {
			if err == nil || buf.Len() != 0 {
				t.Fatalf("type %q: err = %v, wrote %q; want an error and nothing written", typ, err, buf.String())
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		out := buf.Bytes()

		if bytes.IndexByte(out, '\r') >= 0 {
			t.Fatalf("output contains \\r: %q", out)
		}
		if !bytes.HasSuffix(out, []byte("\n\n")) || bytes.Index(out, []byte("\n\n")) != len(out)-2 {
			t.Fatalf("output is not exactly one block: %q", out)
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n") {
			if !strings.HasPrefix(line, "id: ") && !strings.HasPrefix(line, "event: ") && !strings.HasPrefix(line, "data: ") {
				t.Fatalf("line %q is not an id, event or data field", line)
			}
		}

		frames, err := parseAll(out)
		if err != nil || len(frames) != 1 {
			t.Fatalf("parsed %d frames, err %v, from %q", len(frames), err, out)
		}
		got := frames[0]
		if got.ID != strconv.FormatInt(seq, 10) || got.Event != typ || len(got.Comments) != 0 {
			t.Fatalf("round trip: id %q event %q comments %q; want id %d event %q", got.ID, got.Event, got.Comments, seq, typ)
		}
		if want := wantData(data); got.Data != want {
			t.Fatalf("round trip data: got %q, want %q", got.Data, want)
		}
		if json.Valid(data) && !json.Valid([]byte(got.Data)) {
			t.Fatalf("valid JSON %q came back invalid: %q", data, got.Data)
		}

		// r3labs' reader, which the Go client uses, sees the same single block.
		rd := r3.NewEventStreamReader(bytes.NewReader(out), len(out)+1024)
		if _, err := rd.ReadEvent(); err != nil {
			t.Fatalf("r3labs reader: %v", err)
		}
		if blk, err := rd.ReadEvent(); err != io.EOF {
			t.Fatalf("r3labs reader saw a second block %q, err %v", blk, err)
		}
	})
}

// wantData is what a client must reassemble from the data lines of an event
// whose data was raw.
func wantData(raw []byte) string {
	if len(raw) == 0 {
		return "null"
	}
	if json.Valid(raw) {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			panic(err)
		}
		return b.String()
	}
	s := strings.ReplaceAll(string(raw), "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }
