package aisdk_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/protocol"
	"github.com/agentd-dev/agentd/protocol/aisdk"
	"github.com/agentd-dev/agentd/protocol/protocoltest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T) []byte {
	var buf bytes.Buffer
	write := func(chunks []aisdk.Chunk) {
		for _, c := range chunks {
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
	}
	for _, end := range []protocol.End{
		{Status: agentd.RunCompleted},
		protocoltest.ParkedEnd(),
		{Status: agentd.RunCancelled},
		{Status: agentd.RunFailed, Error: "the model is unavailable"},
	} {
		enc := aisdk.NewEncoder()
		write(enc.Start(protocoltest.Run))
		for _, it := range protocoltest.Scenario() {
			write(enc.Item(it))
		}
		write(enc.End(end))
	}
	enc := aisdk.NewEncoder()
	write(enc.Start(protocoltest.Run))
	write(enc.Expired(protocol.Expired{ToolCallID: protocoltest.Parked, Message: "the approval deadline passed; nothing was done"}))
	write(enc.Fail(agentd.Errorf(agentd.EUNAVAILABLE, "server is shutting down")))
	return buf.Bytes()
}

// TestGolden pins every chunk the encoder writes for the scenario and each
// way a run ends (go test -update rewrites testdata/chunks.jsonl). The same
// file is validated with the SDK's uiMessageChunkSchema by
// TestGoldenMatchesSDK in cmd/agentd.
func TestGolden(t *testing.T) {
	got := golden(t)
	file := filepath.Join("testdata", "chunks.jsonl")
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
		t.Errorf("chunks differ from %s (go test -update rewrites it):\n%s", file, got)
	}
}

// FuzzEncoder feeds the encoder any subsequence of the scenario's events in
// any order and checks what the SDK's stream reader relies on: start first
// and finish or error last; text parts started before their deltas, ended
// once, one open at a time; a tool part started once, with its input right
// after, before any approval request or output for it; steps not nested,
// each closed before the end and with no text open.
func FuzzEncoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{3, 14, 1, 9, 12, 0, 0, 2})
	items := protocoltest.Scenario()
	f.Fuzz(func(t *testing.T, order []byte) {
		enc := aisdk.NewEncoder()
		chunks := enc.Start(protocoltest.Run)
		for _, b := range order {
			chunks = append(chunks, enc.Item(items[int(b)%len(items)])...)
		}
		end := protocol.End{Status: []agentd.RunStatus{agentd.RunCompleted, agentd.RunWaiting, agentd.RunFailed, agentd.RunCancelled}[len(order)%4]}
		chunks = append(chunks, enc.End(end)...)
		if err := checkStream(chunks); err != nil {
			t.Fatalf("%v\norder %v", err, order)
		}
	})
}

func checkStream(chunks []aisdk.Chunk) error {
	if chunks[0].Type != aisdk.Start || chunks[0].MessageID == "" {
		return fmt.Errorf("stream does not open with start and a message id")
	}
	open, ended, tools, step := "", map[string]bool{}, map[string]bool{}, false
	for i, c := range chunks {
		if _, err := json.Marshal(c); err != nil {
			return err
		}
		last := i == len(chunks)-1
		switch c.Type {
		case aisdk.Start:
			if i != 0 {
				return fmt.Errorf("chunk %d: start again", i)
			}
		case aisdk.Finish, aisdk.Error:
			if !last || open != "" || step {
				return fmt.Errorf("chunk %d: %s before the end, with text %q open or a step open (%v)", i, c.Type, open, step)
			}
		case aisdk.StartStep:
			if step {
				return fmt.Errorf("chunk %d: start-step in a step", i)
			}
			step = true
		case aisdk.FinishStep:
			if !step || open != "" {
				return fmt.Errorf("chunk %d: finish-step with no step open or text %q open", i, open)
			}
			step = false
		case aisdk.TextStart:
			if open != "" || ended[c.ID] {
				return fmt.Errorf("chunk %d: text-start %s while %q open or after its end", i, c.ID, open)
			}
			open = c.ID
		case aisdk.TextDelta:
			if open != c.ID || c.Delta == nil {
				return fmt.Errorf("chunk %d: text-delta of %s while %q open", i, c.ID, open)
			}
		case aisdk.TextEnd:
			if open != c.ID {
				return fmt.Errorf("chunk %d: text-end of %s while %q open", i, c.ID, open)
			}
			open, ended[c.ID] = "", true
		case aisdk.ToolInputStart:
			if tools[c.ToolCallID] || c.ToolName == "" || i+1 >= len(chunks) || chunks[i+1].Type != aisdk.ToolInputAvailable ||
				chunks[i+1].ToolCallID != c.ToolCallID || !json.Valid(chunks[i+1].Input) {
				return fmt.Errorf("chunk %d: tool-input-start %s again, unnamed, or without its input", i, c.ToolCallID)
			}
			tools[c.ToolCallID] = true
		case aisdk.ToolApprovalRequest:
			if !tools[c.ToolCallID] || c.ApprovalID != c.ToolCallID {
				return fmt.Errorf("chunk %d: approval request for a tool part not started: %+v", i, c)
			}
		case aisdk.ToolOutputAvailable:
			if !json.Valid(c.Output) {
				return fmt.Errorf("chunk %d: output is not JSON", i)
			}
		case aisdk.ToolOutputError:
			if c.ErrorText == "" {
				return fmt.Errorf("chunk %d: tool-output-error without text", i)
			}
		case aisdk.ToolInputAvailable, aisdk.ToolOutputDenied:
		default:
			return fmt.Errorf("chunk %d: unknown type %q", i, c.Type)
		}
	}
	if t := chunks[len(chunks)-1].Type; t != aisdk.Finish && t != aisdk.Error {
		return fmt.Errorf("stream ends with %s", t)
	}
	return nil
}

