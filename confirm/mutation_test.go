package confirm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// A header the connection sets itself (its static or auth header) is
// refused to the model, by the connection's own rule, even where the
// header rule would let it through.
func TestConnectionRefusesItsOwnHeaders(t *testing.T) {
	own := errors.New(`header "X-Team" is set by the connection`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{
		"c": {Name: "c", CheckHeader: func(name string) error {
			if strings.EqualFold(name, "X-Team") {
				return own
			}
			return nil
		}},
	}}
	call := func(header string) Classification {
		return Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(
			`{"connection":"c","method":"GET","endpoint":"/x","intent":"read","headers":{"` + header + `":"v"}}`)})
	}
	if d := call("X-Team"); !d.Refused || d.Tier != agentd.TierNever || !strings.Contains(d.Reason, own.Error()) {
		t.Fatalf("the connection's own header: tier %s refused %v (%s)", d.Tier, d.Refused, d.Reason)
	}
	if d := call("X-Trace"); d.Refused || d.Tier != agentd.TierAuto {
		t.Fatalf("an ordinary header: tier %s refused %v (%s)", d.Tier, d.Refused, d.Reason)
	}
}

// The exact match governs a call; a case variant of another endpoint
// takes over only with a stricter tier, not an equal one.
func TestCaseVariantOfEqualTierDoesNotGovern(t *testing.T) {
	p := mustPolicy(t, `{"endpoints": {
		"POST /Refunds/{id}": {"confirm": true, "reason": "Variant"},
		"POST /refunds/{id}": {"confirm": true, "reason": "Exact", "allow_edit": true}}}`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"c": {Name: "c", Policy: p}}}
	d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(
		`{"connection":"c","method":"POST","endpoint":"/refunds/7","intent":"write"}`)})
	if d.Tier != agentd.TierConfirm || d.Reason != "Exact" || d.PathTemplate != "/refunds/{id}" ||
		strings.Join(d.AllowedDecisions, ",") != "approve,deny,edit" {
		t.Fatalf("tier %s reason %q template %q allowed %v; want the exact endpoint's", d.Tier, d.Reason, d.PathTemplate, d.AllowedDecisions)
	}
}

// A threshold whose tier is not stricter than the endpoint's leaves the
// call as the endpoint has it: not escalated, the endpoint's reason.
func TestThresholdAtTheEndpointsTierChangesNothing(t *testing.T) {
	p := mustPolicy(t, `{"endpoints": {"POST /audits": {"confirm": "review", "reason": "Audited",
		"thresholds": [{"field": "body.amount", "above": 10, "escalate": "review", "reason": "Big"}]}}}`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"c": {Name: "c", Policy: p}}}
	d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(
		`{"connection":"c","method":"POST","endpoint":"/audits","data":{"amount":20},"intent":"write"}`)})
	if d.Tier != agentd.TierReview || d.Escalated || !strings.Contains(d.Reason, "Audited") || strings.Contains(d.Reason, "Big") {
		t.Fatalf("tier %s escalated %v reason %q; want review, not escalated, the endpoint's reason", d.Tier, d.Escalated, d.Reason)
	}
}

// lookupNumber: the largest number at the path, an array by its largest
// element and keys that differ only by case all counted (Classify refuses
// such keys first; the rule holds without it).
func TestLookupNumberTakesTheLargest(t *testing.T) {
	for doc, want := range map[string]float64{
		`{"body":{"amount":[3,20000,7]}}`:                 20000,
		`{"body":{"amount":[-5,-2,-9]}}`:                  -2,
		`{"body":{"amount":5,"AMOUNT":20000,"Amount":7}}`: 20000,
		`{"body":{"Amount":20000,"amount":5}}`:            20000,
		`{"query":{"amount":["1","30","2"]}}`:             30,
	} {
		path := "body.amount"
		if strings.HasPrefix(doc, `{"query"`) {
			path = "query.amount"
		}
		if got, ok := lookupNumber(json.RawMessage(doc), path); !ok || got != want {
			t.Errorf("lookupNumber(%s, %s) = %v, %v; want %v", doc, path, got, ok, want)
		}
	}
	for _, doc := range []string{`{"body":{"amount":[]}}`, `{"body":{"amount":["1"]}}`, `{"body":{"other":1}}`} {
		if got, ok := lookupNumber(json.RawMessage(doc), "body.amount"); ok {
			t.Errorf("lookupNumber(%s) = %v, want none", doc, got)
		}
	}
}

