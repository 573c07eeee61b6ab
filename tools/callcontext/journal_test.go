package callcontext

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/rs/zerolog"
)

// downstream is the connections' side for durable calls: it counts what is
// sent, answers each request with its number, and answers a preview for a
// body that asks for one (as a confirm-tier write without
// confirmed_write would).
type downstream struct {
	mu   sync.Mutex
	sent []RequestOptions
	args []string
}

func (d *downstream) Inline(_ context.Context, args json.RawMessage, _ agentd.Principal, o RequestOptions) (any, bool, error) {
	if strings.Contains(string(args), `"preview"`) {
		return map[string]any{"preview": map[string]any{"instruction": "call again"}}, true, nil
	}
	if strings.Contains(string(args), `"down"`) {
		return nil, false, agentd.Errorf(agentd.EUNAVAILABLE, "the request to connection %q failed", "api")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent, d.args = append(d.sent, o), append(d.args, string(args))
	return map[string]any{"status": 200, "n": len(d.sent)}, false, nil
}

func (d *downstream) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sent)
}

// durableEndpoint is an endpoint whose journal is a real SQLite file.
func durableEndpoint(t *testing.T) (*Endpoint, *fakeTools, *downstream) {
	t.Helper()
	ep, ft, _ := newEndpoint(t)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ds := &downstream{}
	ep.Wire(ft, ds)
	ep.WireJournal(db)
	return ep, ft, ds
}

