package agui_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
	"github.com/agentd-dev/agentd/protocol/agui"
	"github.com/agentd-dev/agentd/protocol/protocoltest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden encodes the scenario with each ending: one frame per line.
func golden(t *testing.T) []byte {
	var buf bytes.Buffer
	write := func(frames []agui.Frame) {
		for _, f := range frames {
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
	}
	at := protocoltest.T0.Add(protocoltest.Deadline.Sub(protocoltest.T0) / 2)
	ends := []protocol.End{
		{Status: agentd.RunCompleted},
		protocoltest.ParkedEnd(),
		{Status: agentd.RunCancelled},
		{Status: agentd.RunFailed, Error: "the model is unavailable"},
	}
	for _, end := range ends {
		enc := agui.NewEncoder("thread-1", "run-1")
		write(enc.Start(protocoltest.T0))
		for _, it := range protocoltest.Scenario() {
			write(enc.Item(it))
		}
		write(enc.End(end, protocoltest.Conv, at))
	}
	enc := agui.NewEncoder("thread-1", "run-2")
	write(enc.Start(protocoltest.T0))
	write(enc.Error(agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed"), at))
	return buf.Bytes()
}

// TestGolden pins every frame the encoder writes for the scenario and each
// way a run ends (go test -update rewrites testdata/frames.jsonl). The same
// file is validated with @ag-ui/core's schemas by TestGoldenMatchesSDK in
// cmd/agentd.
func TestGolden(t *testing.T) {
	got := golden(t)
	file := filepath.Join("testdata", "frames.jsonl")
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("frames differ from %s (go test -update rewrites it):\n%s", file, got)
	}
}

// FuzzEncoder feeds the encoder any subsequence of the scenario's events,
// in any order, and checks what every AG-UI stream must hold: RUN_STARTED
// first and one RUN_FINISHED or RUN_ERROR last; text messages opened before
// their content and closed once, never two open at once; each call started
// at most once, its ARGS (JSON) and END right after its START; results
// with JSON content; every frame with its required fields and
// epoch-millisecond timestamps.
func FuzzEncoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{3, 14, 1, 9, 12, 0, 0, 2})
	f.Add([]byte{})
	items := protocoltest.Scenario()
	f.Fuzz(func(t *testing.T, order []byte) {
		enc := agui.NewEncoder("th", "r")
		frames := enc.Start(protocoltest.T0)
		for _, b := range order {
			frames = append(frames, enc.Item(items[int(b)%len(items)])...)
		}
		end := protocol.End{Status: []agentd.RunStatus{agentd.RunCompleted, agentd.RunWaiting, agentd.RunFailed, agentd.RunCancelled}[len(order)%4]}
		if end.Status == agentd.RunWaiting {
			end = protocoltest.ParkedEnd()
		}
		frames = append(frames, enc.End(end, protocoltest.Conv, protocoltest.T0)...)
		if err := checkStream(frames); err != nil {
			t.Fatalf("%v\norder %v", err, order)
		}
	})
}

