package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// startReplicas starts three real agentd processes (A, B, C) on one new
// PostgreSQL database, serving one test project, and returns them with the
// project's execution log.
func startReplicas(t *testing.T) (rs []*replicas.Replica, execLog string) {
	t.Helper()
	u := pgtest.NewDatabase(t, "")
	dir, execLog := writeProject(t, projectOpts{})
	rs = replicas.Start(t, replicas.Options{N: 3, Project: dir, DatabaseURL: u, Env: []string{"AGENTD_TEST_LOG=" + execLog}})
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range rs {
				t.Logf("replica %s log:\n%s", r.Name, r.Logs())
			}
		}
	})
	return rs, execLog
}

// checkContiguous fails unless the events' ids are first, first+1, …: every
// event of the conversation once, in order.
func checkContiguous(t *testing.T, name string, evs []sseEvent, first int64) {
	t.Helper()
	for i, ev := range evs {
		if ev.ID != first+int64(i) {
			t.Fatalf("%s: event %d has id %d, want %d; saw %v", name, i, ev.ID, first+int64(i), types(evs))
		}
	}
}

// types lists the events' "id:type".
func types(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%d:%s", ev.ID, ev.Type)
	}
	return out
}

// Issue 20, acceptance 2: a call parks via replica A; a client streaming
// from replica B sees the card; the approval goes to replica C; the call
// runs exactly once; B's stream shows the result and the rest of the run,
// every event once and in order, the same as A's own stream. A stream on C
// that resumes with Last-Event-ID (the card's id, as a client that saw the
// card on B and reconnected elsewhere) gets exactly the rest.
func TestReplicasParkStreamApprove(t *testing.T) {
	rs, execLog := startReplicas(t)
	a, b, c := rs[0], rs[1], rs[2]
	conv, stA := newConversation(t, a.Base, "")
	stB := openStream(t, b.Base, "", conv, 0)
	send(t, a.Base, "", conv, "pay the invoice")

	cr := stB.waitFor("confirmation_required", nil)
	callID := str(cr.Data, "tool_call_id")
	stB.waitFor("run_waiting", nil)
	if n := execCount(t, execLog, "pay"); n != 0 {
		t.Fatalf("pay ran %d times before the approval", n)
	}
	status, dec := call(t, http.MethodPost, c.Base+"/v1/tool-calls/"+callID+"/approval", "",
		fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, cr.Data["arguments_sha256"]))
	if status != 200 || dec["decision"] != "approved" {
		t.Fatalf("approve on C: %d %v", status, dec)
	}
	fin := stB.waitFor("run_finished", nil)
	if fin.Data["status"] != "completed" {
		t.Fatalf("run_finished on B: %s", fin.Raw)
	}
	checkContiguous(t, "B's stream", stB.seen, 1)
	var sawResult, sawMessage bool
	for _, ev := range stB.seen {
		switch {
		case ev.Type == "tool_call_result" && str(ev.Data, "tool_call_id") == callID:
			sawResult = true
		case ev.Type == "message" && strings.HasPrefix(str(ev.Data, "content"), "paid:"):
			sawMessage = sawResult
		}
	}
	if !sawResult || !sawMessage {
		t.Fatalf("B's stream lacks the call's result or the answer after it: %v", types(stB.seen))
	}
	if n := execCount(t, execLog, "pay"); n != 1 {
		t.Fatalf("pay ran %d times, want exactly 1", n)
	}

	stA.waitFor("run_finished", nil)
	if fmt.Sprint(types(stA.seen)) != fmt.Sprint(types(stB.seen)) {
		t.Fatalf("A's stream %v\nB's stream %v", types(stA.seen), types(stB.seen))
	}
	stC := openStream(t, c.Base, "", conv, cr.ID)
	stC.waitFor("run_finished", nil)
	checkContiguous(t, "C's resumed stream", stC.seen, cr.ID+1)
	if want := types(stB.seen)[cr.ID:]; fmt.Sprint(types(stC.seen)) != fmt.Sprint(want) {
		t.Fatalf("C resumed after %d: %v, want %v", cr.ID, types(stC.seen), want)
	}
}

