package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A reconnect with a Last-Event-ID past the conversation's newest event N,
// in the header or the query, is refused with 400 invalid before any stream
// starts, and the message names N; a reconnect from N itself streams what
// follows.
func TestStreamLastEventIDPastNewest(t *testing.T) {
	dir, execLog := writeProject(t, projectOpts{})
	base, _ := startServer(t, dir, t.TempDir(), map[string]string{"AGENTD_TEST_LOG": execLog})
	conv, st := newConversation(t, base, "")
	send(t, base, "", conv, "pay the invoice")
	callID := str(st.waitFor("confirmation_required", nil).Data, "tool_call_id")
	newest := st.waitFor("run_waiting", nil).ID // the run is parked: nothing follows until a decision

	client := &http.Client{Timeout: waitLimit}
	url := base + "/v1/conversations/" + conv + "/events"
	for _, tc := range []struct{ name, header, query string }{
		{"header", strconv.FormatInt(newest+1, 10), ""},
		{"query", "", strconv.FormatInt(newest+5, 10)},
	} {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		must(t, err)
		if tc.header != "" {
			req.Header.Set("Last-Event-ID", tc.header)
		} else {
			req.URL.RawQuery = "last_event_id=" + tc.query
		}
		resp, err := client.Do(req)
		must(t, err)
		var body struct {
			Error struct{ Code, Message string }
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		want := fmt.Sprintf("newest event %d", newest)
		if resp.StatusCode != http.StatusBadRequest || err != nil || body.Error.Code != "invalid" ||
			!strings.Contains(body.Error.Message, want) || !strings.Contains(body.Error.Message, "without Last-Event-ID") {
			t.Errorf("%s: %s %+v (%v), want 400 invalid naming %q", tc.name, resp.Status, body, err, want)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q, want JSON", tc.name, ct)
		}
	}

	// From the newest id, the stream is live: the approval's events follow it.
	resumed := openStreamWith(t, client, url, newest)
	status, m := call(t, http.MethodPost, base+"/v1/tool-calls/"+callID+"/approval", "", `{"decision":"approve"}`)
	if status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, m)
	}
	if ev := resumed.next(); ev.ID != newest+1 || ev.Type != "confirmation_resolved" {
		t.Fatalf("first event after resuming from %d: %d %s, want %d confirmation_resolved", newest, ev.ID, ev.Type, newest+1)
	}
}

// openStreamWith opens a conversation's stream after lastEventID with
// client, which must have a timeout.
func openStreamWith(t *testing.T, client *http.Client, url string, lastEventID int64) *eventStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	must(t, err)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	resp, err := client.Do(req)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("stream after %d: %s", lastEventID, resp.Status)
	}
	s := &eventStream{t: t, resp: resp, events: make(chan sseEvent, 64)}
	go s.read()
	t.Cleanup(s.close)
	return s
}
