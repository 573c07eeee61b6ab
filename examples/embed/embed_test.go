package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// The example, built with go build and run as a real process on a
// loopback port: one message makes the script model call both Go tools;
// lookup_weather (open) runs at once, send_invoice (requires-confirmation)
// parks with its card like any tool and runs exactly once after approval.
func TestEmbedExample(t *testing.T) {
	bin := buildExample(t)
	base, proc := startExample(t, bin)

	var tools struct {
		Tools []struct {
			Name     string `json:"name"`
			ServerID string `json:"server_id"`
			Tier     string `json:"tier"`
		}
	}
	getJSON(t, base+"/v1/tools", &tools)
	tiers := map[string]string{}
	for _, tl := range tools.Tools {
		tiers[tl.Name] = tl.ServerID + "/" + tl.Tier
	}
	if tiers["lookup_weather"] != "go/auto" || tiers["send_invoice"] != "go/confirm" || len(tiers) != 2 {
		t.Fatalf("GET /v1/tools: %v", tiers)
	}

	var conv struct{ ID string }
	postJSON(t, base+"/v1/conversations", `{}`, http.StatusCreated, &conv)
	events := follow(t, base, conv.ID)
	postJSON(t, base+"/v1/conversations/"+conv.ID+"/messages", `{"content":"please send the invoice"}`, http.StatusAccepted, nil)

	// Until the run waits and the weather's call ended (in either order):
	// the weather ran without anyone's approval, the invoice is parked
	// with a card and has not started.
	var card struct {
		ToolCallID      string          `json:"tool_call_id"`
		ToolName        string          `json:"tool_name"`
		ServerID        string          `json:"server_id"`
		Params          json.RawMessage `json:"params"`
		ArgumentsSHA256 string          `json:"arguments_sha256"`
		Card            struct {
			Summary   string          `json:"summary"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"card"`
	}
	weather, waiting := "", false
	for e := range events.until(func() bool { return waiting && weather != "" }) {
		switch e.Type {
		case "run_waiting":
			waiting = true
		case "confirmation_required":
			must(t, json.Unmarshal(e.Data, &card))
		case "tool_call_result":
			if name, status, result := resultOf(t, e); name == "lookup_weather" && status == "completed" {
				weather = result
			}
		case "tool_call_started":
			if name, _, _ := resultOf(t, e); name == "send_invoice" {
				t.Fatal("send_invoice started before its approval")
			}
		}
	}
	if weather != `{"city":"Lisbon","sky":"sunny","high_c":24}` {
		t.Errorf("lookup_weather's result before the approval: %q", weather)
	}
	wantArgs := `{"customer":"ana@example.com","amount_cents":12000,"currency":"EUR","memo":"March"}`
	if card.ToolName != "send_invoice" || card.ServerID != "go" || compact(t, card.Params) != wantArgs ||
		compact(t, card.Card.Arguments) != wantArgs || card.Card.Summary != "Send this invoice to the customer?" {
		t.Fatalf("confirmation_required: %+v", card)
	}
	var parked struct{ Tier, Status string }
	getJSON(t, base+"/v1/tool-calls/"+card.ToolCallID, &parked)
	if parked.Tier != "confirm" || parked.Status != "requires_confirmation" {
		t.Fatalf("the parked call: %+v", parked)
	}
	if n := invoicesSent(proc); n != 0 {
		t.Fatalf("%d invoices sent before the approval", n)
	}

	approval := `{"decision":"approve","arguments_sha256":"` + card.ArgumentsSHA256 + `"}`
	postJSON(t, base+"/v1/tool-calls/"+card.ToolCallID+"/approval", approval, http.StatusOK, nil)
	invoice, final := "", ""
	finished := false
	for e := range events.until(func() bool { return finished }) {
		switch e.Type {
		case "tool_call_result":
			if name, status, result := resultOf(t, e); name == "send_invoice" && status == "completed" {
				invoice = result
			}
		case "run_finished":
			finished = true
		case "message":
			var m struct{ Content string }
			must(t, json.Unmarshal(e.Data, &m))
			final = m.Content
		}
	}
	if invoice != `{"number":"INV-0001","customer":"ana@example.com","amount":"120.00 EUR"}` || !strings.Contains(final, "INV-0001") {
		t.Errorf("after the approval: result %q, message %q", invoice, final)
	}
	// A second approval answers from the stored decision; nothing runs again.
	postJSON(t, base+"/v1/tool-calls/"+card.ToolCallID+"/approval", approval, http.StatusOK, nil)
	proc.stop(t)
	if n := invoicesSent(proc); n != 1 {
		t.Errorf("%d invoices sent, want exactly 1:\n%s", n, proc.stdout.String())
	}
}

func buildExample(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "embed")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/embed: %v\n%s", err, out)
	}
	return bin
}

