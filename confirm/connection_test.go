package confirm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

func requestTool(t testing.TB) *Tool {
	return &Tool{Name: RequestToolName, ServerID: "connections", Kind: KindRequest,
		Connections: map[string]*ConnectionPolicy{
			"billing": {Name: "billing", Policy: mustPolicy(t, specPolicy)},
			"open":    {Name: "open", Policy: mustPolicy(t, `{"defaults": {"read": "auto", "write": "auto"}}`)},
			"plain":   {Name: "plain"}, // no policy.json: reads auto, writes confirm
		}}
}

func TestDecideRequestTool(t *testing.T) {
	rt := requestTool(t)
	tests := []struct {
		name      string
		args      string
		delegated bool
		mode      Mode
		tier      agentd.Tier
		refused   bool
		escalated bool
		preview   bool
		reason    string // substring
		template  string
		allowed   string
	}{
		{name: "auto read", args: `{"connection":"billing","method":"GET","endpoint":"/invoices/42","intent":"read"}`,
			tier: agentd.TierAuto, template: "/invoices/{id}"},
		{name: "confirm write", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":500},"intent":"write"}`,
			tier: agentd.TierConfirm, reason: "Moves money", template: "/invoices/{id}/pay", allowed: "approve,deny"},
		{name: "threshold at the limit stays confirm", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":10000},"intent":"write"}`,
			tier: agentd.TierConfirm, reason: "Moves money", template: "/invoices/{id}/pay", allowed: "approve,deny"},
		{name: "threshold review", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":20000},"intent":"write"}`,
			tier: agentd.TierReview, refused: true, escalated: true, reason: "body.amount is 20000, above the limit of 10000", template: "/invoices/{id}/pay"},
		{name: "highest threshold wins", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":200000},"intent":"write"}`,
			tier: agentd.TierNever, refused: true, escalated: true, reason: "above the limit of 100000", template: "/invoices/{id}/pay"},
		{name: "only numbers count", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":"200000"},"intent":"write"}`,
			tier: agentd.TierConfirm, template: "/invoices/{id}/pay", allowed: "approve,deny"},
		{name: "delegated confirm becomes review", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":500},"intent":"write"}`,
			delegated: true, tier: agentd.TierReview, refused: true, escalated: true, reason: "delegated", template: "/invoices/{id}/pay"},
		{name: "delegated auto stays auto", args: `{"connection":"billing","method":"GET","endpoint":"/invoices/42","intent":"read"}`,
			delegated: true, tier: agentd.TierAuto, template: "/invoices/{id}"},
		{name: "post with intent read refused", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":1},"intent":"read"}`,
			tier: agentd.TierNever, refused: true, reason: `must declare intent "write"`, template: "/invoices/{id}/pay"},
		{name: "post with intent read where the endpoint allows it", args: `{"connection":"billing","method":"POST","endpoint":"/reports/run","intent":"read"}`,
			tier: agentd.TierAuto, template: "/reports/run"},
		{name: "never endpoint", args: `{"connection":"billing","method":"DELETE","endpoint":"/invoices/42","intent":"write"}`,
			tier: agentd.TierNever, refused: true, reason: "Invoices are never deleted by the agent", template: "/invoices/{id}"},
		{name: "never endpoint even for GET", args: `{"connection":"billing","method":"GET","endpoint":"/invoices/special","intent":"read"}`,
			tier: agentd.TierNever, refused: true, reason: `policy of GET /invoices/special on connection "billing" is "never"`, template: "/invoices/special"},
		{name: "review endpoint", args: `{"connection":"billing","method":"GET","endpoint":"/files/x/y","intent":"read"}`,
			tier: agentd.TierReview, refused: true, reason: "human review", template: "/files/**"},
		{name: "edit allowed", args: `{"connection":"billing","method":"PATCH","endpoint":"/invoices/42","data":{"memo":"x"},"intent":"write"}`,
			tier: agentd.TierConfirm, template: "/invoices/{id}", allowed: "approve,deny,edit"},
		{name: "unmatched write gets the default", args: `{"connection":"billing","method":"PUT","endpoint":"/other","intent":"write"}`,
			tier: agentd.TierConfirm, reason: `PUT /other on connection "billing" requires user confirmation`, allowed: "approve,deny"},
		{name: "unmatched read gets the default", args: `{"connection":"billing","method":"GET","endpoint":"/other","intent":"read"}`,
			tier: agentd.TierAuto},
		{name: "a GET declared write is a write", args: `{"connection":"plain","method":"GET","endpoint":"/x","intent":"write"}`,
			tier: agentd.TierConfirm, allowed: "approve,deny"},
		{name: "no policy: writes confirm", args: `{"connection":"plain","method":"POST","endpoint":"/x","intent":"write"}`,
			tier: agentd.TierConfirm, allowed: "approve,deny"},
		{name: "defaults can open writes", args: `{"connection":"open","method":"POST","endpoint":"/x","intent":"write"}`,
			tier: agentd.TierAuto},
		{name: "model-declared confirmed_write is write", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":5},"intent":"confirmed_write"}`,
			tier: agentd.TierConfirm, reason: "Moves money", template: "/invoices/{id}/pay", allowed: "approve,deny"},
		{name: "durable write previews", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":5},"intent":"write"}`,
			mode: ModeDurable, tier: agentd.TierConfirm, preview: true, template: "/invoices/{id}/pay", allowed: "approve,deny"},
		{name: "durable confirmed_write runs", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":5},"intent":"confirmed_write"}`,
			mode: ModeDurable, tier: agentd.TierConfirm, template: "/invoices/{id}/pay", allowed: "approve,deny"},
		{name: "durable confirmed_write cannot pass review", args: `{"connection":"billing","method":"POST","endpoint":"/invoices/42/pay","data":{"amount":50000},"intent":"confirmed_write"}`,
			mode: ModeDurable, tier: agentd.TierReview, refused: true, escalated: true, template: "/invoices/{id}/pay"},
		{name: "unknown connection", args: `{"connection":"nope","method":"GET","endpoint":"/x","intent":"read"}`,
			tier: agentd.TierNever, refused: true, reason: `unknown connection "nope" (available: billing, open, plain)`},
		{name: "bad method", args: `{"connection":"billing","method":"TRACE","endpoint":"/x","intent":"read"}`,
			tier: agentd.TierNever, refused: true, reason: `method "TRACE" is not supported`},
		{name: "bad intent", args: `{"connection":"billing","method":"GET","endpoint":"/x","intent":"maybe"}`,
			tier: agentd.TierNever, refused: true, reason: "intent must be"},
		{name: "credential header", args: `{"connection":"billing","method":"GET","endpoint":"/x","intent":"read","headers":{"Authorization":"Bearer x"}}`,
			tier: agentd.TierNever, refused: true, reason: `header "Authorization" cannot be set by the model`},
		{name: "method override header", args: `{"connection":"billing","method":"POST","endpoint":"/reports/run","intent":"read","headers":{"X-HTTP-Method-Override":"DELETE"}}`,
			tier: agentd.TierNever, refused: true, reason: "cannot be set by the model"},
		{name: "forwarding header by prefix", args: `{"connection":"billing","method":"GET","endpoint":"/x","intent":"read","headers":{"X-Forwarded-Prefix":"/admin"}}`,
			tier: agentd.TierNever, refused: true, reason: "cannot be set by the model"},
		{name: "path rewrite header", args: `{"connection":"billing","method":"GET","endpoint":"/x","intent":"read","headers":{"X-Original-URL":"/admin"}}`,
			tier: agentd.TierNever, refused: true, reason: "cannot be set by the model"},
		{name: "hop-by-hop header", args: `{"connection":"billing","method":"GET","endpoint":"/x","intent":"read","headers":{"connection":"close"}}`,
			tier: agentd.TierNever, refused: true, reason: "cannot be set by the model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Call{Name: RequestToolName, Arguments: json.RawMessage(tt.args), Tool: rt, Delegated: tt.delegated, Mode: tt.mode})
			if d.Tier != tt.tier || d.Refused != tt.refused || d.Escalated != tt.escalated || d.Preview != tt.preview {
				t.Fatalf("tier=%s refused=%v escalated=%v preview=%v (reason %q), want %s %v %v %v",
					d.Tier, d.Refused, d.Escalated, d.Preview, d.Reason, tt.tier, tt.refused, tt.escalated, tt.preview)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, tt.reason)
			}
			if tt.refused && !strings.HasPrefix(d.Reason, "The call was not performed: ") {
				t.Errorf("a refusal must say plainly that nothing was done: %q", d.Reason)
			}
			if d.PathTemplate != tt.template {
				t.Errorf("path template %q, want %q", d.PathTemplate, tt.template)
			}
			if got := strings.Join(d.AllowedDecisions, ","); got != tt.allowed {
				t.Errorf("allowed %q, want %q", got, tt.allowed)
			}
			if len(d.Digest) != 64 {
				t.Errorf("digest %q", d.Digest)
			}
		})
	}
}

