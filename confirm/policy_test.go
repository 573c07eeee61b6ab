package confirm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

const specPolicy = `{
  "endpoints": {
    "GET /invoices/{id}": {},
    "POST /invoices/{id}/pay": { "confirm": true, "reason": "Moves money",
      "thresholds": [ { "field": "body.amount", "above": 10000,  "escalate": "review" },
                      { "field": "body.amount", "above": 100000, "escalate": "never" } ] },
    "POST /reports/run": { "intent": "read" },
    "DELETE /invoices/{id}": { "confirm": "never", "reason": "Invoices are never deleted by the agent" },
    "PATCH /invoices/{id}": { "confirm": true, "allow_edit": true },
    "GET /files/**": { "confirm": "review" },
    "GET /invoices/*/lines": { "confirm": true },
    "GET /invoices/special": { "confirm": "never" },
    "* /admin/**": { "confirm": "never" }
  },
  "defaults": { "read": "auto", "write": "confirm" },
  "delegations": { "escalateConfirm": true }
}`

func mustPolicy(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(src))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	return p
}

func TestPolicyMatch(t *testing.T) {
	p := mustPolicy(t, specPolicy)
	tests := []struct {
		method, path string
		key          string // "" = no match
		params       map[string]string
	}{
		{"GET", "/invoices/42", "GET /invoices/{id}", map[string]string{"id": "42"}},
		{"get", "/invoices/42", "GET /invoices/{id}", map[string]string{"id": "42"}},
		{"GET", "/invoices/special", "GET /invoices/special", nil}, // literal beats {param}
		{"POST", "/invoices/7/pay", "POST /invoices/{id}/pay", map[string]string{"id": "7"}},
		{"GET", "/invoices/7/pay", "", nil},                                           // method must match
		{"GET", "/invoices", "", nil},                                                 // too short
		{"GET", "/invoices/1/lines", "GET /invoices/*/lines", nil},                    // * binds nothing
		{"GET", "/files/a/b/c", "GET /files/**", nil},                                 // ** takes the rest
		{"GET", "/files", "GET /files/**", nil},                                       // ** takes any rest, none included
		{"HEAD", "/invoices/42", "GET /invoices/{id}", map[string]string{"id": "42"}}, // HEAD falls back to GET keys
		{"DELETE", "/admin/users/1", "* /admin/**", nil},                              // any method
		{"GET", "/invoices/42/", "GET /invoices/{id}", map[string]string{"id": "42"}},
		{"POST", "/reports/run", "POST /reports/run", nil},
	}
	for _, tt := range tests {
		ep, params := p.Match(tt.method, tt.path)
		got := ""
		if ep != nil {
			got = ep.Key
		}
		if got != tt.key {
			t.Errorf("%s %s matched %q, want %q", tt.method, tt.path, got, tt.key)
			continue
		}
		for k, v := range tt.params {
			if params[k] != v {
				t.Errorf("%s %s: param %s=%q, want %q", tt.method, tt.path, k, params[k], v)
			}
		}
	}
	if ep, _ := p.Match("PATCH", "/invoices/1"); ep == nil || ep.Tier != agentd.TierConfirm || !ep.AllowEdit {
		t.Errorf("PATCH endpoint: %+v", ep)
	}
	if !p.EscalateConfirm || p.DefaultRead != agentd.TierAuto || p.DefaultWrite != agentd.TierConfirm {
		t.Errorf("defaults/delegations not read: %+v", p)
	}
}

