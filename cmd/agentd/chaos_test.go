package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/webhook"
	"github.com/agentd-dev/agentd/webhook/webhooktest"
)

// The chaos test (docs/testing.md): kill -9 of the real binary at random
// moments of approving, running a tool, streaming and webhook delivery,
// then a restart on the same data directory and the checks of SPEC §8.
var (
	chaosRounds = flag.Int("chaos.n", 0, "rounds of TestChaos, one kill -9 each (0: the short form)")
	chaosSeed   = flag.Int64("chaos.seed", 0, "seed of TestChaos's schedule (0: from the clock; printed either way)")
)

const (
	chaosShortRounds = 6       // the short form, in ./scripts/test.sh
	chaosMaxKill     = 400     // ms: a kill comes 0..chaosMaxKill ms after a round's work starts
	chaosEndpoint    = "chaos" // the webhook endpoint's id
	chaosMaxRuns     = 3       // runs per conversation before it is retired
)

// The invariants, as the failure messages name them.
const (
	invRanTwice  = "no call ran twice"
	invLost      = "no approval answered 200 was lost"
	invDeadline  = "parked calls keep their deadlines"
	invWedged    = "no conversation stays wedged"
	invGapFree   = "logs replay gap-free"
	invPublished = "every event a client received is in the log, same id and data"
	invOutcome   = "a call ends as its decision says"
	invWebhook   = "every webhook event delivered at least once, with one webhook-id"
)

// chaosTools are the project's command tools; each appends its request
// (one line with its call_id) to $CHAOS_COUNTER every time it really runs,
// then takes 100 ms, so that kills land while tools run.
var chaosTools = []struct {
	name       string
	confirm    bool
	idempotent bool
}{{"pay", true, false}, {"note", false, false}, {"sync", false, true}}

func writeChaosProject(t *testing.T, webhookURL string) (dir, counter string) {
	t.Helper()
	dir = t.TempDir()
	counter = filepath.Join(dir, "executions.log")
	long := strings.TrimSpace(strings.Repeat("a reply streamed as many small text deltas ", 24)) // 42 deltas
	type m = map[string]any
	rules := []m{
		{"when": m{"user": "(?i)^stream"}, "reply": m{"text": long}},
		{"when": m{"user": "(?i)^hello"}, "reply": m{"text": "hello again"}},
	}
	for _, tool := range chaosTools {
		args := m{}
		if tool.name == "pay" {
			args = m{"amount": 5}
		}
		rules = append(rules,
			m{"when": m{"user": "(?i)^" + tool.name}, "reply": m{"text": "Calling " + tool.name + ".", "tool_calls": []m{{"name": tool.name, "arguments": args}}}},
			m{"when": m{"tool_result": tool.name}, "reply": m{"text": tool.name + " {{status}}: {{reason}} and a few more words"}})
	}
	agent, _ := json.Marshal(m{"name": "chaos", "system_prompt": "You are the chaos test's agent.",
		"model": m{"provider": "script", "script": m{"rules": rules}}, "max_turns": 10})
	must(t, os.WriteFile(filepath.Join(dir, "agent.json"), agent, 0o644))
	const script = "#!/bin/sh\ninput=$(cat); printf '%s\\n' \"$input\" >> \"$CHAOS_COUNTER\"; sleep 0.1; printf '{\"ok\":true}'\n"
	for _, tool := range chaosTools {
		td := filepath.Join(dir, "tools", tool.name)
		must(t, os.MkdirAll(td, 0o755))
		must(t, os.WriteFile(filepath.Join(td, "run.sh"), []byte(script), 0o755))
		def := m{"name": tool.name, "description": "chaos tool " + tool.name, "command": []string{"/bin/sh", "./run.sh"},
			"env": []string{"CHAOS_COUNTER"}, "idempotent": tool.idempotent}
		if tool.confirm {
			def["exposure"] = m{"kind": "requires-confirmation"}
			def["parameters"] = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"],"additionalProperties":false}`)
		}
		b, _ := json.Marshal(def)
		must(t, os.WriteFile(filepath.Join(td, "tool.json"), b, 0o644))
	}
	retries := slices.Repeat([]string{"50ms"}, 10)
	withWebhooks(t, dir, m{"id": chaosEndpoint, "url": webhookURL, "secret_env": "CHAOS_SECRET", "timeout": "1s", "retry_schedule": retries})
	return dir, counter
}

// chaosConv is a conversation of the test.
type chaosConv struct {
	id      string
	runs    int    // messages sent that were answered 202
	lastRun string // the run of its newest user message, as stored
	log     []sseEvent
}