func TestDecideRequestToolCard(t *testing.T) {
	rt := requestTool(t)
	d := Classify(Call{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(
		`{"connection":"billing","method":"post","endpoint":"invoices/42/pay","params":{"dry":false,"tag":["a","b"]},"data":{"amount":500},"headers":{"X-Trace":"t1"},"intent":"confirmed_write"}`)})
	if d.Tier != agentd.TierConfirm || d.Connection != "billing" || d.Method != "POST" || d.Endpoint != "/invoices/42/pay" {
		t.Fatalf("decision %+v", d)
	}
	var g map[string]any
	if err := json.Unmarshal(d.Params, &g); err != nil {
		t.Fatal(err)
	}
	want := `{"body":{"amount":500},"header":{"X-Trace":"t1"},"path":{"id":"42"},"query":{"dry":"false","tag":["a","b"]}}`
	if b, _ := json.Marshal(g); string(b) != want {
		t.Errorf("grouped arguments %s, want %s", b, want)
	}
	// The stored effective arguments say write: the model cannot skip the gate.
	var eff map[string]any
	_ = json.Unmarshal(d.Arguments, &eff)
	if eff["intent"] != IntentWrite {
		t.Errorf("effective intent %v", eff["intent"])
	}
	if dg, _ := Digest(d.Arguments); dg != d.Digest {
		t.Errorf("digest is not of the effective arguments")
	}
	tg, err := Resolve(rt, d.Arguments)
	if err != nil || tg.Query.Get("dry") != "false" || len(tg.Query["tag"]) != 2 || string(tg.Body) != `{"amount":500}` {
		t.Fatalf("target %+v %v", tg, err)
	}
}