// A request has a body only when the arguments carry one: absent and
// null data (or body) send none; anything else is sent as written.
func TestResolveBody(t *testing.T) {
	rt := requestTool(t)
	op := &Tool{Name: "op", Kind: KindOperation, Connection: &ConnectionPolicy{Name: "c"},
		Operation: &Operation{Method: "POST", Template: "/things"}}
	for _, c := range []struct {
		tool *Tool
		args string
		body string // "" for none
	}{
		{rt, `{"connection":"plain","method":"POST","endpoint":"/x","intent":"write"}`, ""},
		{rt, `{"connection":"plain","method":"POST","endpoint":"/x","intent":"write","data":null}`, ""},
		{rt, `{"connection":"plain","method":"POST","endpoint":"/x","intent":"write","data": {"a":1}}`, `{"a":1}`},
		{rt, `{"connection":"plain","method":"POST","endpoint":"/x","intent":"write","data":0}`, `0`},
		{op, `{}`, ""},
		{op, `{"body":null}`, ""},
		{op, `{"body":"x"}`, `"x"`},
	} {
		tg, err := Resolve(c.tool, json.RawMessage(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		if c.body == "" && tg.Body != nil || string(tg.Body) != c.body {
			t.Errorf("%s: body %q, want %q", c.args, tg.Body, c.body)
		}
	}
}

// Among exceeded thresholds of the same tier, the one with the highest
// limit gives the reason, whatever their order in the file.
func TestThresholdWithTheHighestLimitGivesTheReason(t *testing.T) {
	for _, order := range []string{
		`{"field": "body.amount", "above": 100, "escalate": "review", "reason": "Low"},
		 {"field": "body.amount", "above": 1000, "escalate": "review", "reason": "High"}`,
		`{"field": "body.amount", "above": 1000, "escalate": "review", "reason": "High"},
		 {"field": "body.amount", "above": 100, "escalate": "review", "reason": "Low"}`,
	} {
		p := mustPolicy(t, `{"endpoints": {"POST /pay": {"confirm": true, "thresholds": [`+order+`]}}}`)
		rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"c": {Name: "c", Policy: p}}}
		d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(
			`{"connection":"c","method":"POST","endpoint":"/pay","data":{"amount":5000},"intent":"write"}`)})
		if d.Tier != agentd.TierReview || !d.Escalated || !strings.Contains(d.Reason, "High") {
			t.Errorf("tier %s escalated %v reason %q; want review for the limit of 1000", d.Tier, d.Escalated, d.Reason)
		}
	}
}

// A delegated conversation's confirm becomes review and keeps the
// endpoint's reason; without one the reason names the request.
func TestDelegatedEscalationKeepsTheReason(t *testing.T) {
	p := mustPolicy(t, `{"endpoints": {"POST /pay": {"confirm": true, "reason": "Moves money"}, "POST /plain": {"confirm": true}},
		"delegations": {"escalateConfirm": true}}`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"c": {Name: "c", Policy: p}}}
	for endpoint, want := range map[string]string{
		"/pay":   "Moves money, and this conversation is delegated",
		"/plain": `POST /plain on connection "c" needs confirmation, and this conversation is delegated`,
	} {
		d := Classify(Call{Name: rt.Name, Tool: rt, Delegated: true, Arguments: json.RawMessage(
			`{"connection":"c","method":"POST","endpoint":"` + endpoint + `","intent":"write"}`)})
		if d.Tier != agentd.TierReview || !d.Escalated || !strings.Contains(d.Reason, want) {
			t.Errorf("%s: tier %s escalated %v reason %q; want review with %q", endpoint, d.Tier, d.Escalated, d.Reason, want)
		}
	}
}