// chaosCall is a tool call of the test and what the test did to it.
type chaosCall struct {
	id, conv, tool string
	deadline       string // requires_approval_at when first seen
	approved       bool   // an approval POST was answered 200 "approved"
	deniedSent     bool   // a deny POST was sent (it may have committed)
	denied         bool   // a deny POST was answered 200 "denied"
	status         string // as last read
}

type chaos struct {
	t                 *testing.T
	seed              int64
	rng               *rand.Rand
	rounds, round     int
	bin, dir, data    string
	counter, secret   string
	env               []string
	base              string
	proc              *exec.Cmd
	rc                *webhooktest.Receiver
	convs             map[string]*chaosConv
	idle              []*chaosConv
	calls             map[string]*chaosCall
	kills             int
	cut               chaosCuts
	mu                sync.Mutex // guards problems and the calls' flags during a round's work
	problems          []string   // what the round's work saw that breaks an invariant
	decidedThisRound  []string
	clientEventsTotal int
}

func (c *chaos) fail(invariant, format string, args ...any) {
	c.t.Helper()
	when := fmt.Sprintf("round %d of %d", c.round, c.rounds)
	if c.round > c.rounds {
		when = fmt.Sprintf("the final check after %d rounds", c.rounds)
	}
	c.t.Fatalf("chaos: seed %d, %s: invariant %q broken: %s\nreproduce the schedule: go test ./cmd/agentd -run '^TestChaos$' -v -chaos.n=%d -chaos.seed=%d",
		c.seed, when, invariant, fmt.Sprintf(format, args...), c.rounds, c.seed)
}

// TestChaos kills the real binary with kill -9 once per round, at a random
// moment of streaming, approving (concurrent approval POSTs), running tools
// and webhook delivery, restarts it on the same data directory and checks
// the invariants above (docs/testing.md). -chaos.n sets the rounds (the
// short form runs chaosShortRounds), -chaos.seed replays a schedule.
func TestChaos(t *testing.T) {
	// Parallel with TestGeneratedClient only (the package's other tests
	// set the environment): its kills and restarts mostly wait, which the
	// generator's build fills.
	t.Parallel()
	c := &chaos{t: t, rounds: *chaosRounds, seed: *chaosSeed, convs: map[string]*chaosConv{}, calls: map[string]*chaosCall{}}
	if c.rounds <= 0 {
		c.rounds = chaosShortRounds
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()
	}
	c.rng = rand.New(rand.NewPCG(uint64(c.seed), 0x5eed))
	t.Logf("chaos: seed %d, %d rounds (-chaos.seed=%d replays this schedule)", c.seed, c.rounds, c.seed)
	c.bin = agentdBinary(t)
	c.rc = webhooktest.NewReceiver(t)
	// Answers take 0..40 ms, so that some deliveries are in flight at a kill.
	c.rc.Respond = func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Duration(n%5) * 10 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	c.dir, c.counter = writeChaosProject(t, c.rc.URL)
	c.data = t.TempDir()
	c.secret = newSecret(t)
	c.env = []string{"CHAOS_COUNTER=" + c.counter, "CHAOS_SECRET=" + c.secret}
	c.base, c.proc = startProcess(t, c.bin, c.dir, c.data, c.env...)

	start := time.Now()
	for c.round = 1; c.round <= c.rounds; c.round++ {
		c.runRound()
	}
	c.round = c.rounds + 1 // the final check
	c.finish()
	deliveries := c.checkWebhooks()
	t.Logf("chaos: seed %d: %d rounds, %d kills, %d conversations, %d calls (%s), %d client events compared, %d webhook requests for %s events; %s; %s",
		c.seed, c.rounds, c.kills, len(c.convs), len(c.calls), c.outcomes(), c.clientEventsTotal, len(c.rc.Requests()), deliveries, c.cut,
		time.Since(start).Round(time.Millisecond))
}

// chaosCuts counts what the kills cut, to show they land in every kind of moment.
type chaosCuts struct {
	streams   int    // clients whose last event before the kill was a text_delta
	tools     int    // calls a client saw start and not end before the kill
	approvals int    // approval POSTs the kill cut before their answer
	answered  [2]int // decisions answered 200 through the single route, through the bulk one
}

func (k chaosCuts) String() string {
	return fmt.Sprintf("kills cut %d streams mid-reply, %d running tools, %d approval POSTs; decisions answered 200: %d single, %d bulk",
		k.streams, k.tools, k.approvals, k.answered[0], k.answered[1])
}

// countCuts adds what a client's events before the kill show was cut.
func (k *chaosCuts) countCuts(got []sseEvent) {
	if len(got) > 0 && got[len(got)-1].Type == "text_delta" {
		k.streams++
	}
	running := map[string]bool{}
	for _, ev := range got {
		switch ev.Type {
		case "tool_call_started":
			running[str(ev.Data, "tool_call_id")] = true
		case "tool_call_result":
			delete(running, str(ev.Data, "tool_call_id"))
		}
	}
	k.tools += len(running)
}

