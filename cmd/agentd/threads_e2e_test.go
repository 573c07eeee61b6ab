package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// protoPost posts body to a chat-protocol endpoint and returns the status,
// the X-Agentd-Conversation-Id header and the data frames of the stream.
func protoPost(t *testing.T, base, key, path, body string) (int, string, []map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := testClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	var frames []map[string]any
	for _, l := range strings.Split(string(raw), "\n") {
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var m map[string]any
		must(t, json.Unmarshal([]byte(d), &m))
		frames = append(frames, m)
	}
	if resp.StatusCode != http.StatusOK {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		frames = append(frames, m)
	}
	return resp.StatusCode, resp.Header.Get("X-Agentd-Conversation-Id"), frames
}

// interruptIDs are the interrupts of an AG-UI stream's RUN_FINISHED.
func interruptIDs(frames []map[string]any) []string {
	var ids []string
	for _, f := range frames {
		out, _ := f["outcome"].(map[string]any)
		is, _ := out["interrupts"].([]any)
		for _, i := range is {
			ids = append(ids, i.(map[string]any)["id"].(string))
		}
	}
	return ids
}

// Issue 17 finding 5: a thread name is the key's own. Two client keys of one
// tenant using the docs' example name each get their own conversation (it
// was 404 "thread not found" for every key after the first); an operator's
// "my-chat" is its own too, and it reaches a client's conversation by its
// id; another key's interrupt is unknown on a key's own thread.
func TestThreadNamesArePerKey(t *testing.T) {
	alice, bob, op := "key-alice-threads-0123", "key-bob-threads-0123", "key-op-threads-0123"
	dir, execLog := writeProject(t, projectOpts{keys: map[string][3]string{
		alice: {"t1", "client", ""}, bob: {"t1", "client", ""}, op: {"t1", "operator", ""}}})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})

	agui := func(key, thread, msgs string) (int, string, []map[string]any) {
		t.Helper()
		return protoPost(t, base, key, "/v1/ag-ui", fmt.Sprintf(`{"threadId":%q,"runId":"r","messages":%s}`, thread, msgs))
	}
	pay := `[{"id":"u1","role":"user","content":"pay the invoice"}]`
	status, convA, framesA := agui(alice, "my-chat", pay)
	if status != http.StatusOK || convA == "" || len(interruptIDs(framesA)) != 1 {
		t.Fatalf("alice on my-chat: %d %q %v", status, convA, framesA)
	}
	callA := interruptIDs(framesA)[0]
	status, convB, framesB := agui(bob, "my-chat", pay)
	if status != http.StatusOK || convB == "" || convB == convA || len(interruptIDs(framesB)) != 1 {
		t.Fatalf("bob on my-chat: %d conversation %q (alice's %q) %v", status, convB, convA, framesB)
	}
	// Each key's next request on the name reaches its own conversation.
	for key, want := range map[string]string{alice: convA, bob: convB} {
		if status, conv, _ := agui(key, "my-chat", `[]`); status != http.StatusOK || conv != want {
			t.Errorf("follow my-chat: %d %q, want %q", status, conv, want)
		}
	}
	// Bob resuming Alice's call on his own thread: an unknown interrupt; it stays parked.
	_, _, frames := agui(bob, "my-chat", fmt.Sprintf(`[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]`, callA))
	if e := frames[len(frames)-1]; e["type"] != "RUN_ERROR" || e["code"] != "not_found" {
		t.Errorf("bob resuming alice's interrupt: %v", frames)
	}
	if c := getCall(t, base, alice, callA); c["status"] != "requires_confirmation" {
		t.Fatalf("alice's call after bob's resume: %v", c["status"])
	}
	// The operator's "my-chat" is its own conversation; Alice's it reaches by id.
	status, convO, _ := agui(op, "my-chat", pay)
	if status != http.StatusOK || convO == "" || convO == convA || convO == convB {
		t.Errorf("operator on my-chat: %d %q (alice %q, bob %q)", status, convO, convA, convB)
	}
	if status, conv, _ := agui(op, convA, `[]`); status != http.StatusOK || conv != convA {
		t.Errorf("operator naming alice's conversation: %d %q", status, conv)
	}
	// The AI SDK's chat ids are per key as well.
	aisdk := func(key string) string {
		status, conv, frames := protoPost(t, base, key, "/v1/ai-sdk/chat",
			`{"id":"my-chat","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"pay the invoice"}]}]}`)
		if status != http.StatusOK || conv == "" {
			t.Fatalf("AI SDK my-chat: %d %v", status, frames)
		}
		return conv
	}
	if a, b := aisdk(alice), aisdk(bob); a == b || a == convA || b == convB {
		t.Errorf("AI SDK my-chat: alice %q, bob %q (AG-UI: %q, %q)", a, b, convA, convB)
	}
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Errorf("pay ran %d times", n)
	}
}