func TestDecideOperationTool(t *testing.T) {
	conn := &ConnectionPolicy{Name: "billing", Policy: mustPolicy(t, specPolicy)}
	pay := &Tool{Name: "billing__payInvoice", ServerID: "billing", Kind: KindOperation,
		Connection: conn, Operation: &Operation{Method: "POST", Template: "/invoices/{invoice_id}/pay"}}
	get := &Tool{Name: "billing__getReport", ServerID: "billing", Kind: KindOperation,
		Connection: conn, Operation: &Operation{Method: "GET", Template: "/reports/{name}"}}

	d := Classify(Call{Name: pay.Name, Tool: pay, Arguments: json.RawMessage(`{"path":{"invoice_id":"in 1"},"body":{"amount":700}}`)})
	if d.Tier != agentd.TierConfirm || d.Reason != "Moves money" || d.Endpoint != "/invoices/in%201/pay" {
		t.Fatalf("decision %+v", d)
	}
	if d.PathTemplate != "/invoices/{invoice_id}/pay" {
		t.Errorf("an operation's card shows its own template, got %q", d.PathTemplate)
	}
	if !strings.Contains(string(d.Params), `"path":{"invoice_id":"in 1"}`) {
		t.Errorf("grouped %s", d.Params)
	}
	d = Classify(Call{Name: pay.Name, Tool: pay, Arguments: json.RawMessage(`{"path":{"invoice_id":"1"},"body":{"amount":100001}}`)})
	if d.Tier != agentd.TierNever || !d.Escalated {
		t.Fatalf("threshold on an operation: %+v", d)
	}
	d = Classify(Call{Name: get.Name, Tool: get, Arguments: json.RawMessage(`{"path":{"name":"q3"}}`)})
	if d.Tier != agentd.TierAuto || d.Method != "GET" {
		t.Fatalf("read: %+v", d)
	}
	if !strings.Contains(string(d.Params), `"path":{"name":"q3"}`) {
		t.Errorf("unmatched operation keeps its path params: %s", d.Params)
	}
	for _, bad := range []string{`{"path":{}}`, `{"path":{"name":".."}}`, `{"path":{"name":{"x":1}}}`, `{"path":{"name":"q"},"header":{"Cookie":"a"}}`} {
		if d := Classify(Call{Name: get.Name, Tool: get, Arguments: json.RawMessage(bad)}); !d.Refused {
			t.Errorf("%s not refused: %+v", bad, d)
		}
	}
}

