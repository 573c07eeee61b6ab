package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// The terminal client: agentd chat, agentd approvals, agentd tail
// (docs/web.md, "In a terminal"). They speak the HTTP API like the page,
// and print through terminalWriter: no control character of what they
// show reaches the terminal.

// errChatDone ends a chat's stream from its handler.
var errChatDone = errors.New("chat done")

// lines reads stdin one line at a time; ok is false at its end.
type lines struct{ sc *bufio.Scanner }

func newLines(r io.Reader) *lines {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &lines{sc: sc}
}

func (l *lines) next() (string, bool) {
	if !l.sc.Scan() {
		return "", false
	}
	return strings.TrimSpace(l.sc.Text()), true
}

// printer writes a conversation's events for a person.
type printer struct {
	w      io.Writer
	inText bool // a text_delta line is open
}

func (p *printer) endText() {
	if p.inText {
		fmt.Fprintln(p.w)
		p.inText = false
	}
}

// event prints one event; it returns the typed payload (nil for types it
// does not know).
func (p *printer) event(e agentd.Event) agentd.EventPayload {
	v, err := agentd.DecodeEvent(e)
	if err != nil {
		p.endText()
		fmt.Fprintf(p.w, "! event %d (%s): %v\n", e.Seq, e.Type, err)
		return nil
	}
	switch d := v.(type) {
	case *agentd.TextDeltaPayload:
		if !p.inText {
			fmt.Fprint(p.w, "agent: ")
			p.inText = true
		}
		fmt.Fprint(p.w, d.Delta)
	case *agentd.MessagePayload:
		p.endText()
	case *agentd.ToolCallStartedPayload:
		p.endText()
		fmt.Fprintf(p.w, "· %s running %s\n", d.ToolName, compact(d.Arguments, 200))
	case *agentd.ToolCallResultPayload:
		p.endText()
		if d.Status == agentd.StatusCompleted {
			fmt.Fprintf(p.w, "· %s completed: %s\n", d.ToolName, compact(d.Result, 200))
		} else {
			fmt.Fprintf(p.w, "· %s %s: %s\n", d.ToolName, d.Status, d.Error)
		}
	case *agentd.ToolCallRefusedPayload:
		p.endText()
		fmt.Fprintf(p.w, "· %s refused (%s): %s\n", d.ToolName, d.Tier, d.Reason)
	case *agentd.ConfirmationRequiredPayload:
		p.endText()
		p.card(d)
	case *agentd.ConfirmationResolvedPayload:
		p.endText()
		line := "· " + d.ToolName + " " + d.Decision
		if d.Decision != agentd.DecisionExpired {
			line += " by " + d.DecidedBy
		}
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		fmt.Fprintln(p.w, line)
	case *agentd.RunWaitingPayload:
		p.endText()
		fmt.Fprintf(p.w, "· waiting for %d approval(s)\n", len(d.Pending))
	case *agentd.RunFinishedPayload:
		p.endText()
		if d.Status != agentd.RunCompleted {
			fmt.Fprintf(p.w, "· run %s %s\n", d.Status, d.Error)
		}
	case *agentd.ErrorPayload:
		p.endText()
		fmt.Fprintf(p.w, "! %s: %s\n", d.Code, d.Message)
	}
	return v
}

// card prints a parked call: what would run, why it asks, the arguments
// and the deadline.
func (p *printer) card(d *agentd.ConfirmationRequiredPayload) {
	what := "tool " + d.ToolName
	if d.ConnectionName != nil {
		tmpl := d.Endpoint
		if d.Card.PathTemplate != nil {
			tmpl = *d.Card.PathTemplate
		}
		what = fmt.Sprintf("%s %s on %s (tool %s)", d.Method, tmpl, *d.ConnectionName, d.ToolName)
	}
	fmt.Fprintf(p.w, "== confirmation required: %s\n", what)
	if d.Reason != "" {
		fmt.Fprintf(p.w, "   reason:    %s\n", d.Reason)
	}
	fmt.Fprintf(p.w, "   arguments: %s\n", indent(d.Params, "              "))
	for _, field := range slices.Sorted(maps.Keys(d.Omitted)) {
		// Too large to copy into the event: the call has it.
		fmt.Fprintf(p.w, "   omitted:   %s, %d bytes (GET /v1/tool-calls/%s)\n", field, d.Omitted[field].Bytes, d.ToolCallID)
	}
	if len(d.Card.Diff) > 0 && string(d.Card.Diff) != "null" {
		fmt.Fprintf(p.w, "   diff:      %s\n", indent(d.Card.Diff, "              "))
	}
	fmt.Fprintf(p.w, "   deadline:  %s (in %s)\n", d.RequiresApprovalAt.Local().Format(time.RFC3339),
		time.Until(d.RequiresApprovalAt).Round(time.Second))
	fmt.Fprintf(p.w, "   call:      %s\n", d.ToolCallID)
}