// CleanEndpoint takes an endpoint of up to 2048 bytes, and its refusals
// say what is wrong with the path.
func TestCleanEndpointSaysWhy(t *testing.T) {
	long := "/" + strings.Repeat("a", 2047)
	if got, err := CleanEndpoint(long); err != nil || got != long {
		t.Errorf("2048 bytes: %v", err)
	}
	if _, err := CleanEndpoint(long + "a"); err == nil || !strings.Contains(err.Error(), "longer than 2048 bytes") {
		t.Errorf("2049 bytes: %v", err)
	}
	for in, why := range map[string]string{
		"":            "endpoint is empty",
		"/a//b":       "has an empty segment",
		"/a/../b":     "has a dot segment",
		"/a/%2e/b":    "has a dot segment",
		"/a/.../b":    "a segment of only dots",
		"/a%2fb":      "has an encoded slash",
		"/a%2541":     "is encoded twice",
		"/a%ff":       "not valid UTF-8 once decoded",
		"/a%0a":       "refused once decoded",
		"/a%zz":       "bad percent-encoding",
		"http://x/y":  "not a URL",
		"x:80/y":      "not a URL",
		"/a?b":        "must not carry a query",
		"/a\u202eb":   "endpoint refused",
		"/a/\u2028/b": "line separator",
	} {
		if _, err := CleanEndpoint(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CleanEndpoint(%q) = %v, want an error saying %q", in, err, why)
		}
	}
}

// A parked call's deadline is the endpoint's approval_timeout when it has
// one, else the agent's.
func TestClassificationDeadline(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	if got := (Classification{}).Deadline(now, time.Hour); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("no approval_timeout: %v, want the agent's hour", got)
	}
	if got := (Classification{ApprovalTimeout: 5 * time.Minute}).Deadline(now, time.Hour); !got.Equal(now.Add(5 * time.Minute)) {
		t.Errorf("approval_timeout 5m: %v", got)
	}
}

// An operation's base tier is its endpoint's, else the policy's default
// for its method (SPEC §3 defaults without a policy); an operation tool
// without a connection or operation is never.
func TestOperationTier(t *testing.T) {
	p := mustPolicy(t, specPolicy)
	open := mustPolicy(t, `{"defaults": {"read": "confirm", "write": "auto"}}`)
	for _, c := range []struct {
		p            *Policy
		method, tmpl string
		want         agentd.Tier
	}{
		{p, "DELETE", "/invoices/{id}", agentd.TierNever},
		{p, "GET", "/files/{rest}", agentd.TierReview},
		{p, "GET", "/other", agentd.TierAuto},
		{p, "POST", "/other", agentd.TierConfirm},
		{open, "GET", "/other", agentd.TierConfirm},
		{open, "POST", "/other", agentd.TierAuto},
		{nil, "GET", "/x", agentd.TierAuto},
		{nil, "PUT", "/x", agentd.TierConfirm},
	} {
		if got := OperationTier(c.p, c.method, c.tmpl); got != c.want {
			t.Errorf("OperationTier(%s %s) = %s, want %s", c.method, c.tmpl, got, c.want)
		}
	}
	conn := &ConnectionPolicy{Name: "c", Policy: p}
	del := &Operation{Method: "DELETE", Template: "/invoices/{id}"}
	get := &Operation{Method: "GET", Template: "/invoices/{id}"}
	for _, c := range []struct {
		tool *Tool
		want agentd.Tier
	}{
		{&Tool{Kind: KindOperation, Connection: conn, Operation: get}, agentd.TierAuto},
		{&Tool{Kind: KindOperation, Connection: conn, Operation: del}, agentd.TierNever},
		{&Tool{Kind: KindOperation, Operation: get}, agentd.TierNever},
		{&Tool{Kind: KindOperation, Connection: conn}, agentd.TierNever},
	} {
		if got := c.tool.OperationTier(); got != c.want {
			t.Errorf("%+v: OperationTier() = %s, want %s", c.tool, got, c.want)
		}
	}
}