func checkStream(frames []agui.Frame) error {
	if len(frames) < 2 || frames[0].Type != agui.RunStarted {
		return fmt.Errorf("stream does not open with RUN_STARTED")
	}
	open, started, textEnded := "", map[string]bool{}, map[string]bool{}
	for i, f := range frames {
		if f.Timestamp < 1e12 {
			return fmt.Errorf("frame %d: timestamp %d is not epoch milliseconds", i, f.Timestamp)
		}
		if _, err := json.Marshal(f); err != nil {
			return err
		}
		last := i == len(frames)-1
		switch f.Type {
		case agui.RunFinished, agui.RunError:
			if !last {
				return fmt.Errorf("frame %d: %s before the end", i, f.Type)
			}
			if open != "" {
				return fmt.Errorf("the run ends with text message %s open", open)
			}
			if f.Type == agui.RunFinished && (f.Outcome == nil || f.ThreadID == "" || f.RunID == "") {
				return fmt.Errorf("RUN_FINISHED without outcome or ids: %+v", f)
			}
			if f.Type == agui.RunError && f.Message == "" {
				return fmt.Errorf("RUN_ERROR without message")
			}
		case agui.TextMessageStart:
			if open != "" || f.MessageID == "" || textEnded[f.MessageID] {
				return fmt.Errorf("frame %d: TEXT_MESSAGE_START %s while %q is open or after its end", i, f.MessageID, open)
			}
			open = f.MessageID
		case agui.TextMessageContent:
			if open != f.MessageID || f.Delta == nil {
				return fmt.Errorf("frame %d: content of %s while %q is open", i, f.MessageID, open)
			}
		case agui.TextMessageEnd:
			if open != f.MessageID {
				return fmt.Errorf("frame %d: end of %s while %q is open", i, f.MessageID, open)
			}
			open, textEnded[f.MessageID] = "", true
		case agui.ToolCallStart:
			if started[f.ToolCallID] || f.ToolCallName == "" || open != "" {
				return fmt.Errorf("frame %d: TOOL_CALL_START %s again, unnamed, or inside text", i, f.ToolCallID)
			}
			started[f.ToolCallID] = true
			if i+2 >= len(frames) || frames[i+1].Type != agui.ToolCallArgs || frames[i+2].Type != agui.ToolCallEnd ||
				frames[i+1].ToolCallID != f.ToolCallID || frames[i+2].ToolCallID != f.ToolCallID || frames[i+1].Delta == nil || !json.Valid([]byte(*frames[i+1].Delta)) {
				return fmt.Errorf("frame %d: TOOL_CALL_START not followed by its ARGS (JSON) and END", i)
			}
		case agui.ToolCallResult:
			if f.MessageID == "" || f.Content == nil || !json.Valid([]byte(*f.Content)) || open != "" {
				return fmt.Errorf("frame %d: TOOL_CALL_RESULT without message id or JSON content, or inside text", i)
			}
		case agui.RunStarted:
			if i != 0 {
				return fmt.Errorf("frame %d: RUN_STARTED again", i)
			}
		case agui.ToolCallArgs, agui.ToolCallEnd:
		default:
			return fmt.Errorf("frame %d: unknown type %q", i, f.Type)
		}
	}
	if t := frames[len(frames)-1].Type; t != agui.RunFinished && t != agui.RunError {
		return fmt.Errorf("stream ends with %s", t)
	}
	return nil
}