// run opens a context for call (durable, writes allowed, lookup and broken
// as children), calls fn with its token and closes it: one run of the
// call's command.
func run(t *testing.T, ep *Endpoint, call agentd.ToolCall, fn func(token string)) {
	t.Helper()
	env, closeCtx := ep.Open(call, true, []string{"lookup", "broken"}, true)
	defer closeCtx()
	fn(tokenOf(t, env))
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A durable call runs again after a crash: its child requests that
// succeeded are answered from the journal (the same answer, nothing sent),
// in both routes, even when the tool writes the same request's keys in
// another order; the first new one is sent. Writes carry the key of (call
// id, ordinal); a preview or a failed child is not journaled and runs
// again.
func TestDurableReplay(t *testing.T) {
	ep, ft, ds := durableEndpoint(t)
	ctx := context.Background()
	call := agentd.ToolCall{ID: "call_d", Name: "sync_orders", TenantID: "t1", ProjectID: "p1", ConversationID: "conv_1"}
	first := `{"connection":"api","method":"POST","endpoint":"/a","data":{"x":1,"y":2},"intent":"confirmed_write"}`
	var answers []string
	run(t, ep, call, func(token string) {
		out, err := ep.Request(ctx, token, json.RawMessage(first))
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, asJSON(t, out))
		res, err := ep.CallTool(ctx, token, "lookup", json.RawMessage(`{"q":"tea"}`))
		if err != nil || res.(*ChildResult).Status != agentd.StatusCompleted {
			t.Fatalf("lookup: %+v %v", res, err)
		}
		answers = append(answers, asJSON(t, res))
		if out, err := ep.Request(ctx, token, json.RawMessage(`{"preview":true}`)); err != nil || !strings.Contains(asJSON(t, out), "preview") {
			t.Fatalf("preview: %v %v", out, err)
		}
		if _, err := ep.Request(ctx, token, json.RawMessage(`{"down":true}`)); code(err) != agentd.EUNAVAILABLE {
			t.Fatalf("down: %v", err)
		}
		// The crash: the call ends here, before its last request.
	})
	if ds.count() != 1 || len(ft.calls) != 1 || ft.calls[0].ID != "call_d.2" {
		t.Fatalf("first run: %d sent, child calls %+v", ds.count(), ft.calls)
	}
	if o := ds.sent[0]; !o.Durable || !o.Writes || o.IdempotencyKey != "call_d#1" {
		t.Fatalf("the first request's options %+v, want durable with key call_d#1", o)
	}

	run(t, ep, call, func(token string) {
		reordered := `{"intent":"confirmed_write", "data": {"y":2, "x":1}, "endpoint":"/a","method":"POST","connection":"api"}`
		out, err := ep.Request(ctx, token, json.RawMessage(reordered))
		if err != nil || asJSON(t, out) != answers[0] {
			t.Fatalf("replayed request = %s %v, want %s", asJSON(t, out), err, answers[0])
		}
		res, err := ep.CallTool(ctx, token, "lookup", json.RawMessage(`{"q":"tea"}`))
		if err != nil || asJSON(t, res) != answers[1] {
			t.Fatalf("replayed child = %s %v, want %s", asJSON(t, res), err, answers[1])
		}
		if _, err := ep.Request(ctx, token, json.RawMessage(`{"preview":true}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := ep.Request(ctx, token, json.RawMessage(`{"last":true,"intent":"write"}`)); err != nil {
			t.Fatal(err)
		}
	})
	if ds.count() != 2 || len(ft.calls) != 1 {
		t.Fatalf("after the re-run: %d sent (want the first once and the last), %d child calls (want 1)", ds.count(), len(ft.calls))
	}
	// Ordinal 4 was the failed request, not journaled: the new one there is
	// sent, with that ordinal's key.
	if o := ds.sent[1]; o.IdempotencyKey != "call_d#4" || ds.args[1] != `{"last":true,"intent":"write"}` {
		t.Fatalf("the last request: %+v %s, want key call_d#4", o, ds.args[1])
	}
}

// A re-run whose n-th child request differs from the journaled one fails
// that child with a clear error and sends nothing; a failed child call is
// not journaled.
func TestDurableDigestMismatch(t *testing.T) {
	ep, ft, ds := durableEndpoint(t)
	ctx := context.Background()
	call := agentd.ToolCall{ID: "call_m", Name: "sync_orders", TenantID: "t1", ProjectID: "p1"}
	run(t, ep, call, func(token string) {
		if _, err := ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/a","n":1}`)); err != nil {
			t.Fatal(err)
		}
		if res, _ := ep.CallTool(ctx, token, "broken", nil); res.(*ChildResult).Status != agentd.StatusFailed {
			t.Fatalf("broken: %+v", res)
		}
	})
	run(t, ep, call, func(token string) {
		_, err := ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/a","n":2}`))
		if code(err) != agentd.ECONFLICT || !strings.Contains(err.Error(), `durable tool "sync_orders" is not deterministic: its child request 1`) ||
			!strings.Contains(err.Error(), "same child requests in the same order") {
			t.Fatalf("a different first request: %v, want the not-deterministic conflict", err)
		}
		_, err = ep.CallTool(ctx, token, "lookup", nil) // ordinal 2 was a failed "broken": not journaled, runs
		if err != nil {
			t.Fatalf("child 2 after a failed one: %v", err)
		}
	})
	run(t, ep, call, func(token string) {
		if _, err := ep.CallTool(ctx, token, "broken", nil); err != nil { // ordinal 1 is a request
			if code(err) != agentd.ECONFLICT || !strings.Contains(err.Error(), `a call of tool "broken"`) {
				t.Fatalf("a child tool where a request was: %v", err)
			}
		} else {
			t.Fatal("a child tool call replaced a journaled request")
		}
	})
	if ds.count() != 1 || len(ft.calls) != 2 {
		t.Fatalf("%d sent, %d child calls, want 1 and 2 (broken, then lookup)", ds.count(), len(ft.calls))
	}
}

