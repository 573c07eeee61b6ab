package mcp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// A stdio server (a real subprocess) that prints a banner line on stdout
// before it speaks MCP starts and works; the banner is logged.
func TestStdioBanner(t *testing.T) {
	var log lockedWriter
	s, _ := stdioServerLog(t, `{"servers": [{"id": "notes", "command": ["SERVER", "-banner", "Starting notes MCP server on stdio"], "env": ["NOTES_FILE"]}]}`,
		zerolog.New(&log))
	if st := s.Status(); st.State != StateReady || !slices.Contains(st.Tools, "notes__lookup") {
		t.Fatalf("status = %+v", st)
	}
	if got, err := call(s, context.Background(), "notes__lookup", `{"q": "a"}`); err != nil || !strings.HasPrefix(got, "found a") {
		t.Errorf("lookup = %q, %v", got, err)
	}
	if l := log.String(); !strings.Contains(l, `"stdout":"Starting notes MCP server on stdio"`) || !strings.Contains(l, "not a JSON message; skipped") {
		t.Errorf("the banner is not logged: %s", l)
	}
}

func TestJSONLines(t *testing.T) {
	const maxLine = 100
	big := strings.Repeat("x", maxLine)
	for _, tc := range []struct {
		name, in, out string
		skipped       []string
		err           string
	}{
		{"messages", `{"a":1}` + "\n" + `[{"b":2}]` + "\n", `{"a":1}` + "\n" + `[{"b":2}]` + "\n", nil, ""},
		{"banner first", "Starting server\n" + `{"a":1}` + "\n", `{"a":1}` + "\n", []string{"Starting server"}, ""},
		{"bracketed log line", "[INFO] ready\n" + `{"a":1}` + "\n", `{"a":1}` + "\n", []string{"[INFO] ready"}, ""},
		{"half a message", `{"a":` + "\n" + `{"a":1}`, `{"a":1}` + "\n", []string{`{"a":`}, ""},
		{"a JSON value that is no message", "42\n\"s\"\n", "", []string{"42", `"s"`}, ""},
		{"blank lines and CRLF", "\n  \r\n" + `{"a":1}` + "  \r\n", `{"a":1}` + "\n", nil, ""},
		{"the last line without newline", `{"a":1}`, `{"a":1}` + "\n", nil, ""},
		{"a line too long", big + "x\n" + `{"a":1}` + "\n", "", nil, "a line of more than"},
		{"a line as long as allowed", "{\"" + big[:maxLine-7] + "\":1}\n", "{\"" + big[:maxLine-7] + "\":1}\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var skipped []string
			j := &jsonLines{r: bufio.NewReader(strings.NewReader(tc.in)), limit: maxLine, skipped: func(l []byte) { skipped = append(skipped, string(l)) }}
			out, err := io.ReadAll(j)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if string(out) != tc.out || !slices.Equal(skipped, tc.skipped) {
				t.Errorf("out = %.80q, skipped %.80q; want %.80q, %.80q", out, skipped, tc.out, tc.skipped)
			}
		})
	}
	if _, err := io.ReadAll(&jsonLines{r: bufio.NewReader(iotestErr{}), limit: maxLine, skipped: func([]byte) {}}); err == nil || err.Error() != "boom" {
		t.Errorf("a read error: %v", err)
	}
}

// lockedWriter is a log the test reads while the server writes it.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("boom") }