// The resume payload's rules: approve, deny with reason, edit, cancelled,
// and what is refused.
func TestInput(t *testing.T) {
	base := agui.RunAgentInput{ThreadID: "t", RunID: "r"}
	for _, tc := range []struct {
		name    string
		resume  string
		want    string // decision, or the error code
		reason  string
		edited  bool
		message string
	}{
		{name: "approve", resume: `[{"interruptId":"c1","status":"resolved","payload":{"approved":true}}]`, want: "approve"},
		{name: "deny", resume: `[{"interruptId":"c1","status":"resolved","payload":{"approved":false,"reason":"no"}}]`, want: "deny", reason: "no"},
		{name: "edit", resume: `[{"interruptId":"c1","status":"resolved","payload":{"approved":true,"editedArgs":{"amount":1}}}]`, want: "edit", edited: true},
		{name: "cancelled", resume: `[{"interruptId":"c1","status":"cancelled"}]`, want: "deny", reason: "cancelled"},
		{name: "no approved", resume: `[{"interruptId":"c1","status":"resolved","payload":{}}]`, want: agentd.EINVALID},
		{name: "unknown payload field", resume: `[{"interruptId":"c1","status":"resolved","payload":{"approved":true,"amount":3}}]`, want: agentd.EINVALID},
		{name: "approved not a boolean", resume: `[{"interruptId":"c1","status":"resolved","payload":{"approved":"yes"}}]`, want: agentd.EINVALID},
		{name: "bad status", resume: `[{"interruptId":"c1","status":"done","payload":{"approved":true}}]`, want: agentd.EINVALID},
		{name: "twice", resume: `[{"interruptId":"c1","status":"cancelled"},{"interruptId":"c1","status":"cancelled"}]`, want: agentd.EINVALID},
		{name: "no id", resume: `[{"status":"cancelled"}]`, want: agentd.EINVALID},
		{name: "deny with edit", resume: `[{"interruptId":"c1","status":"resolved","payload":{"approved":false,"editedArgs":{}}}]`, want: agentd.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			if err := json.Unmarshal([]byte(tc.resume), &in.Resume); err != nil {
				t.Fatal(err)
			}
			got, err := in.Input()
			if err != nil {
				if agentd.ErrorCode(err) != tc.want {
					t.Fatalf("Input: %v, want %s", err, tc.want)
				}
				return
			}
			if len(got.Answers) != 1 {
				t.Fatalf("decisions %+v, want %s", got.Answers, tc.want)
			}
			d := got.Answers[0]
			if d.ToolCallID != "c1" || d.Request.Decision != tc.want || d.Request.Reason != tc.reason || (len(d.Request.Arguments) > 0) != tc.edited {
				t.Errorf("decision %+v", d)
			}
		})
	}
	// Only a trailing user message is read, as a string or as text parts.
	for _, tc := range []struct{ messages, want, code string }{
		{`[{"id":"1","role":"user","content":"old"},{"id":"2","role":"assistant","content":"hi"}]`, "", ""},
		{`[{"id":"1","role":"assistant","content":"hi"},{"id":"2","role":"user","content":"pay"}]`, "pay", ""},
		{`[{"id":"2","role":"user","content":[{"type":"text","text":"pay "},{"type":"binary","mimeType":"image/png"},{"type":"text","text":"now"}]}]`, "pay now", ""},
		{`[{"id":"2","role":"user","content":42}]`, "", agentd.EINVALID},
		{`["not a message"]`, "", agentd.EINVALID},
	} {
		in := base
		if err := json.Unmarshal([]byte(tc.messages), &in.Messages); err != nil {
			t.Fatal(err)
		}
		got, err := in.Input()
		if agentd.ErrorCode(err) != tc.code || got.Message != tc.want {
			t.Errorf("messages %s: %q, %v; want %q, %q", tc.messages, got.Message, err, tc.want, tc.code)
		}
	}
	for _, in := range []agui.RunAgentInput{{RunID: "r"}, {ThreadID: "t"}, {ThreadID: string(make([]byte, 300)), RunID: "r"}} {
		if _, err := in.Input(); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("Input(%.20q, %.20q) = %v, want invalid", in.ThreadID, in.RunID, err)
		}
	}
}

// Issue 17 finding 4: a resume payload's keys are those of its
// responseSchema exactly (additionalProperties false): a key in another
// case is refused, not taken for the field encoding/json would match.
func TestResumePayloadKeysAreCaseSensitive(t *testing.T) {
	for _, payload := range []string{`{"APPROVED":true}`, `{"Approved":false}`, `{"approved":true,"Reason":"x"}`,
		`{"approved":true,"argumentssha256":"` + strings.Repeat("a", 64) + `"}`, `{"approved":true,"EditedArgs":{}}`} {
		in := agui.RunAgentInput{ThreadID: "t", RunID: "r",
			Resume: []agui.ResumeEntry{{InterruptID: "c1", Status: "resolved", Payload: json.RawMessage(payload)}}}
		if _, err := in.Input(); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("payload %s: %v, want invalid", payload, err)
		}
	}
	// A user message's keys too.
	in := agui.RunAgentInput{ThreadID: "t", RunID: "r", Messages: []json.RawMessage{json.RawMessage(`{"id":"1","ROLE":"user","content":"pay"}`)}}
	if got, err := in.Input(); agentd.ErrorCode(err) != agentd.EINVALID {
		t.Errorf("a user message with ROLE: %+v %v, want invalid", got, err)
	}
}
