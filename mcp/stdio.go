package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// maxLine bounds a line of a stdio server's stdout, as the SDK bounds a
// message.
const maxLine = sdk.DefaultMaxLineLength

// stdioTransport runs a stdio server's command and speaks MCP over its
// stdin and stdout, as the SDK's CommandTransport does, except that a line
// of stdout that is not a JSON message (a start-up banner, a stray print)
// is logged and skipped, as the TypeScript SDK's client does, instead of
// failing the session. Closing the session stops the server (stopStdin).
type stdioTransport struct {
	cmd   *exec.Cmd
	grace time.Duration
	log   zerolog.Logger
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// The session ends by closing stdin, not stdout (cmd.Wait closes it).
	in := io.NopCloser(&jsonLines{r: bufio.NewReader(stdout), limit: maxLine, skipped: t.skipped})
	return (&sdk.IOTransport{Reader: in, Writer: stopStdin{stdin, t.cmd, t.grace}}).Connect(ctx)
}

func (t *stdioTransport) skipped(line []byte) {
	t.log.Warn().Str("stdout", agentd.TruncateUTF8(string(line), 200)).Int("bytes", len(line)).
		Msg("MCP server wrote a line on stdout that is not a JSON message; skipped")
}

// jsonLines reads the lines of r that hold a JSON object or array (a
// JSON-RPC message or batch), each trimmed of spaces and ended by a
// newline; it passes every other line (but blank ones) to skipped. A line
// longer than limit bytes is an error.
type jsonLines struct {
	r       *bufio.Reader
	limit   int
	skipped func(line []byte)
	rest    []byte // of the line being read out
	err     error  // after the last line
}

func (j *jsonLines) Read(p []byte) (int, error) {
	for len(j.rest) == 0 {
		if j.err != nil {
			return 0, j.err
		}
		var line []byte
		line, j.err = readLine(j.r, j.limit)
		switch msg := bytes.TrimSpace(line); {
		case len(msg) == 0:
		case (msg[0] == '{' || msg[0] == '[') && json.Valid(msg):
			j.rest = append(msg, '\n')
		default:
			j.skipped(msg)
		}
	}
	n := copy(p, j.rest)
	j.rest = j.rest[n:]
	return n, nil
}

// readLine reads a line of r with its newline (the last one may have
// none), at most limit bytes.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, fmt.Errorf("the server wrote a line of more than %d bytes on stdout", limit)
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// stopStdin is a stdio server's stdin; closing it stops the server: its
// stdin closed, then SIGTERM after grace, then SIGKILL after grace again
// (the SDK's CommandTransport does the same).
type stopStdin struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
}

func (s stopStdin) Close() error {
	_ = s.WriteCloser.Close() // fails when the server is gone already
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = s.cmd.Process.Signal(sig)
		}
		select {
		case err := <-exited:
			return err
		case <-time.After(s.grace):
		}
	}
	return errors.New("the server did not exit after SIGKILL")
}