// chaosWork is one request of a round's work.
type chaosWork struct {
	conv *chaosConv
	text string     // a message to send, or
	call *chaosCall // a call to decide
	deny bool
}

// plan draws a round's work: streams, tool runs, new parked calls, and
// decisions on parked calls with several concurrent POSTs each.
func (c *chaos) plan() (work []chaosWork, posts int, kill time.Duration) {
	streams := 1 + c.rng.IntN(3)
	if c.rng.IntN(4) == 0 {
		streams = 6 // a heavy round: six replies stream at once
	}
	kinds := map[string]int{"stream": streams, "note": c.rng.IntN(2), "sync": c.rng.IntN(2), "pay": c.rng.IntN(3)}
	for _, kind := range []string{"stream", "note", "sync", "pay"} {
		for range kinds[kind] {
			work = append(work, chaosWork{conv: c.idleConv(), text: kind + " please"})
		}
	}
	var parked []*chaosCall
	for _, id := range c.sortedCalls() {
		if cl := c.calls[id]; cl.status == string(agentd.StatusRequiresConfirmation) {
			parked = append(parked, cl)
		}
	}
	for _, cl := range parked {
		if len(work) < 11 && c.rng.IntN(3) > 0 {
			work = append(work, chaosWork{conv: c.convs[cl.conv], call: cl, deny: c.rng.IntN(5) == 0})
		}
	}
	return work, 2 + c.rng.IntN(3), time.Duration(c.rng.IntN(chaosMaxKill)) * time.Millisecond
}

