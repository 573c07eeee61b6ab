package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/jstest"
)

// slowProject is the test project with a tool "slow" that runs until the
// file <exec log>.gate exists, so that a test holds a run mid-way without
// timing: "slow please" → the text "Working on it now.", then slow, then
// "slow completed: all done here".
func slowProject(t *testing.T) (base, execLog string) {
	t.Helper()
	dir, execLog := writeProject(t, projectOpts{})
	path := filepath.Join(dir, "agent.json")
	raw, err := os.ReadFile(path)
	must(t, err)
	var agent map[string]any
	must(t, json.Unmarshal(raw, &agent))
	script := agent["model"].(map[string]any)["script"].(map[string]any)
	rules := []any{
		map[string]any{"when": map[string]any{"user": "(?i)^slow"}, "reply": map[string]any{"text": "Working on it now.",
			"tool_calls": []any{map[string]any{"name": "slow", "arguments": map[string]any{}}}}},
		map[string]any{"when": map[string]any{"tool_result": "slow"}, "reply": map[string]any{"text": "slow {{status}}: all done here"}},
	}
	script["rules"] = append(rules, script["rules"].([]any)...)
	raw, err = json.Marshal(agent)
	must(t, err)
	must(t, os.WriteFile(path, raw, 0o644))
	td := filepath.Join(dir, "tools", "slow")
	must(t, os.MkdirAll(td, 0o755))
	must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte(`#!/bin/sh
cat >/dev/null; while [ ! -f "$AGENTD_TEST_LOG.gate" ]; do sleep 0.05; done; echo slow >> "$AGENTD_TEST_LOG"; printf '{"done":true}'
`), 0o755))
	must(t, os.WriteFile(filepath.Join(td, "tool.json"), []byte(`{"name":"slow","description":"test tool slow","command":["/bin/sh","./run.sh"],"env":["AGENTD_TEST_LOG"]}`), 0o644))
	jstest.Node(t)
	jstest.Packages(t, jsDir)
	base, _ = startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	return base, execLog
}