// compact is raw as one line of JSON (raw as is when it is not JSON), cut
// to at most max bytes with agentd.TruncateUTF8 (never inside a rune) and
// marked "…" after them when cut.
func compact(raw json.RawMessage, max int) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if len(s) > max {
		s = agentd.TruncateUTF8(s, max) + "…"
	}
	return s
}

func indent(raw json.RawMessage, prefix string) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, prefix, "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// chatSession is one `agentd chat`: it sends each line of stdin as a user
// message, follows the stream, and asks about every parked call.
type chatSession struct {
	cf     clientFlags
	in     *lines
	out    *printer
	stderr io.Writer
	getenv func(string) string
	conv   string
	active string // the run started by our last message; "*" any run
}

func chat(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	stdout, stderr = terminalWriter{stdout}, terminalWriter{stderr}
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := &chatSession{in: newLines(stdin), out: &printer{w: stdout}, stderr: stderr, getenv: getenv}
	s.cf.register(fs, getenv)
	fs.StringVar(&s.conv, "conversation", "", "continue this conversation (default: a new one)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: agentd chat [--conversation ID]   (messages are read from stdin, one a line)")
		return errUsage
	}
	if s.conv == "" {
		var c agentd.Conversation
		if err := s.cf.json(ctx, http.MethodPost, "/v1/conversations", map[string]any{}, &c); err != nil {
			return err
		}
		s.conv = c.ID
	}
	fmt.Fprintf(stdout, "conversation %s\n", s.conv)
	if more, err := s.sendNext(ctx); err != nil || !more {
		return err
	}
	h := http.Header{}
	if s.cf.key != "" {
		h.Set("Authorization", "Bearer "+s.cf.key)
	}
	err := sse.Follow(ctx, s.cf.base()+"/v1/conversations/"+url.PathEscape(s.conv)+"/events", sse.FollowOptions{Header: h}, s.handle)
	if errors.Is(err, errChatDone) || ctx.Err() != nil {
		return nil
	}
	return err
}

// sendNext reads the next message and sends it; false at the end of stdin.
func (s *chatSession) sendNext(ctx context.Context) (bool, error) {
	for {
		fmt.Fprint(s.stderr, "> ")
		msg, ok := s.in.next()
		if !ok {
			return false, nil
		}
		if msg == "" {
			continue
		}
		var r struct {
			RunID string `json:"run_id"`
		}
		err := s.cf.json(ctx, http.MethodPost, "/v1/conversations/"+url.PathEscape(s.conv)+"/messages", map[string]string{"content": msg}, &r)
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == agentd.ERUNACTIVE {
			fmt.Fprintln(s.out.w, "· the agent is still on the last message; decide its calls first")
			s.active = "*"
			return true, nil
		}
		if err != nil {
			return false, err
		}
		fmt.Fprintf(s.out.w, "you: %s\n", msg)
		s.active = r.RunID
		return true, nil
	}
}

func (s *chatSession) handle(e agentd.Event) error {
	ctx := context.Background()
	switch d := s.out.event(e).(type) {
	case *agentd.ConfirmationRequiredPayload:
		return s.decide(ctx, d)
	case *agentd.RunFinishedPayload:
		if s.active == "*" || d.RunID == s.active {
			more, err := s.sendNext(ctx)
			if err != nil {
				return err
			}
			if !more {
				return errChatDone
			}
		}
	}
	return nil
}

// decide asks about one parked call until a decision is accepted; a call
// that is no longer pending (a replayed card) is not asked about.
func (s *chatSession) decide(ctx context.Context, d *agentd.ConfirmationRequiredPayload) error {
	var c agentd.ToolCall
	if err := s.cf.json(ctx, http.MethodGet, "/v1/tool-calls/"+url.PathEscape(d.ToolCallID), nil, &c); err != nil {
		return err
	}
	if c.Status != agentd.StatusRequiresConfirmation {
		return nil
	}
	canEdit := slices.Contains(d.AllowedDecisions, "edit")
	for {
		if canEdit {
			fmt.Fprint(s.out.w, "approve? [y/n/e] ")
		} else {
			fmt.Fprint(s.out.w, "approve? [y/n] ")
		}
		answer, ok := s.in.next()
		if !ok {
			fmt.Fprintf(s.out.w, "\n· stdin ended; %s stays parked until %s\n", d.ToolCallID, d.RequiresApprovalAt.Format(time.RFC3339))
			return errChatDone
		}
		body := map[string]any{"arguments_sha256": d.ArgumentsSHA256}
		if d.CardRevision > 0 {
			body["card_revision"] = d.CardRevision // the card shown, of a call parked again
		}
		switch strings.ToLower(answer) {
		case "y", "yes":
			body["decision"] = "approve"
		case "n", "no":
			fmt.Fprint(s.out.w, "reason (optional): ")
			reason, _ := s.in.next()
			body["decision"] = "deny"
			if reason != "" {
				body["reason"] = reason
			}
		case "e", "edit":
			if !canEdit {
				fmt.Fprintln(s.out.w, "· this call's arguments may not be edited")
				continue
			}
			args, err := s.edit(c.Arguments)
			if err != nil {
				fmt.Fprintf(s.out.w, "· not sent: %v\n", err)
				continue
			}
			body["decision"], body["arguments"] = "edit", args
		default:
			continue
		}
		var dec agentd.Decision
		err := s.cf.json(ctx, http.MethodPost, "/v1/tool-calls/"+url.PathEscape(d.ToolCallID)+"/approval", body, &dec)
		var ae *apiError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ae) && (ae.Code == agentd.EEXPIRED || ae.Code == agentd.ECONFLICT):
			fmt.Fprintf(s.out.w, "· %s\n", ae.Message)
			return nil
		case errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusUnauthorized:
			fmt.Fprintf(s.out.w, "· refused: %s\n", ae.Message)
			continue
		default:
			return err
		}
	}
}

