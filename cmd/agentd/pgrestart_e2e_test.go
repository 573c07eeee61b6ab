package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/internal/replicas"
)

// Issue 20, acceptance 6: PostgreSQL restarts (pg_ctl restart -m fast, on
// a server of this test's own) while three replicas take approvals of nine
// parked calls, spread over the replicas and over the restart, and a
// client follows each conversation on replica B. A client whose approval
// fails (the store is down) sends it again until it gets 200, as a chat
// frontend would. Afterwards: every call ran exactly once, every approval
// answered 200 is a decision in the store and its call succeeded, and each
// conversation's stream — resumed with Last-Event-ID whenever it ended —
// holds every event once, in order, to run_finished; a stream on replica C
// resuming after the card (Last-Event-ID) gets exactly the rest.
func TestReplicasPostgresRestart(t *testing.T) {
	srv := pgtest.NewServer(t)
	dir, execLog := writeProject(t, projectOpts{})
	rs := replicas.Start(t, replicas.Options{N: 3, Project: dir, DatabaseURL: srv.URL, Env: []string{"AGENTD_TEST_LOG=" + execLog}})
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range rs {
				t.Logf("replica %s log:\n%s", r.Name, r.Logs())
			}
			t.Logf("PostgreSQL log:\n%s", srv.Log())
		}
	})
	const n = 9
	type parked struct {
		conv, callID, sha string
		card              int64 // the confirmation_required event's id
	}
	calls := make([]parked, n)
	for i := range calls {
		conv, st := newConversation(t, rs[i%3].Base, "")
		send(t, rs[i%3].Base, "", conv, "pay the invoice")
		cr := st.waitFor("confirmation_required", nil)
		st.waitFor("run_waiting", nil)
		calls[i] = parked{conv, str(cr.Data, "tool_call_id"), str(cr.Data, "arguments_sha256"), cr.ID}
		st.close()
	}

	streams := make([][]sseEvent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); streams[i], errs[i] = followResuming(t, rs[1].Base, c.conv) }()
	}
	retried, approveErrs := make([]int, n), make([]error, n)
	var approvals sync.WaitGroup
	restarted := make(chan error, 1)
	go func() { time.Sleep(150 * time.Millisecond); restarted <- srv.Restart() }()
	for i, c := range calls {
		approvals.Add(1)
		go func() {
			defer approvals.Done()
			time.Sleep(time.Duration(i) * 60 * time.Millisecond) // before, during and after the restart
			retried[i], approveErrs[i] = approveUntilOK(rs[(i+2)%3].Base, c.callID, c.sha)
		}()
	}
	approvals.Wait()
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range append(approveErrs, errs...) {
		if err != nil {
			t.Fatalf("conversation %d: %v", i%n, err)
		}
	}
	total := 0
	for i, c := range calls {
		total += retried[i]
		checkContiguous(t, "stream of "+c.conv, streams[i], 1)
		_, got := call(t, http.MethodGet, rs[0].Base+"/v1/tool-calls/"+c.callID, "", "")
		if got["status"] != "completed" {
			t.Fatalf("call %s, approved with 200: %v", c.callID, got)
		}
		resumed := openStream(t, rs[2].Base, "", c.conv, c.card) // a client that saw the card, on C after the restart
		resumed.waitFor("run_finished", nil)
		if want := types(streams[i])[c.card:]; fmt.Sprint(types(resumed.seen)) != fmt.Sprint(want) {
			t.Fatalf("resumed on C after %d: %v, want %v", c.card, types(resumed.seen), want)
		}
		resolved, results := 0, 0
		for _, ev := range streams[i] {
			switch ev.Type {
			case "confirmation_resolved":
				resolved++
			case "tool_call_result":
				results++
			}
		}
		if resolved != 1 || results != 1 {
			t.Fatalf("stream of %s: %d confirmation_resolved, %d tool_call_result; want 1 and 1: %v", c.conv, resolved, results, types(streams[i]))
		}
	}
	if got := execCount(t, execLog, "pay"); got != n {
		t.Fatalf("pay ran %d times for %d approved calls", got, n)
	}
	t.Logf("%d approvals sent again after a failure during the restart", total)
}

// approveUntilOK approves a call on base until the answer is 200, as a
// client does when an approval fails (a connection error or a 5xx), and
// returns how many attempts failed. Another answer is an error.
func approveUntilOK(base, callID, sha string) (int, error) {
	body := fmt.Sprintf(`{"decision":"approve","arguments_sha256":%q}`, sha)
	deadline := time.Now().Add(waitLimit)
	for failed := 0; ; failed++ {
		status, b, err := post(base+"/v1/tool-calls/"+callID+"/approval", body)
		switch {
		case err == nil && status == http.StatusOK:
			return failed, nil
		case err == nil && status < 500:
			return failed, fmt.Errorf("approve %s: %d %s", callID, status, b)
		case time.Now().After(deadline):
			return failed, fmt.Errorf("approve %s: no 200 within %s: %d %s %v", callID, waitLimit, status, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func post(url, body string) (int, string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// followResuming reads conversation conv's stream on base from its start
// until run_finished, opening it again with Last-Event-ID (the last id
// read) whenever it ends or cannot be opened, as a browser's EventSource
// does.
func followResuming(t *testing.T, base, conv string) ([]sseEvent, error) {
	var seen []sseEvent
	deadline := time.Now().Add(2 * waitLimit)
	for time.Now().Before(deadline) {
		req, err := http.NewRequest(http.MethodGet, base+"/v1/conversations/"+conv+"/events", nil)
		if err != nil {
			return seen, err
		}
		if len(seen) > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(seen[len(seen)-1].ID, 10))
		}
		resp, err := streamClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			if err == nil {
				resp.Body.Close()
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		s := &eventStream{t: t, resp: resp, events: make(chan sseEvent, 4096)}
		go s.read()
		// The deadline holds on an open stream too: a stream that stays
		// open (heartbeats) but never brings run_finished fails the test
		// with the replicas' logs, not the whole package's timeout.
		timer := time.NewTimer(time.Until(deadline))
	read:
		for {
			select {
			case ev, ok := <-s.events:
				if !ok {
					break read
				}
				seen = append(seen, ev)
				if ev.Type == "run_finished" {
					timer.Stop()
					s.close()
					return seen, nil
				}
			case <-timer.C:
				break read
			}
		}
		timer.Stop()
		s.close()
	}
	return seen, fmt.Errorf("no run_finished on %s within %s: %v", conv, 2*waitLimit, types(seen))
}