func TestCleanEndpoint(t *testing.T) {
	good := map[string]string{
		"/invoices/1":      "/invoices/1",
		"invoices/1":       "/invoices/1",
		"/a%20b/c":         "/a%20b/c",
		"/a b":             "/a%20b",
		"/a/":              "/a",
		"/":                "/",
		"/%41":             "/A",
		"/v1:batch":        "/v1:batch",
		"/files/report.v2": "/files/report.v2",
	}
	for in, want := range good {
		got, err := CleanEndpoint(in)
		if err != nil || got != want {
			t.Errorf("CleanEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{
		"", "http://evil/", "https://evil.example/x", "//evil/x", "///evil", `\\evil\x`, `/a\..\b`,
		"/../../admin", "/a/../../admin", "/a/./b", "..", "/%2e%2e/admin", "/%2E%2e/x", "/.%2e/x",
		"/..%2fadmin", "/a%2Fb", "/a%5cb", "/%252e%252e/admin", "/a?x=1", "/a#f", "/a//b", "/a\x00b",
		"/a%00b", "javascript:alert(1)", "evil.com:80/x", ":80/x", "/%zz",
		"/a\u202eb", "/a%E2%80%AEb", "/a%E2%81%A6b", "/a\u0085b", "/a%C2%85b", "/a\u2028b", "/a\xffb",
	} {
		if got, err := CleanEndpoint(bad); err == nil {
			t.Errorf("CleanEndpoint(%q) = %q, want an error", bad, got)
		}
	}
}

// TestResolveQueryNumbers: a number in the request tool's params is sent
// as the model wrote it — every digit, no exponent — so the request the
// card shows is the request that runs.
func TestResolveQueryNumbers(t *testing.T) {
	tg, err := Resolve(requestTool(t), json.RawMessage(`{"connection":"billing","method":"GET","endpoint":"/invoices/1","intent":"read",
		"params":{"n":2.25,"big":1e21,"neg":-0.125,"list":[1.5,3]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string][]string{"n": {"2.25"}, "big": {"1000000000000000000000"}, "neg": {"-0.125"}, "list": {"1.5", "3"}} {
		if got := tg.Query[k]; !slices.Equal(got, want) {
			t.Errorf("query %s = %q, want %q", k, got, want)
		}
	}
}

// FuzzCleanEndpoint: whatever CleanEndpoint accepts is a rooted path whose
// segments, decoded once, are neither dot segments nor contain a slash,
// backslash or percent sign, and cleaning is idempotent.
func FuzzCleanEndpoint(f *testing.F) {
	for _, s := range []string{"/a/b", "/../x", "/%2e%2e", "//h/x", "a/b", "/a%2fb", "/%25", "/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := CleanEndpoint(p)
		if err != nil {
			return
		}
		if !strings.HasPrefix(clean, "/") || strings.HasPrefix(clean, "//") {
			t.Fatalf("%q → %q is not a rooted path", p, clean)
		}
		again, err := CleanEndpoint(clean)
		if err != nil || again != clean {
			t.Fatalf("not idempotent: %q → %q → %q, %v", p, clean, again, err)
		}
		for _, s := range splitPath(clean) {
			if s == "." || s == ".." || strings.ContainsAny(s, `\?#`) {
				t.Fatalf("%q → %q has segment %q", p, clean, s)
			}
		}
	})
}

