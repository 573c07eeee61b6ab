package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/server"
	"github.com/agentd-dev/agentd/sse"
)

// clientFlags are the flags every client subcommand shares.
type clientFlags struct {
	url string
	key string
}

func (c *clientFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&c.url, "url", or(getenv("AGENTD_URL"), "http://"+server.DefaultAddr), "agentd base URL")
	c.key = getenv("AGENTD_API_KEY") // secrets only from env, never from argv
}

// base is the server's URL without a trailing slash.
func (c *clientFlags) base() string { return strings.TrimRight(c.url, "/") }

// apiError is an answer of the API that is not 2xx.
type apiError struct {
	Method, Path string
	Status       int
	Code         string
	Message      string
	body         string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.body)
}

// send does one JSON request and returns the answer's body; an answer that
// is not 2xx is an *apiError.
func (c *clientFlags) send(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Method: method, Path: path, Status: resp.StatusCode, body: strings.TrimSpace(string(b))}
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(b, &e) == nil {
			ae.Code, ae.Message = e.Error.Code, e.Error.Message
		}
		return nil, ae
	}
	return b, nil
}

// do does one JSON request and writes the answer to out.
func (c *clientFlags) do(ctx context.Context, method, path string, body any, out io.Writer) error {
	b, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	_, err = out.Write(append(bytes.TrimSpace(b), '\n'))
	return err
}

// json does one JSON request and decodes the answer into out (nil: ignored).
func (c *clientFlags) json(ctx context.Context, method, path string, body, out any) error {
	b, err := c.send(ctx, method, path, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func approve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, getenv)
	deny := fs.Bool("deny", false, "deny instead of approve")
	reason := fs.String("reason", "", "reason recorded with the decision")
	digest := fs.String("sha256", "", "arguments_sha256 the decision is bound to (optional)")
	card := fs.Int("card", 0, "card_revision of the card decided, for a call parked again (optional)")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: agentd approve CALL_ID [--deny] [--reason TEXT] [--sha256 HEX] [--card N]")
		return errUsage
	}
	id := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	decision := "approve"
	if *deny {
		decision = "deny"
	}
	body := map[string]any{"decision": decision}
	if *reason != "" {
		body["reason"] = *reason
	}
	if *digest != "" {
		body["arguments_sha256"] = *digest
	}
	if *card != 0 {
		body["card_revision"] = *card
	}
	return cf.do(ctx, http.MethodPost, "/v1/tool-calls/"+id+"/approval", body, stdout)
}

// events follows a conversation's stream, printing one JSON line per event
// ({"id", "type", "data"}); it reconnects with Last-Event-ID until interrupted.
func events(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, getenv)
	conv := fs.String("conversation", "", "conversation id")
	last := fs.Int64("last-event-id", 0, "resume after this event id")
	if err := fs.Parse(args); err != nil || *conv == "" {
		fmt.Fprintln(stderr, "usage: agentd events --conversation ID [--last-event-id N]")
		return errUsage
	}
	h := http.Header{}
	if cf.key != "" {
		h.Set("Authorization", "Bearer "+cf.key)
	}
	url := cf.base() + "/v1/conversations/" + *conv + "/events"
	enc := json.NewEncoder(stdout)
	type line struct {
		ID   int64           `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	err := sse.Follow(ctx, url, sse.FollowOptions{Header: h, LastEventID: *last}, func(e agentd.Event) error {
		return enc.Encode(line{ID: e.Seq, Type: e.Type, Data: e.Data})
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