type process struct {
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
}

// startExample runs the example on a free loopback port with its project
// and a fresh data folder, and returns its base URL.
func startExample(t *testing.T, bin string) (string, *process) {
	t.Helper()
	dir, err := filepath.Abs("project")
	must(t, err)
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--project", dir, "--addr", "127.0.0.1:0", "--data", t.TempDir())
	p.cmd.Env = append(os.Environ(), "AGENTD_LOG_LEVEL=warn")
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	must(t, err)
	must(t, p.cmd.Start())
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "agentd listening on http://") {
		t.Fatalf("the example did not start: %q %v\n%s", line, err, p.stderr.String())
	}
	go func() {
		_, _ = io.Copy(&p.stdout, r)
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return strings.TrimSpace(strings.TrimPrefix(line, "agentd listening on ")), p
}

// stop ends the process as a person would (SIGTERM) and waits for it.
func (p *process) stop(t *testing.T) {
	t.Helper()
	must(t, p.cmd.Process.Signal(syscall.SIGTERM))
	<-p.done
	if !p.cmd.ProcessState.Success() {
		t.Errorf("the example exited with %v\n%s", p.cmd.ProcessState, p.stderr.String())
	}
}

func invoicesSent(p *process) int { return strings.Count(p.stdout.String(), "invoice INV-") }

// stream is a conversation's events as they arrive.
type stream struct {
	t  *testing.T
	ch chan agentd.Event
}

// follow reads the conversation's event stream from its start until the
// test ends.
func follow(t *testing.T, base, conv string) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{t: t, ch: make(chan agentd.Event, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sse.Follow(ctx, base+"/v1/conversations/"+conv+"/events", sse.FollowOptions{}, func(e agentd.Event) error {
			select {
			case s.ch <- e:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// until yields the events until done reports true after one; a stream
// that stops short of that fails the test instead of hanging.
func (s *stream) until(done func() bool) func(func(agentd.Event) bool) {
	return func(yield func(agentd.Event) bool) {
		timeout := time.NewTimer(30 * time.Second)
		defer timeout.Stop()
		for {
			select {
			case e := <-s.ch:
				if !yield(e) || done() {
					return
				}
			case <-timeout.C:
				s.t.Fatal("the stream stopped short of the events the test waits for")
			}
		}
	}
}

func resultOf(t *testing.T, e agentd.Event) (name, status, result string) {
	t.Helper()
	var r struct {
		ToolName string          `json:"tool_name"`
		Status   string          `json:"status"`
		Result   json.RawMessage `json:"result"`
	}
	must(t, json.Unmarshal(e.Data, &r))
	return r.ToolName, r.Status, string(r.Result)
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	must(t, json.NewDecoder(resp.Body).Decode(out))
}

func postJSON(t *testing.T, url, body string, want int, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, b, want)
	}
	if out != nil {
		must(t, json.Unmarshal(b, out))
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	must(t, json.Compact(&b, raw))
	return b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
