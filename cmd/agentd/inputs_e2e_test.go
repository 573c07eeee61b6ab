package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// inputsAgent is a project agent with the ask_user tool (SPEC §12.1): "how
// many" makes the script model ask for a count, and it says what it got.
const inputsAgent = `{"name":"asker","model":{"provider":"script","script":{"rules":[
 {"when":{"user":"(?i)how many"},"reply":{"text":"Let me ask.","tool_calls":[{"name":"ask_user","arguments":
   {"message":"How many boxes?","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1,"title":"Boxes"}},"required":["n"]}}}]}},
 {"when":{"tool_result":"ask_user"},"reply":{"text":"You said {{result}}"}}
]}},"inputs":{"ask_user":true}}`

// writeInputsProject writes the project with keys c1 (its client), op (an
// operator of its tenant) and other (an admin of another tenant).
func writeInputsProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(inputsAgent), 0o644))
	var keys []map[string]string
	for _, k := range [][3]string{{"c1", "t1", "client"}, {"op", "t1", "operator"}, {"other", "t2", "admin"}} {
		sum := sha256.Sum256([]byte("key-" + k[0]))
		keys = append(keys, map[string]string{"id": k[0], "sha256": hex.EncodeToString(sum[:]), "tenant_id": k[1],
			"project_id": "p1", "role": k[2]})
	}
	b, _ := json.Marshal(map[string]any{"api_keys": keys})
	must(t, os.WriteFile(filepath.Join(dir, "agentd.json"), b, 0o644))
	return dir
}

// TestInputsOverHTTP: the model's ask_user call is an input on GET
// /v1/inputs; another tenant's key gets 404 for it, an operator the rule
// does not name 403 answerer_not_allowed; content outside the schema is
// 422 invalid_input with its fields and the card stays pending; of 20
// concurrent answers exactly one is 200 and the others 409 conflict; the
// run goes on with the answer as the call's result.
func TestInputsOverHTTP(t *testing.T) {
	base, _ := startServer(t, writeInputsProject(t), t.TempDir(), nil)
	_, conv := call(t, "POST", base+"/v1/conversations", "key-c1", `{}`)
	convID, _ := conv["id"].(string)
	status, sent := call(t, "POST", base+"/v1/conversations/"+convID+"/messages", "key-c1", `{"content":"How many boxes do I need?"}`)
	if status != http.StatusAccepted {
		t.Fatalf("send: %d %v", status, sent)
	}
	var in map[string]any
	waitFor(t, "the input", func() bool {
		_, page := call(t, "GET", base+"/v1/inputs?status=pending&answerable=true", "key-c1", "")
		ins, _ := page["inputs"].([]any)
		if len(ins) == 1 {
			in, _ = ins[0].(map[string]any)
		}
		return in != nil
	})
	id, _ := in["id"].(string)
	if in["message"] != "How many boxes?" || in["mode"] != "form" || in["source"] != "ask_user" || in["tool_name"] != "ask_user" {
		t.Fatalf("input %v", in)
	}
	answer := base + "/v1/inputs/" + id + "/answer"

	for _, key := range []string{"key-other"} {
		if st, _ := call(t, "GET", base+"/v1/inputs/"+id, key, ""); st != http.StatusNotFound {
			t.Errorf("another tenant's GET: %d, want 404", st)
		}
		if st, _ := call(t, "POST", answer, key, `{"action":"decline"}`); st != http.StatusNotFound {
			t.Errorf("another tenant's answer: %d, want 404", st)
		}
		_, page := call(t, "GET", base+"/v1/inputs", key, "")
		if ins, _ := page["inputs"].([]any); len(ins) != 0 {
			t.Errorf("another tenant lists %v", ins)
		}
	}
	if st, body := call(t, "POST", answer, "key-op", `{"action":"decline"}`); st != http.StatusForbidden || errCode(body) != "answerer_not_allowed" {
		t.Errorf("operator's answer: %d %v, want 403 answerer_not_allowed", st, body)
	}
	st, body := call(t, "POST", answer, "key-c1", `{"action":"accept","content":{"n":0,"colour":"red"}}`)
	if st != http.StatusUnprocessableEntity || errCode(body) != "invalid_input" {
		t.Fatalf("bad content: %d %v", st, body)
	}
	if fields, _ := body["error"].(map[string]any)["fields"].([]any); len(fields) != 2 {
		t.Errorf("fields %v, want colour and n", fields)
	}
	if _, cur := call(t, "GET", base+"/v1/inputs/"+id, "key-c1", ""); cur["status"] != "pending" {
		t.Fatalf("after a refused answer the input is %v", cur["status"])
	}

	codes := concurrentAnswers(t, answer, 20)
	if codes[http.StatusOK] != 1 || codes[http.StatusConflict] != 19 {
		t.Fatalf("20 concurrent answers: %v, want one 200 and nineteen 409", codes)
	}
	callID, _ := in["tool_call_id"].(string)
	waitFor(t, "the run's end", func() bool {
		_, c := call(t, "GET", base+"/v1/tool-calls/"+callID, "key-c1", "")
		_, r := call(t, "GET", base+"/v1/runs/"+fmt.Sprint(sent["run_id"]), "key-c1", "")
		return c["status"] == "completed" && r["status"] == "completed"
	})
	_, c := call(t, "GET", base+"/v1/tool-calls/"+callID, "key-c1", "")
	if ins, _ := c["inputs"].([]any); len(ins) != 1 || !strings.Contains(fmt.Sprint(c["result"]), "accept") {
		t.Errorf("the call %v", c)
	}
}