// Issue 20, acceptance 3: 20 concurrent approvals of one call, spread over
// the 3 replicas, run it once; every response is 200 with the same body;
// the stream on B has one confirmation_resolved.
func TestReplicasConcurrentApprovals(t *testing.T) {
	rs, execLog := startReplicas(t)
	conv, _ := newConversation(t, rs[0].Base, "")
	stB := openStream(t, rs[1].Base, "", conv, 0)
	send(t, rs[0].Base, "", conv, "pay")
	id := str(stB.waitFor("confirmation_required", nil).Data, "tool_call_id")
	stB.waitFor("run_waiting", nil)

	const n = 20
	var wg sync.WaitGroup
	bodies := make([]string, n)
	statuses := make([]int, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			s, b := callRaw(t, http.MethodPost, rs[i%3].Base+"/v1/tool-calls/"+id+"/approval", "", `{"decision":"approve"}`)
			statuses[i], bodies[i] = s, string(b)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if statuses[i] != 200 || bodies[i] != bodies[0] {
			t.Fatalf("response %d (replica %s): %d %s (first: %s)", i, rs[i%3].Name, statuses[i], bodies[i], bodies[0])
		}
	}
	stB.waitFor("run_finished", nil)
	if got := execCount(t, execLog, "pay"); got != 1 {
		t.Fatalf("pay ran %d times, want exactly 1", got)
	}
	resolved, started := 0, 0
	for _, ev := range stB.seen {
		switch ev.Type {
		case "confirmation_resolved":
			resolved++
		case "tool_call_started":
			started++
		}
	}
	if resolved != 1 || started != 1 {
		t.Fatalf("%d confirmation_resolved and %d tool_call_started events, want 1 each: %v", resolved, started, types(stB.seen))
	}
	checkContiguous(t, "B's stream", stB.seen, 1)
}

// aisdkFrames reads an AI SDK UI message stream to its end and returns its
// chunks' types ([DONE] included).
func aisdkFrames(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			out = append(out, line)
			continue
		}
		var f struct{ Type string }
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		out = append(out, f.Type)
	}
	return out
}

// The chat protocols' streams read the same hub and log: an AI SDK chat
// started on replica A, whose run holds a tool for a moment, is resumed
// (GET /v1/ai-sdk/chat/{id}/stream, the SDK's reconnectToStream) on
// replica B, which replays the run and follows it live, with the events A
// commits, to the model's last answer and the end of the message.
func TestReplicasAISDKResume(t *testing.T) {
	rs, _ := startReplicas(t)
	a, b := rs[0], rs[1]
	// Both streams end with the run: a stream that does not is cut at waitLimit.
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	for attempt := range 5 {
		chat := fmt.Sprintf("chat-replicas-%d", attempt)
		body := fmt.Sprintf(`{"id":%q,"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hang"}]}]}`, chat)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Base+"/v1/ai-sdk/chat", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		onA, err := streamClient.Do(req)
		must(t, err)
		if onA.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/ai-sdk/chat on A: %s", onA.Status)
		}
		get, err := http.NewRequestWithContext(ctx, http.MethodGet, b.Base+"/v1/ai-sdk/chat/"+chat+"/stream", nil)
		must(t, err)
		onB, err := streamClient.Do(get)
		must(t, err)
		if onB.StatusCode == http.StatusNoContent { // the run ended before B was asked: try again
			onB.Body.Close()
			aisdkFrames(t, onA)
			continue
		}
		if onB.StatusCode != http.StatusOK {
			t.Fatalf("GET the chat's stream on B: %s", onB.Status)
		}
		fromA, fromB := aisdkFrames(t, onA), aisdkFrames(t, onB)
		if fmt.Sprint(fromB) != fmt.Sprint(fromA) {
			t.Fatalf("B's resumed stream %v\nA's stream %v", fromB, fromA)
		}
		if got := strings.Join(fromB, " "); !strings.Contains(got, "tool-output-error") || !strings.HasSuffix(got, "text-end finish-step finish [DONE]") {
			t.Fatalf("B's stream does not follow the run to its end: %s", got)
		}
		return
	}
	t.Fatal("the run ended before its stream was asked for on B, five times")
}