// Hardening found in review: every way to make the policy see another
// request than the one that runs.
func TestDecideHardening(t *testing.T) {
	policy := mustPolicy(t, `{"endpoints": {
		"POST /refunds": {"confirm": true, "thresholds": [
			{"field": "body.amount", "above": 10000, "escalate": "review"},
			{"field": "body.count", "above": 5000, "escalate": "review"},
			{"field": "body.amount", "above": 1000000, "escalate": "never"},
			{"field": "body.lines", "above": 100, "escalate": "never"}]},
		"GET /exports": {"confirm": true, "thresholds": [{"field": "query.limit", "above": 100, "escalate": "never"}]},
		"GET /secrets/**": {"confirm": "never"},
		"DELETE /café/{id}": {"confirm": "never"},
		"DELETE /invoices/{id}": {"confirm": "never"}
	}, "defaults": {"read": "auto", "write": "auto"}}`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest,
		Connections: map[string]*ConnectionPolicy{"b": {Name: "b", Policy: policy}}}
	tests := []struct {
		name, args string
		tier       agentd.Tier
		invalid    bool
	}{
		{"a key that differs only by case is refused", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"amount":1,"Amount":12000},"intent":"write"}`, agentd.TierNever, true},
		{"a duplicated key is refused", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"amount":12000,"amount":1},"intent":"write"}`, agentd.TierNever, true},
		{"a nested duplicate is refused", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"x":[{"a":1,"A":2}]},"intent":"write"}`, agentd.TierNever, true},
		{"threshold keys match regardless of case", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"AMOUNT":12000},"intent":"write"}`, agentd.TierReview, false},
		{"an array counts by its largest element", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"lines":[1,200000,3]},"intent":"write"}`, agentd.TierNever, false},
		{"the strictest matching threshold wins across fields", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"lines":101,"amount":20000},"intent":"write"}`, agentd.TierNever, false},
		{"a numeric string counts in query", `{"connection":"b","method":"GET","endpoint":"/exports","params":{"limit":"999999"},"intent":"read"}`, agentd.TierNever, false},
		{"a number counts in query", `{"connection":"b","method":"GET","endpoint":"/exports","params":{"limit":101},"intent":"read"}`, agentd.TierNever, false},
		{"a numeric string does not count in body", `{"connection":"b","method":"POST","endpoint":"/refunds","data":{"amount":"12000"},"intent":"write"}`, agentd.TierConfirm, false},
		{"HEAD follows the GET policy", `{"connection":"b","method":"HEAD","endpoint":"/secrets/k","intent":"read"}`, agentd.TierNever, false},
		{"** matches an empty rest", `{"connection":"b","method":"GET","endpoint":"/secrets","intent":"read"}`, agentd.TierNever, false},
		{"non-ASCII literals match their encoded form", `{"connection":"b","method":"DELETE","endpoint":"/café/1","intent":"write"}`, agentd.TierNever, false},
		{"case does not dodge a stricter endpoint", `{"connection":"b","method":"DELETE","endpoint":"/Invoices/1","intent":"write"}`, agentd.TierNever, false},
		{"a segment of dots is refused", `{"connection":"b","method":"GET","endpoint":"/a/.../b","intent":"read"}`, agentd.TierNever, true},
		{"overlong UTF-8 is refused", `{"connection":"b","method":"GET","endpoint":"/%C0%AE%C0%AE/admin","intent":"read"}`, agentd.TierNever, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Call{Name: RequestToolName, Arguments: json.RawMessage(tt.args), Tool: rt})
			if d.Tier != tt.tier || d.Invalid != tt.invalid {
				t.Fatalf("tier=%s invalid=%v (reason %q), want %s %v", d.Tier, d.Invalid, d.Reason, tt.tier, tt.invalid)
			}
		})
	}
}