// idleConv returns a conversation with no active run: a used one, or a new one.
func (c *chaos) idleConv() *chaosConv {
	if len(c.idle) > 0 && c.rng.IntN(3) > 0 {
		cv := c.idle[0]
		c.idle = c.idle[1:]
		return cv
	}
	status, raw, err := chaosDo(http.MethodPost, c.base+"/v1/conversations", `{}`)
	if err != nil || status != http.StatusCreated {
		c.fail(invWedged, "create a conversation: %d %v %s", status, err, raw)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	cv := &chaosConv{id: str(m, "id")}
	c.convs[cv.id] = cv
	return cv
}

// runRound does one round: the work, the kill at a random moment, the
// restart and the checks.
func (c *chaos) runRound() {
	work, posts, kill := c.plan()
	touched := map[string]*chaosConv{}
	for _, w := range work {
		touched[w.conv.id] = w.conv
	}
	// An SSE client on each conversation of the round reads from its
	// beginning through the kill.
	clients := map[string]*eventStream{}
	for id := range touched {
		clients[id] = openStream(c.t, c.base, "", id, 0)
	}
	c.problems, c.decidedThisRound = nil, nil
	var wg sync.WaitGroup
	started := time.Now()
	for _, w := range work {
		if w.call == nil {
			wg.Go(func() { c.sendMessage(w.conv, w.text) })
			continue
		}
		for i := range posts {
			wg.Go(func() { c.decide(w.call, w.deny, i%2 == 1) })
		}
	}
	time.Sleep(kill - time.Since(started))
	must(c.t, syscall.Kill(-c.proc.Process.Pid, syscall.SIGKILL))
	_ = c.proc.Wait()
	c.kills++
	wg.Wait()
	received := map[string][]sseEvent{}
	for id, st := range clients {
		received[id] = drain(st)
		st.close()
		c.cut.countCuts(received[id])
	}
	if len(c.problems) > 0 {
		c.fail(invWedged, "%s", strings.Join(c.problems, "; "))
	}

	n := 0
	for _, evs := range received {
		n += len(evs)
	}
	c.t.Logf("chaos: round %d: kill -9 at %s into %s; clients had received %d events", c.round, kill, describe(work, posts), n)

	c.base, c.proc = startProcess(c.t, c.bin, c.dir, c.data, c.env...)
	// One restart in four is killed again 0..50 ms in, while recovery runs
	// approved calls, re-runs idempotent ones and redelivers webhooks.
	if c.rng.IntN(4) == 0 {
		again := time.Duration(c.rng.IntN(50)) * time.Millisecond
		time.Sleep(again)
		must(c.t, syscall.Kill(-c.proc.Process.Pid, syscall.SIGKILL))
		_ = c.proc.Wait()
		c.kills++
		c.t.Logf("chaos: round %d: kill -9 again %s after the restart", c.round, again)
		c.base, c.proc = startProcess(c.t, c.bin, c.dir, c.data, c.env...)
	}
	c.checkRound(touched, received)
}

// describe names a round's work for the log of the round.
func describe(work []chaosWork, posts int) string {
	var parts []string
	for _, w := range work {
		switch {
		case w.call == nil:
			parts = append(parts, fmt.Sprintf("%q to %s", w.text, w.conv.id))
		case w.deny:
			parts = append(parts, fmt.Sprintf("%d× deny %s", posts, w.call.id))
		default:
			parts = append(parts, fmt.Sprintf("%d× approve %s", posts, w.call.id))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (c *chaos) sendMessage(cv *chaosConv, text string) {
	b, _ := json.Marshal(map[string]string{"content": text})
	status, raw, err := chaosDo(http.MethodPost, c.base+"/v1/conversations/"+cv.id+"/messages", string(b))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil: // the kill came first: the message may or may not be stored
	case status == http.StatusAccepted:
		cv.runs++
	default:
		c.problems = append(c.problems, fmt.Sprintf("send %q to idle conversation %s: %d %s", text, cv.id, status, raw))
	}
}

// decide sends one decision on cl: through POST /v1/tool-calls/{id}/approval,
// or with bulk through POST /v1/approvals, the other door.
func (c *chaos) decide(cl *chaosCall, deny, bulk bool) {
	url, body := c.base+"/v1/tool-calls/"+cl.id+"/approval", `{"decision":"approve"}`
	if deny {
		body = `{"decision":"deny","reason":"chaos says no"}`
	}
	if bulk {
		url, body = c.base+"/v1/approvals", fmt.Sprintf(`{"approvals":[{"tool_call_id":%q,"approve":%t,"reason":"chaos"}]}`, cl.id, !deny)
	}
	c.mu.Lock()
	cl.deniedSent = cl.deniedSent || deny
	c.mu.Unlock()
	status, raw, err := chaosDo(http.MethodPost, url, body)
	if err != nil {
		c.mu.Lock()
		c.cut.approvals++
		c.mu.Unlock()
	}
	if err != nil || status != http.StatusOK {
		return // killed first, or refused (409 once a lost answer's decision holds): no promise was made
	}
	var d struct {
		Decision string `json:"decision"`
		Results  []struct {
			Status   string `json:"status"`
			Decision string `json:"decision"`
		} `json:"results"`
	}
	_ = json.Unmarshal(raw, &d)
	if bulk {
		if len(d.Results) != 1 || d.Results[0].Status != "applied" {
			return // a failed item promised nothing
		}
		d.Decision = d.Results[0].Decision
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bulk {
		c.cut.answered[1]++
	} else {
		c.cut.answered[0]++
	}
	switch d.Decision {
	case agentd.DecisionApproved:
		cl.approved = true
	case agentd.DecisionDenied:
		cl.denied = true
	}
	c.decidedThisRound = append(c.decidedThisRound, cl.id)
}

// drain returns the events a client received before its stream ended.
func drain(st *eventStream) []sseEvent {
	var out []sseEvent
	timeout := time.After(waitLimit)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			return out
		}
	}
}

// checkRound checks the invariants after a restart: each conversation of
// the round settles, its log replays gap-free and holds every event a
// client received before the kill; every call is in a state its decisions
// allow, ran at most once, and a parked one kept its deadline.
func (c *chaos) checkRound(touched map[string]*chaosConv, received map[string][]sseEvent) {
	for _, id := range sortedKeys(touched) {
		c.settle(touched[id])
	}
	for _, id := range sortedKeys(touched) {
		cv := touched[id]
		cv.log = c.replay(cv)
		c.compareClient(cv, received[id])
		c.resume(cv, int64(len(received[id])))
	}
	c.checkCalls(false)
}

// settle waits until the conversation's newest run finished or waits on a
// parked call, then records its calls; it returns the conversation to the
// idle pool when its run is over.
func (c *chaos) settle(cv *chaosConv) {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var conv struct {
			Messages  []agentd.Message  `json:"messages"`
			ToolCalls []agentd.ToolCall `json:"tool_calls"`
		}
		c.getJSON("/v1/conversations/"+cv.id, &conv)
		for _, tc := range conv.ToolCalls {
			c.see(tc)
		}
		cv.lastRun = ""
		for _, msg := range conv.Messages {
			if msg.Role == agentd.RoleUser {
				cv.lastRun = msg.RunID
			}
		}
		state, done := c.runState(cv, conv.ToolCalls)
		if done {
			if state != "waiting" && cv.runs < chaosMaxRuns && !slices.Contains(c.idle, cv) {
				c.idle = append(c.idle, cv)
			}
			return
		}
		if time.Now().After(deadline) {
			c.fail(invWedged, "conversation %s: run %s still %s after %s; calls %s", cv.id, cv.lastRun, state, waitLimit, callSummary(conv.ToolCalls))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runState says whether the conversation's newest run is settled: over,
// or waiting with a parked call and nothing approved or executing.
func (c *chaos) runState(cv *chaosConv, calls []agentd.ToolCall) (string, bool) {
	if cv.lastRun == "" {
		return "none", true // its only message was lost to the kill before it was stored
	}
	var run agentd.Run
	c.getJSON("/v1/runs/"+cv.lastRun, &run)
	if !run.Status.Active() {
		return string(run.Status), true
	}
	if run.Status != agentd.RunWaiting {
		return string(run.Status), false
	}
	parked := false
	for _, tc := range calls {
		if tc.RunID != run.ID {
			continue
		}
		switch tc.Status {
		case agentd.StatusRequiresConfirmation:
			parked = true
		case agentd.StatusApproved, agentd.StatusExecuting:
			return "waiting (a call " + string(tc.Status) + ")", false
		}
	}
	return "waiting", parked
}

// see records a call the first time it is seen (and its deadline) and its
// status every time.
func (c *chaos) see(tc agentd.ToolCall) {
	cl := c.calls[tc.ID]
	if cl == nil {
		cl = &chaosCall{id: tc.ID, conv: tc.ConversationID, tool: tc.Name}
		c.calls[tc.ID] = cl
	}
	if cl.deadline == "" && tc.RequiresApprovalAt != nil {
		cl.deadline = tc.RequiresApprovalAt.Format(time.RFC3339Nano)
	}
	cl.status = string(tc.Status)
}

var newestEvent = regexp.MustCompile(`past the newest event (\d+)`)

// replay reads the conversation's whole log from the server: the newest seq
// N (the 400 an id past it answers names it), then the stream from the
// start up to N, which must be exactly 1..N.
func (c *chaos) replay(cv *chaosConv) []sseEvent {
	c.t.Helper()
	status, raw, err := chaosDo(http.MethodGet, c.base+"/v1/conversations/"+cv.id+"/events?last_event_id="+strconv.FormatInt(1<<62, 10), "")
	if err != nil || status != http.StatusBadRequest {
		c.fail(invGapFree, "conversation %s: probing its newest event: %d %v %s", cv.id, status, err, raw)
	}
	mm := newestEvent.FindSubmatch(raw)
	if mm == nil {
		c.fail(invGapFree, "conversation %s: no newest event in %s", cv.id, raw)
	}
	n, _ := strconv.Atoi(string(mm[1]))
	if n == 0 {
		return nil
	}
	st := openStream(c.t, c.base, "", cv.id, 0)
	defer st.close()
	log := make([]sseEvent, 0, n)
	for len(log) < n {
		select {
		case ev, ok := <-st.events:
			if !ok {
				c.fail(invGapFree, "conversation %s: the replay ended after %d of %d events", cv.id, len(log), n)
			}
			if want := int64(len(log) + 1); ev.ID != want {
				c.fail(invGapFree, "conversation %s: replay from 0 gave id %d where %d was due (%d of %d read)", cv.id, ev.ID, want, len(log), n)
			}
			log = append(log, ev)
		case <-time.After(waitLimit):
			c.fail(invGapFree, "conversation %s: the replay stalled after %d of %d events", cv.id, len(log), n)
		}
	}
	return log
}

// compareClient checks what a client received before the kill against the
// log after the restart: ids 1..k with no gap, each event in the log with
// the same type and data. An event published before it was durable would
// be missing or different after the restart.
func (c *chaos) compareClient(cv *chaosConv, got []sseEvent) {
	c.t.Helper()
	for i, ev := range got {
		if ev.ID != int64(i+1) {
			c.fail(invGapFree, "conversation %s: a client reading from 0 received id %d as its event %d", cv.id, ev.ID, i+1)
		}
		if int(ev.ID) > len(cv.log) {
			c.fail(invPublished, "conversation %s: a client received event %d (%s %s) before the kill; the log has %d events after the restart",
				cv.id, ev.ID, ev.Type, ev.Raw, len(cv.log))
		}
		if l := cv.log[ev.ID-1]; l.Type != ev.Type || l.Raw != ev.Raw {
			c.fail(invPublished, "conversation %s: event %d a client received before the kill differs from the log after the restart:\nreceived %s %s\nlogged   %s %s",
				cv.id, ev.ID, ev.Type, ev.Raw, l.Type, l.Raw)
		}
	}
	c.clientEventsTotal += len(got)
}

// resume reconnects as the cut client would, with the Last-Event-ID it had
// seen, and checks it gets exactly the rest of the log.
func (c *chaos) resume(cv *chaosConv, last int64) {
	c.t.Helper()
	if last == 0 || last == int64(len(cv.log)) {
		return
	}
	st := openStream(c.t, c.base, "", cv.id, last)
	defer st.close()
	for want := last + 1; want <= int64(len(cv.log)); want++ {
		select {
		case ev, ok := <-st.events:
			if !ok || ev.ID != want || ev.Raw != cv.log[want-1].Raw {
				c.fail(invGapFree, "conversation %s: resumed after %d, got id %d (open %t) where %d was due: %s", cv.id, last, ev.ID, ok, want, ev.Raw)
			}
		case <-time.After(waitLimit):
			c.fail(invGapFree, "conversation %s: resumed after %d, no event %d", cv.id, last, want)
		}
	}
}

// executions counts the lines of the tools' counter file by call id.
func (c *chaos) executions() map[string]int {
	b, err := os.ReadFile(c.counter)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(c.t, err)
	n := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var req struct {
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil || req.CallID == "" {
			c.fail(invRanTwice, "the tools' counter file has a line that is not a request: %q", line)
		}
		n[req.CallID]++
	}
	return n
}

// checkCalls reads every call not yet over (all calls when all is set) and
// checks it against what was done to it and the tools' counter file.
func (c *chaos) checkCalls(all bool) {
	c.t.Helper()
	runs := c.executions()
	for _, id := range c.sortedCalls() {
		cl := c.calls[id]
		if !all && isOver(cl.status) && !slices.Contains(c.decidedThisRound, id) {
			continue
		}
		var tc agentd.ToolCall
		c.getJSON("/v1/tool-calls/"+id, &tc)
		c.see(tc)
		if msg := callBroken(cl, tc, runs[id], chaosIdempotent(cl.tool)); msg != "" {
			inv, detail, _ := strings.Cut(msg, ": ")
			c.fail(inv, "call %s (%s) of conversation %s, run %s: %s", id, cl.tool, cl.conv, tc.RunID, detail)
		}
	}
}

func isOver(status string) bool {
	switch agentd.CallStatus(status) {
	case agentd.StatusCompleted, agentd.StatusFailed, agentd.StatusDenied:
		return true
	}
	return false
}

func chaosIdempotent(tool string) bool {
	for _, tt := range chaosTools {
		if tt.name == tool {
			return tt.idempotent
		}
	}
	return false
}

// callBroken returns "<invariant>: <detail>" for a call whose state breaks
// one, or "". ran is how many times its tool really ran.
func callBroken(cl *chaosCall, tc agentd.ToolCall, ran int, idempotent bool) string {
	at := ""
	if tc.RequiresApprovalAt != nil {
		at = tc.RequiresApprovalAt.Format(time.RFC3339Nano)
	}
	unknown := strings.Contains(tc.Error, "outcome is unknown")
	switch {
	case !idempotent && ran > 1:
		return fmt.Sprintf("%s: it ran %d times, status %s", invRanTwice, ran, tc.Status)
	case cl.deadline != "" && at != cl.deadline && (at != "" || tc.Status == agentd.StatusRequiresConfirmation):
		return fmt.Sprintf("%s: requires_approval_at %q, first seen %q (status %s)", invDeadline, at, cl.deadline, tc.Status)
	case cl.approved && !slices.Contains([]agentd.CallStatus{agentd.StatusApproved, agentd.StatusExecuting, agentd.StatusCompleted, agentd.StatusFailed}, tc.Status),
		cl.approved && tc.Status == agentd.StatusFailed && !unknown:
		return fmt.Sprintf("%s: approved with a 200, now %s %q", invLost, tc.Status, tc.Error)
	case cl.denied && tc.Status != agentd.StatusDenied:
		return fmt.Sprintf("%s: denied with a 200, now %s", invLost, tc.Status)
	case tc.Status == agentd.StatusDenied && !cl.deniedSent:
		return fmt.Sprintf("%s: denied, but no deny was sent", invOutcome)
	case (tc.Status == agentd.StatusDenied || tc.Status == agentd.StatusRequiresConfirmation) && ran > 0:
		return fmt.Sprintf("%s: %s, yet it ran %d times", invOutcome, tc.Status, ran)
	case tc.Status == agentd.StatusCompleted && ran == 0:
		return fmt.Sprintf("%s: completed without running", invOutcome)
	case tc.Status == agentd.StatusFailed && (!unknown || idempotent):
		return fmt.Sprintf("%s: failed %q (our tools never fail; an idempotent one runs again)", invOutcome, tc.Error)
	case slices.Contains([]agentd.CallStatus{agentd.StatusExpired, agentd.StatusRefused, agentd.StatusCancelled}, tc.Status):
		return fmt.Sprintf("%s: %s %q", invOutcome, tc.Status, tc.Reason)
	}
	return ""
}

// finish decides every call still parked, lets every conversation settle,
// and checks every log and every call once more.
func (c *chaos) finish() {
	c.t.Helper()
	for _, id := range c.sortedCalls() {
		cl := c.calls[id]
		if cl.status != string(agentd.StatusRequiresConfirmation) {
			continue
		}
		status, raw, err := chaosDo(http.MethodPost, c.base+"/v1/tool-calls/"+id+"/approval", `{"decision":"approve"}`)
		if err != nil || status != http.StatusOK {
			c.fail(invLost, "approving parked call %s at the end: %d %v %s", id, status, err, raw)
		}
		cl.approved = true
	}
	for _, id := range sortedKeys(c.convs) {
		c.settle(c.convs[id])
	}
	for _, id := range sortedKeys(c.convs) {
		cv := c.convs[id]
		before := cv.log
		cv.log = c.replay(cv)
		c.compareClient(cv, before) // the log only grows
		if cv.lastRun == "" {
			continue
		}
		var run agentd.Run
		c.getJSON("/v1/runs/"+cv.lastRun, &run)
		if run.Status.Active() {
			c.fail(invWedged, "conversation %s: run %s is %s after every call was decided", id, run.ID, run.Status)
		}
	}
	c.checkCalls(true)
	// A settled conversation takes a new message.
	for _, id := range sortedKeys(c.convs) {
		status, raw, err := chaosDo(http.MethodPost, c.base+"/v1/conversations/"+id+"/messages", `{"content":"hello"}`)
		if err != nil || status != http.StatusAccepted {
			c.fail(invWedged, "conversation %s takes no new message: %d %v %s", id, status, err, raw)
		}
	}
}

// webhookTypes are the SSE events that become webhook events.
var webhookTypes = []string{"confirmation_required", "confirmation_resolved", "tool_call_started", "tool_call_result", "tool_call_refused"}

// checkWebhooks waits until every webhook event of every log was delivered
// and checks each request: its webhook-id is the one of a log event, its
// body names that event, and every request with that id has the same body.
func (c *chaos) checkWebhooks() string {
	c.t.Helper()
	want := map[string]string{} // webhook-id → event_id
	where := map[string]string{}
	for _, id := range sortedKeys(c.convs) {
		for _, ev := range c.convs[id].log {
			if !slices.Contains(webhookTypes, ev.Type) {
				continue
			}
			eid := webhook.EventID(agentd.Event{ConversationID: id, Seq: ev.ID})
			wid := webhook.DeliveryID(eid, chaosEndpoint)
			want[wid] = eid
			where[wid] = fmt.Sprintf("%s seq %d (%s of %s)", id, ev.ID, ev.Type, str(ev.Data, "tool_call_id"))
		}
	}
	// An attempt in flight at the last kill is sent again once its lease
	// lapses: the endpoint's timeout and 5 s.
	limit := waitLimit + 10*time.Second
	deadline := time.Now().Add(limit)
	for {
		missing := missingDeliveries(want, c.rc.Requests())
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var ws []string
			for _, wid := range missing[:min(5, len(missing))] {
				ws = append(ws, wid+" = "+where[wid])
			}
			c.fail(invWebhook, "%d of %d webhook events never delivered within %s, e.g. %s", len(missing), len(want), limit, strings.Join(ws, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
	bodies := map[string][]byte{}
	redelivered := 0
	for _, r := range c.rc.Requests() {
		wid := r.ID()
		eid, ok := want[wid]
		if !ok {
			c.fail(invWebhook, "delivered webhook-id %s (%s) is no event of any log: %s", wid, r.EventName(), r.Body)
		}
		var p webhook.Payload
		if err := json.Unmarshal(r.Body, &p); err != nil || p.EventContext.EventID != eid {
			c.fail(invWebhook, "webhook-id %s carries event_id %q, want %s (%s)", wid, p.EventContext.EventID, eid, where[wid])
		}
		if err := webhooktest.Verify(c.secret, r); err != nil {
			c.fail(invWebhook, "webhook-id %s: signature: %v", wid, err)
		}
		if prev, ok := bodies[wid]; ok {
			redelivered++
			if !bytes.Equal(prev, r.Body) {
				c.fail(invWebhook, "webhook-id %s (%s) was sent with two bodies:\n%s\n%s", wid, where[wid], prev, r.Body)
			}
		}
		bodies[wid] = r.Body
	}
	return fmt.Sprintf("%d (%d redelivered)", len(want), redelivered)
}

func missingDeliveries(want map[string]string, reqs []webhooktest.Request) []string {
	got := map[string]bool{}
	for _, r := range reqs {
		got[r.ID()] = true
	}
	var missing []string
	for _, wid := range sortedKeys(want) {
		if !got[wid] {
			missing = append(missing, wid)
		}
	}
	return missing
}

func (c *chaos) outcomes() string {
	n := map[string]int{}
	for _, cl := range c.calls {
		n[cl.tool+" "+cl.status]++
	}
	var parts []string
	for _, k := range sortedKeys(n) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

func (c *chaos) sortedCalls() []string { return sortedKeys(c.calls) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func callSummary(calls []agentd.ToolCall) string {
	var parts []string
	for _, tc := range calls {
		parts = append(parts, tc.ID+" "+tc.Name+" "+string(tc.Status))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// getJSON reads path from the running server into v, failing the test on
// anything but a 200.
func (c *chaos) getJSON(path string, v any) {
	c.t.Helper()
	status, raw, err := chaosDo(http.MethodGet, c.base+path, "")
	if err != nil || status != http.StatusOK {
		c.fail(invWedged, "GET %s after the restart: %d %v %s", path, status, err, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		c.t.Fatalf("GET %s: %v: %s", path, err, raw)
	}
}

// chaosClient's requests may meet a kill: errors are answers, not failures.
var chaosClient = &http.Client{Timeout: waitLimit}

func chaosDo(method, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := chaosClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// Each call invariant of the chaos test trips on the state that breaks it,
// and a state recovery may honestly leave passes.
func TestChaosCallInvariants(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	later := at.Add(time.Minute)
	deadline := at.Format(time.RFC3339Nano)
	unknown := "the server stopped while the tool was running; its outcome is unknown"
	for _, tc := range []struct {
		name       string
		cl         chaosCall
		call       agentd.ToolCall
		ran        int
		idempotent bool
		want       string // the invariant, "" for none
	}{
		{"parked, deadline kept", chaosCall{deadline: deadline}, agentd.ToolCall{Status: agentd.StatusRequiresConfirmation, RequiresApprovalAt: &at}, 0, false, ""},
		{"parked, deadline moved", chaosCall{deadline: deadline}, agentd.ToolCall{Status: agentd.StatusRequiresConfirmation, RequiresApprovalAt: &later}, 0, false, invDeadline},
		{"parked, deadline gone", chaosCall{deadline: deadline}, agentd.ToolCall{Status: agentd.StatusRequiresConfirmation}, 0, false, invDeadline},
		{"parked yet ran", chaosCall{}, agentd.ToolCall{Status: agentd.StatusRequiresConfirmation}, 1, false, invOutcome},
		{"approved, completed once", chaosCall{approved: true}, agentd.ToolCall{Status: agentd.StatusCompleted}, 1, false, ""},
		{"approved, ran twice", chaosCall{approved: true}, agentd.ToolCall{Status: agentd.StatusCompleted}, 2, false, invRanTwice},
		{"idempotent, ran twice", chaosCall{}, agentd.ToolCall{Status: agentd.StatusCompleted}, 2, true, ""},
		{"approved, back to pending", chaosCall{approved: true}, agentd.ToolCall{Status: agentd.StatusRequiresConfirmation}, 0, false, invLost},
		{"approved, then denied", chaosCall{approved: true, deniedSent: true}, agentd.ToolCall{Status: agentd.StatusDenied}, 0, false, invLost},
		{"approved, outcome unknown", chaosCall{approved: true}, agentd.ToolCall{Status: agentd.StatusFailed, Error: unknown}, 1, false, ""},
		{"approved, failed otherwise", chaosCall{approved: true}, agentd.ToolCall{Status: agentd.StatusFailed, Error: "boom"}, 1, false, invLost},
		{"idempotent, outcome unknown", chaosCall{}, agentd.ToolCall{Status: agentd.StatusFailed, Error: unknown}, 1, true, invOutcome},
		{"denied with a 200", chaosCall{denied: true, deniedSent: true}, agentd.ToolCall{Status: agentd.StatusDenied}, 0, false, ""},
		{"denied with a 200, then ran", chaosCall{denied: true, deniedSent: true}, agentd.ToolCall{Status: agentd.StatusCompleted}, 1, false, invLost},
		{"denied unasked", chaosCall{}, agentd.ToolCall{Status: agentd.StatusDenied}, 0, false, invOutcome},
		{"completed without running", chaosCall{}, agentd.ToolCall{Status: agentd.StatusCompleted}, 0, false, invOutcome},
		{"expired", chaosCall{}, agentd.ToolCall{Status: agentd.StatusExpired}, 0, false, invOutcome},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _ := strings.Cut(callBroken(&tc.cl, tc.call, tc.ran, tc.idempotent), ": ")
			if got != tc.want {
				t.Fatalf("callBroken = %q, want invariant %q", callBroken(&tc.cl, tc.call, tc.ran, tc.idempotent), tc.want)
			}
		})
	}
}