// The journal is per tenant: a call of another tenant with the same id
// (ids are unique, so only a forged or restored store could make one)
// never reads the first tenant's entries, and an inline call's requests
// are never journaled.
func TestDurableJournalPerTenant(t *testing.T) {
	ep, _, ds := durableEndpoint(t)
	ctx := context.Background()
	for i, tenant := range []string{"acme", "globex", "acme"} {
		run(t, ep, agentd.ToolCall{ID: "call_same", Name: "sync", TenantID: tenant, ProjectID: "p"}, func(token string) {
			out, err := ep.Request(ctx, token, json.RawMessage(`{"endpoint":"/a"}`))
			if err != nil {
				t.Fatal(err)
			}
			want := []int{1, 2, 1}[i] // acme's re-run gets acme's answer, globex its own
			if got := asJSON(t, out); !strings.Contains(got, fmt.Sprintf(`"n":%d`, want)) {
				t.Errorf("run %d (%s): %s, want n %d", i, tenant, got, want)
			}
		})
	}
	if ds.count() != 2 {
		t.Fatalf("%d sent, want 2 (acme once, globex once)", ds.count())
	}
	for range 2 {
		env, closeCtx := ep.Open(agentd.ToolCall{ID: "call_inline", Name: "sync", TenantID: "acme"}, true, nil, false)
		if _, err := ep.Request(ctx, tokenOf(t, env), json.RawMessage(`{"endpoint":"/a"}`)); err != nil {
			t.Fatal(err)
		}
		closeCtx()
	}
	if ds.count() != 4 || ds.sent[2].Durable || ds.sent[2].IdempotencyKey != "" {
		t.Fatalf("inline calls: %d sent (want both), options %+v", ds.count(), ds.sent[2])
	}
}

// Without a journal wired a durable call's requests are sent each time.
func TestDurableWithoutJournal(t *testing.T) {
	ep := New(zerolog.Nop())
	ep.SetURL("http://127.0.0.1:1/v1/context")
	ds := &downstream{}
	ep.Wire(nil, ds)
	for range 2 {
		run(t, ep, agentd.ToolCall{ID: "c", Name: "x", TenantID: "t"}, func(token string) {
			if _, err := ep.Request(context.Background(), token, json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		})
	}
	if ds.count() != 2 || ds.sent[1].IdempotencyKey != "c#1" {
		t.Fatalf("%d sent, %+v", ds.count(), ds.sent)
	}
}

// A durable call's child digests keep numbers exact: an integer above 2^53
// that a double does not hold (its neighbour's double) is refused on both
// routes, EINVALID naming it, with nothing sent, no journaled answer and
// no ordinal taken; the same number written otherwise replays; another
// integer above 2^53 in its place is a conflict, never the first one's
// answer.
func TestDurableDigestKeepsNumbersExact(t *testing.T) {
	ep, ft, ds := durableEndpoint(t)
	ctx := context.Background()
	call := agentd.ToolCall{ID: "call_n", Name: "pay_out", TenantID: "t1", ProjectID: "p1"}
	req := func(account string) json.RawMessage {
		return json.RawMessage(`{"endpoint":"/pay","intent":"confirmed_write","data":{"account":` + account + `}}`)
	}
	var first string
	run(t, ep, call, func(token string) {
		out, err := ep.Request(ctx, token, req("12345678901234568"))
		if err != nil {
			t.Fatal(err)
		}
		first = asJSON(t, out)
	})
	run(t, ep, call, func(token string) {
		for _, try := range []func() (any, error){
			func() (any, error) { return ep.Request(ctx, token, req("12345678901234567")) },
			func() (any, error) {
				return ep.CallTool(ctx, token, "lookup", json.RawMessage(`{"q":12345678901234567}`))
			},
		} {
			out, err := try()
			if code(err) != agentd.EINVALID || !strings.Contains(err.Error(), "12345678901234567") || out != nil {
				t.Fatalf("the neighbouring integer: %v %v, want EINVALID naming it", out, err)
			}
		}
		out, err := ep.Request(ctx, token, req("1.2345678901234568e16"))
		if err != nil || asJSON(t, out) != first {
			t.Fatalf("the same number written otherwise: %v %v, want the journaled answer %s", out, err, first)
		}
	})
	run(t, ep, call, func(token string) {
		if _, err := ep.Request(ctx, token, req("12345678901234570")); code(err) != agentd.ECONFLICT {
			t.Fatalf("another integer above 2^53 where the first was: %v, want ECONFLICT", err)
		}
	})
	if ds.count() != 1 || len(ft.calls) != 0 {
		t.Fatalf("%d sent, %d child calls; want the first request only", ds.count(), len(ft.calls))
	}
	a, errA := childDigest("request", "", req("12345678901234568"))
	b, errB := childDigest("request", "", req("12345678901234570"))
	if errA != nil || errB != nil || a == b {
		t.Fatalf("two integers above 2^53: %s %v, %s %v; want two digests", a, errA, b, errB)
	}
}