// concurrentAnswers posts n different accepted answers at once and counts
// the statuses.
func concurrentAnswers(t *testing.T, url string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, body := callRaw(t, "POST", url, "key-c1", fmt.Sprintf(`{"action":"accept","content":{"n":%d}}`, i+1))
			mu.Lock()
			defer mu.Unlock()
			codes[st]++
			if st == http.StatusConflict && !strings.Contains(string(body), `"conflict"`) {
				t.Errorf("409 body %s, want code conflict", body)
			}
		})
	}
	wg.Wait()
	return codes
}

// TestKill9WhileInputPending: the real binary dies (SIGKILL, with its
// process group) while an ask_user input is pending; after the restart the
// input is still pending with its deadline, the stream replays its
// input_required, and answering it resumes the run: the model reads the
// answer once and the run completes.
func TestKill9WhileInputPending(t *testing.T) {
	bin := agentdBinary(t)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), []byte(inputsAgent), 0o644))
	data := t.TempDir()

	base, proc := startProcess(t, bin, dir, data)
	conv, st := newConversation(t, base, "")
	run := send(t, base, "", conv, "how many boxes?")
	ir := st.waitFor("input_required", nil)
	id := str(ir.Data, "input_id")
	st.waitFor("run_waiting", nil)
	_, before := call(t, http.MethodGet, base+"/v1/inputs/"+id, "", "")

	must(t, syscall.Kill(-proc.Process.Pid, syscall.SIGKILL))
	_ = proc.Wait()
	st.close()

	base2, _ := startProcess(t, bin, dir, data)
	status, after := call(t, http.MethodGet, base2+"/v1/inputs/"+id, "", "")
	if status != http.StatusOK || after["status"] != "pending" || after["expires_at"] != before["expires_at"] {
		t.Fatalf("after restart: %d %v (before %v)", status, after, before)
	}
	st2 := openStream(t, base2, "", conv, 0)
	defer st2.close()
	if again := st2.waitFor("input_required", nil); str(again.Data, "input_id") != id {
		t.Fatalf("replayed input_required %v", again.Data)
	}
	if status, in := call(t, http.MethodPost, base2+"/v1/inputs/"+id+"/answer", "", `{"action":"accept","content":{"n":7}}`); status != http.StatusOK || in["status"] != "answered" {
		t.Fatalf("answer after restart: %d %v", status, in)
	}
	msg := st2.waitFor("message", func(ev sseEvent) bool { return strings.HasPrefix(str(ev.Data, "content"), "You said") })
	if c := str(msg.Data, "content"); !strings.Contains(c, `"n":7`) {
		t.Errorf("the model read %q", c)
	}
	fin := st2.waitFor("run_finished", nil)
	if str(fin.Data, "run_id") != str(run, "run_id") || str(fin.Data, "status") != "completed" {
		t.Errorf("run_finished %v", fin.Data)
	}
}
