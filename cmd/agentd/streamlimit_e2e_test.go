package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStreamLimitOnTheBinary: the per-key stream limit holds on the real
// binary, configured in agentd.json (issue 17, finding 8: one key could
// open streams until the process ran out of descriptors). One stream over
// limits.max_streams_per_key is 429 too_many_streams with Retry-After;
// another key of the tenant is not affected; a closed stream frees its slot.
func TestStreamLimitOnTheBinary(t *testing.T) {
	keyA, keyB := "key-stream-limit-a-0123456789", "key-stream-limit-b-0123456789"
	dir, _ := writeProject(t, projectOpts{keys: map[string][3]string{
		keyA: {"tenant-a", "client", ""}, keyB: {"tenant-a", "client", ""}}})
	conf := filepath.Join(dir, "agentd.json")
	raw, err := os.ReadFile(conf)
	must(t, err)
	var doc map[string]any
	must(t, json.Unmarshal(raw, &doc))
	doc["limits"] = map[string]any{"max_streams_per_key": 2}
	raw, _ = json.Marshal(doc)
	must(t, os.WriteFile(conf, raw, 0o644))
	base, _ := startProcess(t, agentdBinary(t), dir, t.TempDir())

	open := func(key string) *http.Response {
		t.Helper()
		status, m := call(t, http.MethodPost, base+"/v1/conversations", key, "")
		if status != http.StatusCreated && status != http.StatusOK {
			t.Fatalf("create conversation: %d %v", status, m)
		}
		req, err := http.NewRequest(http.MethodGet, base+"/v1/conversations/"+m["id"].(string)+"/events", nil)
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	a1, a2 := open(keyA), open(keyA)
	for i, r := range []*http.Response{a1, a2} {
		if r.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of key A: %d", i+1, r.StatusCode)
		}
	}
	over := open(keyA)
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(over.Body).Decode(&body)
	if over.StatusCode != http.StatusTooManyRequests || body.Error.Code != "too_many_streams" || over.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream of key A: %d %q Retry-After %q, want 429 too_many_streams with Retry-After",
			over.StatusCode, body.Error.Code, over.Header.Get("Retry-After"))
	}
	if b := open(keyB); b.StatusCode != http.StatusOK {
		t.Fatalf("key B beside key A's full slots: %d", b.StatusCode)
	}
	a1.Body.Close()
	deadline := time.Now().Add(waitLimit)
	for {
		r := open(keyA)
		if r.StatusCode == http.StatusOK {
			break
		}
		r.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream never freed its slot: still %d", r.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := open(keyA); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after the freed slot was taken again: %d, want 429", r.StatusCode)
	}
}