// A connection's credential header may be any valid name except a cookie,
// User-Agent, or a hop-by-hop, framing, client-set or route header.
func TestCheckAuthHeader(t *testing.T) {
	for _, ok := range []string{"Authorization", "X-Api-Key", "Private-Token", "X-User-Id"} {
		if err := CheckAuthHeader(ok); err != nil {
			t.Errorf("CheckAuthHeader(%q) = %v, want nil", ok, err)
		}
	}
	for name, why := range map[string]string{
		"Cookie":          "cannot carry credentials",
		"set-cookie":      "cannot carry credentials",
		"User-Agent":      "cannot carry credentials",
		"Content-Type":    "hop-by-hop or framing",
		"X-Forwarded-For": "(route)",
		"Bad Name":        "not a valid header name",
	} {
		if err := CheckAuthHeader(name); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckAuthHeader(%q) = %v, want an error saying %q", name, err, why)
		}
	}
}

// A constraint's min may equal its max (one value); above it is refused.
func TestGrantConstraintMinEqualsMax(t *testing.T) {
	m, err := ParseGrantMatch(json.RawMessage(`{"body.amount":{"min":5,"max":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Matches("", "d", json.RawMessage(`{"body":{"amount":5}}`)) || m.Matches("", "d", json.RawMessage(`{"body":{"amount":6}}`)) {
		t.Errorf("min = max = 5 must match 5 and only 5")
	}
	for raw, ok := range map[string]bool{`{"a":{"one_of":[1]}}`: true, `{"a":{"equals":1}}`: true, `{"a":{"min":1}}`: true, `{"a":{"max":1}}`: true} {
		if _, err := ParseGrantMatch(json.RawMessage(raw)); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// CheckShown names what it refuses.
func TestCheckShownSaysWhat(t *testing.T) {
	for s, why := range map[string]string{
		"a\nb":     "control character U+000A",
		"a\u0085b": "control character U+0085",
		"a\u2028b": "line separator U+2028",
		"a\u2029b": "line separator U+2029",
		"a\u202eb": "bidirectional formatting character U+202E",
		"a\u200fb": "bidirectional formatting character U+200F",
		"a\xffb":   "not valid UTF-8",
	} {
		if err := CheckShown(s); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckShown(%q) = %v, want %q", s, err, why)
		}
	}
	if err := CheckShown("café – ok ✓"); err != nil {
		t.Errorf("plain text: %v", err)
	}
}

// A path template's segments: ** only last, a named or * wildcard, or a
// literal that is not empty, a dot segment, a pattern character or an
// encoded slash or percent sign.
func TestParseTemplateSegments(t *testing.T) {
	for tmpl, why := range map[string]string{
		"/a/**/b":  "** must be the last segment",
		"/a/{}":    "bad parameter",
		"/a/{b{}}": "bad parameter",
		"/a//b":    `bad segment ""`,
		"/a/./b":   `bad segment "."`,
		"/a/../b":  `bad segment ".."`,
		"/a/b?c":   "bad segment",
		"/a/x*":    "bad segment",
		"/a/%2F":   "bad segment",
		"/a/%25":   "bad segment",
		"/a/%zz":   "bad segment",
	} {
		if _, err := parseTemplate(tmpl); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("parseTemplate(%q) = %v, want %q", tmpl, err, why)
		}
	}
	segs, err := parseTemplate("/caf%C3%A9/{id}/*/**")
	want := []segment{{segLiteral, "caf%C3%A9"}, {segWild, "id"}, {segWild, ""}, {segRest, ""}}
	if err != nil || len(segs) != len(want) {
		t.Fatalf("%v, %v", segs, err)
	}
	for i := range want {
		if segs[i] != want[i] {
			t.Errorf("segment %d: %+v, want %+v", i, segs[i], want[i])
		}
	}
}

// A header name is an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~,
// nothing else, and not empty.
func TestValidHeaderName(t *testing.T) {
	for _, ok := range []string{"azAZ09", "a", "z", "A", "Z", "0", "9", "!#$%&'*+-.^_`|~", "!a", "~"} {
		if !ValidHeaderName(ok) {
			t.Errorf("ValidHeaderName(%q) = false, want true", ok)
		}
	}
	for _, bad := range []string{"", "a b", "a:b", "a/b", "a@b", "a[b", "a{b", "a\"b", "a(b", "a\x7fb", "a\x00b", "é", "a,b", "a;b", "a=b", "a?b", "a\\b"} {
		if ValidHeaderName(bad) {
			t.Errorf("ValidHeaderName(%q) = true, want false", bad)
		}
	}
}

// An endpoint's approval_timeout must be positive: 0s and negatives are
// refused with the field named; the smallest positive one is taken.
func TestEndpointApprovalTimeoutIsPositive(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		_, err := ParsePolicy([]byte(`{"endpoints": {"POST /a": {"confirm": true, "approval_timeout": "` + v + `"}}}`))
		if err == nil || !strings.Contains(err.Error(), "endpoints.POST /a.approval_timeout") {
			t.Errorf("approval_timeout %s: %v", v, err)
		}
	}
	p := mustPolicy(t, `{"endpoints": {"POST /a": {"confirm": true, "approval_timeout": "1ns"}}}`)
	if p.Endpoints[0].ApprovalTimeout != time.Nanosecond {
		t.Errorf("approval_timeout 1ns: %v", p.Endpoints[0].ApprovalTimeout)
	}
}