// Issue 19, acceptance 3: the AI SDK's own chat client loses its stream
// mid-run (after the tool's input, while the tool runs), and a new chat
// with the messages it had calls resumeStream() — what useChat's
// resume: true does on mount — over DefaultChatTransport's GET
// {api}/{id}/stream. The server replays the active run and goes live; the
// SDK renders the rest exactly once: one assistant message, each text part
// the whole reply, the tool part once with its output. After the run, the
// same GET is 204.
func TestAISDKResumeStream(t *testing.T) {
	base, execLog := slowProject(t)
	var r struct {
		aisdkResult
		Cut struct {
			Frames []string `json:"frames"`
		} `json:"cut"`
		Before []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"before"`
		FirstError string `json:"firstError"`
	}
	must(t, json.Unmarshal(jsRun(t, base, "", "aisdk.mjs", "resume", "chat-resume", "slow please", execLog+".gate")[0], &r))
	if r.Fatal != "" {
		t.Fatalf("aisdk.mjs: %s", r.Fatal)
	}
	if len(r.Before) != 2 || r.FirstError == "" || strings.Contains(strings.Join(r.Cut.Frames, " "), "tool-output-available") {
		t.Fatalf("the first stream was not cut mid-run: error %q, messages %+v, frames %v", r.FirstError, r.Before, r.Cut.Frames)
	}
	if len(r.Requests) != 1 || r.Requests[0].Status != http.StatusOK || len(r.Requests[0].Problems) > 0 || r.Requests[0].Last != "[DONE]" {
		t.Fatalf("resume requests: %+v", r.Requests)
	}
	if r.Error != "" || len(r.Messages) != 2 || r.Messages[1].Role != "assistant" {
		t.Fatalf("messages after the resume (error %q): %+v", r.Error, r.Messages)
	}
	var texts []string
	tools := 0
	for _, p := range r.Messages[1].Parts {
		switch {
		case p["type"] == "text":
			texts = append(texts, p["text"].(string))
		case p["type"] == "tool-slow":
			tools++
			if p["state"] != "output-available" {
				t.Errorf("tool part %v", p)
			}
		}
	}
	if strings.Join(texts, "|") != "Working on it now.|slow completed: all done here" || tools != 1 {
		t.Errorf("text parts %q, %d tool parts (parts %v)", texts, tools, r.Messages[1].Parts)
	}
	t.Logf("cut after %d frames; resumed: %s", len(r.Cut.Frames), chunkTypes(r.Requests[0].Frames))
	if n := execCount(t, execLog, "slow"); n != 1 {
		t.Fatalf("slow ran %d times", n)
	}
	// The run has finished: nothing to resume.
	status, _ := call(t, http.MethodGet, base+"/v1/ai-sdk/chat/chat-resume/stream", "", "")
	if status != http.StatusNoContent {
		t.Errorf("GET stream after the run: %d, want 204", status)
	}
	if status, _ := call(t, http.MethodGet, base+"/v1/ai-sdk/chat/never-used/stream", "", ""); status != http.StatusNoContent {
		t.Errorf("GET stream of a new chat: %d, want 204", status)
	}
}

// aguiPost posts an AG-UI body and returns the response and a reader of
// its data frames.
func aguiPost(t *testing.T, base, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/ag-ui", strings.NewReader(body))
	must(t, err)
	resp, err := streamClient.Do(req)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/ag-ui: %d", resp.StatusCode)
	}
	return resp, bufio.NewReader(resp.Body)
}

// nextFrame reads the next AG-UI event of a stream (nil at its end).
func nextFrame(t *testing.T, r *bufio.Reader) map[string]any {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil
		}
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var f map[string]any
			must(t, json.Unmarshal([]byte(data), &f))
			return f
		}
	}
}

// AG-UI's reconnect, over plain HTTP (@ag-ui/client 1.0.0's HttpAgent has
// none): a client whose stream is cut mid-run sends the thread's next
// request with no new input and gets the rest of the active run — the
// tool's result, the reply, RUN_FINISHED — and nothing it had already.
func TestAGUIReconnect(t *testing.T) {
	base, execLog := slowProject(t)
	resp, r := aguiPost(t, base, `{"threadId":"t-reconnect","runId":"r1","messages":[{"id":"u1","role":"user","content":"slow please"}]}`)
	var first []string
	for f := nextFrame(t, r); f != nil; f = nextFrame(t, r) {
		first = append(first, f["type"].(string))
		if f["type"] == "TOOL_CALL_END" {
			break
		}
	}
	resp.Body.Close() // cut while the tool runs
	if got := strings.Join(first, " "); !strings.HasSuffix(got, "TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END") {
		t.Fatalf("first stream: %s", got)
	}
	resp, r = aguiPost(t, base, `{"threadId":"t-reconnect","runId":"r2","messages":[]}`)
	defer resp.Body.Close()
	must(t, os.WriteFile(execLog+".gate", []byte("open"), 0o644)) // the tool ends once the reconnect has started
	var types []string
	var text strings.Builder
	var last map[string]any
	for f := nextFrame(t, r); f != nil; f = nextFrame(t, r) {
		types = append(types, f["type"].(string))
		if f["type"] == "TEXT_MESSAGE_CONTENT" {
			text.WriteString(f["delta"].(string))
		}
		last = f
	}
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT TEXT_MESSAGE_START") || strings.Contains(got, "TOOL_CALL_START") {
		t.Errorf("reconnected stream: %s", got)
	}
	if text.String() != "slow completed: all done here" || last["type"] != "RUN_FINISHED" || last["outcome"].(map[string]any)["type"] != "success" {
		t.Errorf("reconnected stream: text %q, last %v", text.String(), last)
	}
	if n := execCount(t, execLog, "slow"); n != 1 {
		t.Fatalf("slow ran %d times", n)
	}
}