// Only the last message is read: a user message's text parts, or an
// assistant message's approval responses.
func TestInput(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		message    string
		decisions  string // "id:decision:reason,…"
		code       string
	}{
		{name: "user text", body: `{"id":"c","messages":[{"id":"1","role":"assistant","parts":[]},{"id":"2","role":"user","parts":[{"type":"text","text":"pay "},{"type":"file","url":"x"},{"type":"text","text":"now"}]}]}`, message: "pay now"},
		{name: "approvals", body: `{"id":"c","trigger":"submit-message","messages":[{"id":"r","role":"assistant","parts":[{"type":"text","text":"ok"},` +
			`{"type":"tool-pay","toolCallId":"c1","state":"approval-responded","input":{},"approval":{"id":"c1","approved":true}},` +
			`{"type":"tool-pay","toolCallId":"c2","state":"approval-responded","input":{},"approval":{"id":"c2","approved":false,"reason":"no"}},` +
			`{"type":"tool-pay","toolCallId":"c3","state":"output-available","input":{},"output":1,"approval":{"id":"c3","approved":true}},` +
			`{"type":"dynamic-tool","toolName":"x","toolCallId":"c4","state":"approval-requested","input":{},"approval":{"id":"c4"}}]}]}`,
			decisions: "c1:approve:,c2:deny:no,"},
		{name: "nothing new", body: `{"id":"c","messages":[{"id":"r","role":"assistant","parts":[{"type":"text","text":"done"}]}]}`},
		{name: "no id", body: `{"messages":[]}`, code: agentd.EINVALID},
		{name: "regenerate", body: `{"id":"c","trigger":"regenerate-message","messages":[]}`, code: agentd.EINVALID},
		{name: "approval without approved", body: `{"id":"c","messages":[{"id":"r","role":"assistant","parts":[{"type":"tool-pay","toolCallId":"c1","state":"approval-responded","approval":{"id":"c1"}}]}]}`, code: agentd.EINVALID},
		{name: "parts not an array", body: `{"id":"c","messages":[{"id":"r","role":"user","parts":"pay"}]}`, code: agentd.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r aisdk.ChatRequest
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			in, err := r.Input()
			if agentd.ErrorCode(err) != tc.code {
				t.Fatalf("Input: %v, want %q", err, tc.code)
			}
			got := ""
			for _, d := range in.Answers {
				got += d.ToolCallID + ":" + d.Request.Decision + ":" + d.Request.Reason + ","
			}
			if in.Message != tc.message || got != tc.decisions {
				t.Errorf("Input = %q / %q, want %q / %q", in.Message, got, tc.message, tc.decisions)
			}
		})
	}
}

// Issue 17 finding 4: the keys agentd reads of a UIMessage match exactly,
// as the SDK writes and reads them: another case is refused, not taken for
// the field (other keys are the SDK's and ignored).
func TestInputKeysAreCaseSensitive(t *testing.T) {
	for _, msg := range []string{
		`{"id":"r","role":"assistant","parts":[{"type":"tool-pay","toolCallId":"c1","state":"approval-responded","approval":{"id":"c1","APPROVED":true}}]}`,
		`{"id":"r","role":"assistant","parts":[{"type":"tool-pay","toolCallId":"c1","STATE":"approval-responded","approval":{"id":"c1","approved":true}}]}`,
		`{"id":"r","Role":"user","parts":[{"type":"text","text":"pay"}]}`,
	} {
		r := aisdk.ChatRequest{ID: "c", Messages: []json.RawMessage{json.RawMessage(msg)}}
		if in, err := r.Input(); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("%s: %+v %v, want invalid", msg, in, err)
		}
	}
}
