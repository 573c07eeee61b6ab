package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
	"github.com/agentd-dev/agentd/tools/callcontext"
	"github.com/rs/zerolog"
)

// The context routes check the context token before they read the body:
// a token of no running call (or an API key) is 401 whatever the body, a
// bad body with a running call's token is 400, both routes alike; the
// document describes their scheme as the context token, not an API key.
func TestContextTokenBeforeBody(t *testing.T) {
	ep := callcontext.New(zerolog.Nop())
	ep.SetURL("http://127.0.0.1:1/v1/context")
	s := newServer(t, roleKeys, api.Config{Context: ep})
	env, closeCtx := ep.Open(agentd.ToolCall{ID: "call_1", Name: "sync", TenantID: "t1", ProjectID: "p1"}, true, nil, false)
	defer closeCtx()
	var token string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, callcontext.EnvToken+"="); ok {
			token = v
		}
	}
	for _, path := range []string{"/v1/context/request", "/v1/context/tools/lookup"} {
		for _, bad := range []string{"agentd_ctx_0000", roleKeys[0].key} {
			want(t, path+" with a bad token and a bad body", s.do("POST", path, bad, `{not json`, nil), http.StatusUnauthorized, agentd.EUNAUTHORIZED)
		}
		want(t, path+" without a token", s.do("POST", path, "", `{not json`, nil), http.StatusUnauthorized, agentd.EUNAUTHORIZED)
		want(t, path+" with the token and a bad body", s.do("POST", path, token, `{not json`, nil), http.StatusBadRequest, agentd.EINVALID)
	}

	var doc struct {
		Paths map[string]map[string]struct {
			Security []map[string][]string `json:"security"`
		} `json:"paths"`
		Components struct {
			SecuritySchemes map[string]struct{ Description string } `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/context/request", "/v1/context/tools/{name}"} {
		sec := doc.Paths[path]["post"].Security
		if _, ok := sec[0]["contextToken"]; len(sec) != 1 || !ok {
			t.Errorf("%s: security %v, want the context token only", path, sec)
		}
	}
	if d := doc.Components.SecuritySchemes["contextToken"].Description; !strings.Contains(d, "AGENTD_CONTEXT_TOKEN") {
		t.Errorf("the contextToken scheme: %q", d)
	}
}