func TestPolicySpecificity(t *testing.T) {
	p := mustPolicy(t, `{"endpoints": {
		"GET /a/**": {"confirm": "never"},
		"GET /a/{x}": {"confirm": "review"},
		"GET /a/b": {},
		"GET /{x}/b/c": {"confirm": true},
		"GET /a/{x}/c": {"confirm": "review"},
		"* /a/b": {"confirm": "never"}
	}}`)
	for path, want := range map[string]string{
		"/a/b":     "GET /a/b",     // literal beats {x} and **, named method beats *
		"/a/z":     "GET /a/{x}",   // {x} beats **
		"/a/b/c":   "GET /a/{x}/c", // literal first segment decides before anything else
		"/q/b/c":   "GET /{x}/b/c", // only candidate
		"/a/b/c/d": "GET /a/**",    // rest
		"/a/z/c":   "GET /a/{x}/c", // longer beats **
		"/a/z/q/r": "GET /a/**",    // rest
		"/a":       "GET /a/**",    // ** matches an empty rest
		"/a/b/":    "GET /a/b",     // trailing slash
		"/a/%7A":   "GET /a/{x}",   // escaped segments are opaque
		"/a/b%2Fc": "GET /a/{x}",   // an encoded slash is not a separator
		"/z/b/c/d": "",             // nothing
		"/":        "",             // nothing
	} {
		ep, _ := p.Match("GET", path)
		got := ""
		if ep != nil {
			got = ep.Key
		}
		if got != want {
			t.Errorf("GET %s matched %q, want %q", path, got, want)
		}
	}
	if ep, _ := p.Match("POST", "/a/b"); ep == nil || ep.Key != "* /a/b" {
		t.Errorf("POST /a/b matched %v, want * /a/b", ep)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"syntax", `{"endpoints": {`, "line 1"},
		{"unknown top field", `{"endpoint": {}}`, `field "endpoint": unknown field`},
		{"key without path", `{"endpoints": {"GET": {}}}`, `"endpoints.GET": key must be`},
		{"bad method", `{"endpoints": {"FETCH /a": {}}}`, `unknown method "FETCH"`},
		{"relative template", `{"endpoints": {"GET a/b": {}}}`, "must start with /"},
		{"** not last", `{"endpoints": {"GET /a/**/b": {}}}`, "** must be the last segment"},
		{"bad param", `{"endpoints": {"GET /a/{}": {}}}`, "bad parameter"},
		{"dot segment", `{"endpoints": {"GET /a/../b": {}}}`, "bad segment"},
		{"bad confirm", `{"endpoints": {"GET /a": {"confirm": "maybe"}}}`, `"endpoints.GET /a.confirm": must be true, false, "review" or "never"`},
		{"bad intent", `{"endpoints": {"POST /a": {"intent": "write"}}}`, `"endpoints.POST /a.intent"`},
		{"unknown endpoint field", `{"endpoints": {"POST /a": {"confrim": true}}}`, `"endpoints.POST /a.confrim": unknown field`},
		{"threshold escalate", `{"endpoints": {"POST /a": {"thresholds": [{"field": "body.x", "above": 1, "escalate": "confirm"}]}}}`, `"endpoints.POST /a.thresholds[0].escalate": must be "review" or "never"`},
		{"threshold field", `{"endpoints": {"POST /a": {"thresholds": [{"field": "amount", "above": 1, "escalate": "review"}]}}}`, `thresholds[0].field": must start with`},
		{"threshold above", `{"endpoints": {"POST /a": {"thresholds": [{"field": "body.x", "escalate": "review"}]}}}`, `thresholds[0].above": is required`},
		{"threshold above type", `{"endpoints": {"POST /a": {"thresholds": [{"field": "body.x", "above": "10", "escalate": "review"}]}}}`, `must be a number`},
		{"bad default", `{"defaults": {"write": "ask"}}`, `"defaults.write": must be "auto", "confirm", "review" or "never"`},
		{"bad timeout", `{"endpoints": {"POST /a": {"approval_timeout": "soon"}}}`, `approval_timeout": must be a positive Go duration`},
		{"conflict params", `{"endpoints": {"GET /a/{id}": {}, "GET /a/*": {"confirm": true}}}`, "conflicts with"},
		{"conflict rest", `{"endpoints": {"GET /a/**": {}, "GET /a/**/": {"confirm": true}}}`, "conflicts with"},
		{"conflict any method", `{"endpoints": {"* /a/{x}": {}, "* /a/{y}": {}}}`, "conflicts with"},
		{"not an object", `[]`, "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// Equally specific keys that cannot match the same request are fine.
	mustPolicy(t, `{"endpoints": {"GET /a/{id}": {}, "GET /b/{id}": {}, "POST /a/{id}": {}, "GET /a/{x}/c": {}, "* /a/x": {}}}`)
}

// FuzzPolicyMatch checks the matcher's invariants on arbitrary paths: it
// never panics, a match's literal segments equal the path's, its params
// are path segments, and no other endpoint that also matches is more
// specific.
func FuzzPolicyMatch(f *testing.F) {
	p := mustPolicy(f, specPolicy)
	for _, s := range []string{"/invoices/1", "/invoices/special", "/files/a/b", "/admin/x", "/", "//", "/invoices/1/pay/", "/a/../b"} {
		f.Add("GET", s)
		f.Add("POST", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		ep, params := p.Match(method, path)
		if ep == nil {
			return
		}
		parts := splitPath(path)
		for i, s := range ep.segs {
			if s.kind == segRest {
				break
			}
			if s.kind == segLiteral && parts[i] != s.value {
				t.Fatalf("%s matched literal %q against %q", ep.Key, s.value, parts[i])
			}
			if s.kind == segWild && s.value != "" && params[s.value] != parts[i] {
				t.Fatalf("param %s=%q, segment %q", s.value, params[s.value], parts[i])
			}
		}
		for _, other := range p.Endpoints {
			if other == ep || (other.Method != "*" && other.Method != strings.ToUpper(method)) {
				continue
			}
			if _, ok := other.match(parts, false); ok && moreSpecific(other, ep) {
				t.Fatalf("%s matched %s but %s is more specific", path, ep.Key, other.Key)
			}
		}
	})
}

// TestCaseVariantTakesTheStricterTier: a path that matches a weak endpoint
// exactly and a stricter one only case-insensitively is governed by the
// stricter one (a case-insensitive server would route it there); a path
// whose exact match is the stricter one keeps it.
func TestCaseVariantTakesTheStricterTier(t *testing.T) {
	rt := requestTool(t)
	for endpoint, want := range map[string]agentd.Tier{
		"/invoices/SPECIAL": agentd.TierNever, // exact: GET /invoices/{id} (auto); fold: GET /invoices/special (never)
		"/invoices/special": agentd.TierNever,
		"/invoices/42":      agentd.TierAuto,
	} {
		d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(`{"connection":"billing","method":"GET","endpoint":"` + endpoint + `","intent":"read"}`)})
		if d.Tier != want {
			t.Errorf("GET %s: tier %s (%s), want %s", endpoint, d.Tier, d.Reason, want)
		}
	}
}