// edit opens the arguments in $VISUAL or $EDITOR and returns the edited
// JSON; the server validates it against the tool's schema.
func (s *chatSession) edit(args json.RawMessage) (json.RawMessage, error) {
	editor := or(s.getenv("VISUAL"), s.getenv("EDITOR"))
	if editor == "" {
		return nil, errors.New("set $EDITOR to edit the arguments")
	}
	dir, err := os.MkdirTemp("", "agentd-edit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "arguments.json")
	if err := os.WriteFile(file, []byte(indent(args, "")+"\n"), 0o600); err != nil {
		return nil, err
	}
	parts := strings.Fields(editor)
	cmd := exec.Command(parts[0], append(parts[1:], file)...)
	cmd.Stdout, cmd.Stderr = s.stderr, s.stderr
	if tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
		defer tty.Close()
		cmd.Stdin, cmd.Stdout = tty, tty
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", editor, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, errors.New("the edited arguments are not JSON")
	}
	return json.RawMessage(bytes.TrimSpace(b)), nil
}

// tail follows a conversation's events, printed for a person, until
// interrupted (`agentd events` prints them as JSON lines).
func tail(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	stdout, stderr = terminalWriter{stdout}, terminalWriter{stderr}
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, getenv)
	conv := fs.String("conversation", "", "conversation id")
	last := fs.Int64("last-event-id", 0, "start after this event id")
	if err := fs.Parse(args); err != nil || *conv == "" {
		fmt.Fprintln(stderr, "usage: agentd tail --conversation ID [--last-event-id N]")
		return errUsage
	}
	h := http.Header{}
	if cf.key != "" {
		h.Set("Authorization", "Bearer "+cf.key)
	}
	p := &printer{w: stdout}
	err := sse.Follow(ctx, cf.base()+"/v1/conversations/"+url.PathEscape(*conv)+"/events", sse.FollowOptions{Header: h, LastEventID: *last},
		func(e agentd.Event) error { p.event(e); return nil })
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// approvals lists the pending approvals the key reaches, or decides one.
func approvals(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const use = "usage: agentd approvals [list] | approvals approve CALL_ID [--reason TEXT] | approvals deny CALL_ID [--reason TEXT]"
	stdout, stderr = terminalWriter{stdout}, terminalWriter{stderr}
	if len(args) > 0 && (args[0] == "approve" || args[0] == "deny") {
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			fmt.Fprintln(stderr, use)
			return errUsage
		}
		rest := append([]string{args[1]}, args[2:]...)
		if args[0] == "deny" {
			rest = append(rest, "--deny")
		}
		return approve(ctx, rest, getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "list" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("approvals", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, getenv)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, use)
		return errUsage
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CALL\tWHAT\tDEADLINE\tCONVERSATION")
	n, cursor := 0, ""
	for {
		var page struct {
			Approvals  []agentd.ToolCall `json:"approvals"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := cf.json(ctx, http.MethodGet, "/v1/approvals?status=pending&cursor="+url.QueryEscape(cursor), nil, &page); err != nil {
			return err
		}
		for _, c := range page.Approvals {
			what := c.Name
			if c.ConnectionName != "" {
				what = fmt.Sprintf("%s %s on %s", c.Method, or(c.PathTemplate, c.Endpoint), c.ConnectionName)
			}
			deadline := ""
			if c.RequiresApprovalAt != nil {
				deadline = c.RequiresApprovalAt.Local().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\n", c.ID, what, compact(c.Arguments, 80), deadline, c.ConversationID)
			n++
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if n == 0 {
		fmt.Fprintln(stdout, "nothing is waiting for approval")
		return nil
	}
	return tw.Flush()
}
