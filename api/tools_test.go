package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// fakeRunner records what the tool routes hand it.
type fakeRunner struct {
	calls []runnerCall
}

type runnerCall struct {
	method, name, intent, args string
	p                          agentd.Principal
}

func (f *fakeRunner) Eval(_ context.Context, p agentd.Principal, name string, args json.RawMessage) (any, error) {
	f.calls = append(f.calls, runnerCall{"eval", name, "", string(args), p})
	if name == "nope" {
		return nil, agentd.Errorf(agentd.ENOTFOUND, "tool %q not found", name)
	}
	return map[string]any{"status": "completed", "result": map[string]bool{"ok": true}}, nil
}

func (f *fakeRunner) Run(_ context.Context, p agentd.Principal, name string, args json.RawMessage, intent string) (any, error) {
	f.calls = append(f.calls, runnerCall{"run", name, intent, string(args), p})
	if p.Role == agentd.RoleClient {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "running a tool needs an operator or delegate key")
	}
	return map[string]any{"status": "completed"}, nil
}

// The tool routes hand the runner the caller, the tool and the body's
// arguments and intent; a bad body never reaches it; without a runner they
// are 404; the runner's errors map to their statuses.
func TestToolRoutes(t *testing.T) {
	keys := []testKey{{key: "k-ops", id: "ops", tenant: "t1", project: "p1", role: agentd.RoleOperator}, {key: "k-web", id: "web", tenant: "t1", project: "p1", role: agentd.RoleClient}}
	runner := &fakeRunner{}
	s, _ := newFakeServer(t, keys, api.Config{Tools: runner})
	want(t, "eval", s.do("POST", "/v1/tools/lookup/eval", "k-ops", `{"arguments":{"a":1}}`, nil), http.StatusOK, "")
	want(t, "eval, empty body", s.do("POST", "/v1/tools/lookup/eval", "k-ops", ``, nil), http.StatusOK, "")
	want(t, "eval unknown", s.do("POST", "/v1/tools/nope/eval", "k-ops", `{}`, nil), http.StatusNotFound, agentd.ENOTFOUND)
	want(t, "run", s.do("POST", "/v1/tools/lookup/run", "k-ops", `{"arguments":{},"intent":"confirmed_write"}`, nil), http.StatusOK, "")
	want(t, "run as client", s.do("POST", "/v1/tools/lookup/run", "k-web", `{}`, nil), http.StatusForbidden, agentd.EFORBIDDEN)
	n := len(runner.calls)
	for _, body := range []string{`{"arguments":{},"nope":1}`, `{"arguments":[1`, `{"intent":5}`} {
		want(t, "bad body "+body, s.do("POST", "/v1/tools/lookup/run", "k-ops", body, nil), http.StatusBadRequest, agentd.EINVALID)
	}
	if len(runner.calls) != n {
		t.Fatalf("bad bodies reached the runner: %+v", runner.calls[n:])
	}
	first, run := runner.calls[0], runner.calls[3]
	if first.method != "eval" || first.name != "lookup" || first.args != `{"a":1}` || first.p.KeyID != "ops" || first.p.Role != agentd.RoleOperator {
		t.Errorf("eval got %+v", first)
	}
	if run.method != "run" || run.intent != "confirmed_write" || run.args != `{}` {
		t.Errorf("run got %+v", run)
	}
	if len(runner.calls) != 5 {
		t.Errorf("%d runner calls, want 5", len(runner.calls))
	}

	bare, _ := newFakeServer(t, keys, api.Config{})
	want(t, "no runner", bare.do("POST", "/v1/tools/lookup/run", "k-ops", `{}`, nil), http.StatusNotFound, agentd.ENOTFOUND)
	want(t, "no runner", bare.do("POST", "/v1/tools/lookup/eval", "k-ops", `{}`, nil), http.StatusNotFound, agentd.ENOTFOUND)
}