// HEAD follows the GET keys also case-insensitively: a case variant of a
// stricter GET endpoint governs a HEAD request as it governs a GET.
func TestHeadCaseVariantTakesTheStricterGetTier(t *testing.T) {
	p := mustPolicy(t, `{"endpoints": {"GET /Secret": {"confirm": "never"}, "GET /{x}": {}}}`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"c": {Name: "c", Policy: p}}}
	for _, m := range []string{"GET", "HEAD"} {
		d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(
			`{"connection":"c","method":"` + m + `","endpoint":"/secret","intent":"read"}`)})
		if d.Tier != agentd.TierNever || d.PathTemplate != "/Secret" {
			t.Errorf("%s /secret: tier %s template %q, want never under GET /Secret", m, d.Tier, d.PathTemplate)
		}
	}
}

// A threshold without a field is refused, naming it.
func TestThresholdNeedsAField(t *testing.T) {
	_, err := ParsePolicy([]byte(`{"endpoints": {"POST /a": {"thresholds": [{"above": 1, "escalate": "review"}]}}}`))
	if err == nil || !strings.Contains(err.Error(), `"endpoints.POST /a.thresholds[0].field": is required`) {
		t.Fatalf("%v", err)
	}
}

// Without a threshold reason, the reason names the field, its value and
// the limit as written.
func TestThresholdReasonNamesTheLimit(t *testing.T) {
	p := mustPolicy(t, `{"endpoints": {"POST /pay": {"confirm": true, "thresholds": [{"field": "body.amount", "above": 10000, "escalate": "review"}]}}}`)
	rt := &Tool{Name: RequestToolName, Kind: KindRequest, Connections: map[string]*ConnectionPolicy{"c": {Name: "c", Policy: p}}}
	d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(
		`{"connection":"c","method":"POST","endpoint":"/pay","data":{"amount":20000.5},"intent":"write"}`)})
	want := `The call was not performed: body.amount is 20000.5, above the limit of 10000 for POST /pay on connection "c" (escalated to review). It needs human review outside this conversation.`
	if d.Reason != want {
		t.Fatalf("reason %q,\nwant %q", d.Reason, want)
	}
}
