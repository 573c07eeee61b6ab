package confirm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

// The header rule, name by name: what a model or durable-path caller may
// not set, and ordinary headers that still pass.
func TestCheckHeader(t *testing.T) {
	refused := map[string]string{ // name → the family's words in the error
		"Authorization": "credentials", "authorization": "credentials", "AUTHORIZATION": "credentials",
		"Proxy-Authorization": "credentials", "WWW-Authenticate": "credentials", "Cookie": "credentials",
		"Set-Cookie": "credentials", "X-Api-Key": "credentials", "api-key": "credentials", "X-Goog-Api-Key": "credentials",
		"Ocp-Apim-Subscription-Key": "credentials", "x-apikey": "credentials", "X-Auth-Token": "credentials",
		"X-Amz-Security-Token": "credentials", "X-CSRF-Token": "credentials", "X-XSRF-TOKEN": "credentials",
		"X-Session-Id": "credentials", "X-Client-Secret": "credentials", "X-Password": "credentials",
		"Signature": "credentials", "X-Hub-Signature-256": "credentials",

		"Connection": "hop-by-hop", "Keep-Alive": "hop-by-hop", "TE": "hop-by-hop", "te": "hop-by-hop",
		"Trailer": "hop-by-hop", "Transfer-Encoding": "hop-by-hop", "Upgrade": "hop-by-hop",
		"Content-Length": "hop-by-hop", "Content-Type": "hop-by-hop", "Content-Encoding": "hop-by-hop",
		"Accept-Encoding": "hop-by-hop", "Expect": "hop-by-hop", "HTTP2-Settings": "hop-by-hop",
		"Idempotency-Key": "hop-by-hop", "idempotency-key": "hop-by-hop",

		"Host": "route", "X-Host": "route", "X-Forwarded-Host": "route", "X-Original-Host": "route",
		"Via": "route", "via": "route", "Max-Forwards": "route", "Forwarded": "route", "X-Forwarded-For": "route",
		"x-forwarded-proto": "route", "X-Forwarded-Prefix": "route", "X-Real-IP": "route", "True-Client-IP": "route",
		"CF-Connecting-IP": "route", "X-Client-IP": "route", "Client-IP": "route", "X-ClientIP": "cannot be set", "X-RealIP": "route",
		"Fastly-Client-IP": "route", "X-Originating-IP": "route", "X-Remote-Addr": "route", "X-Remote-IP": "route",
		"X-Cluster-Client-IP": "route", "X-ProxyUser-Ip": "route", "Proxy-Connection": "route", "X_Forwarded_For": "route",
		"X-HTTP-Method-Override": "route", "X-HTTP-Method": "route", "X-Method-Override": "route",
		"X-Original-URL": "route", "X-Rewrite-URL": "route", "Origin": "route", "Range": "route", "If-Range": "route",

		"X-User": "who is calling", "X-User-Id": "who is calling", "X-Remote-User": "route", "User-Agent": "who is calling",
		"X-Tenant": "who is calling", "X-Tenant-Id": "who is calling", "X-Client": "who is calling", "X-Client-Id": "who is calling",
		"X-Account-Id": "who is calling", "Impersonate-User": "who is calling", "Sudo": "who is calling",
		"X-On-Behalf-Of": "who is calling", "X-Org-Id": "who is calling",

		"": "not a valid", "Bad Name": "not a valid", "X-A\r\nX-B": "not a valid", "X:y": "not a valid",
		"X(y)": "not a valid", "X-é": "not a valid", "X\x00": "not a valid", "X/Y": "not a valid",
	}
	for name, want := range refused {
		err := CheckHeader(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckHeader(%q) = %v, want an error about %q", name, err, want)
		}
	}
	for _, name := range []string{"Accept", "Accept-Language", "accept-language", "ACCEPT-LANGUAGE", "X-Request-Id",
		"x-request-id", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "Prefer", "Cache-Control",
		"Pragma", "traceparent", "tracestate", "X-Correlation-Id", "X-Trace", "Content-Language", "Accept-Charset",
		"X-Zip-Code", "X-Page-Size", "X-Idempotent", "Date", "DNT", "X-Keyword"} {
		if err := CheckHeader(name); err != nil {
			t.Errorf("CheckHeader(%q) = %v, want it allowed", name, err)
		}
	}
}

// Static headers (connection.json) are the operator's: headers that say
// who is calling are allowed there, every other family is not.
func TestCheckStaticHeader(t *testing.T) {
	for _, name := range []string{"X-Tenant", "X-Client", "User-Agent", "X-Account-Id", "Accept", "X-Api-Version"} {
		if err := CheckStaticHeader(name); err != nil {
			t.Errorf("CheckStaticHeader(%q) = %v, want it allowed", name, err)
		}
	}
	for name, want := range map[string]string{"Authorization": `credentials belong in "auth"`, "X-Api-Key": `belong in "auth"`,
		"Connection": "hop-by-hop", "X-Forwarded-For": "route", "X-HTTP-Method-Override": "route", "Via": "route",
		"Bad Name": "not a valid"} {
		if err := CheckStaticHeader(name); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "static header") {
			t.Errorf("CheckStaticHeader(%q) = %v, want an error about %q", name, err, want)
		}
	}
}

func TestCheckHeaderValue(t *testing.T) {
	for _, v := range []string{"a\r\nInjected: 1", "a\nb", "a\rb", "a\x00b", "\x7f", "\x1b[31m"} {
		if err := CheckHeaderValue("X-Note", v); err == nil || !strings.Contains(err.Error(), `header "X-Note"`) {
			t.Errorf("CheckHeaderValue(%q) = %v, want an error naming the header", v, err)
		}
	}
	for _, v := range []string{"", "plain", "a\tb", "é ü", `"quoted", list; q=0.5`} {
		if err := CheckHeaderValue("X-Note", v); err != nil {
			t.Errorf("CheckHeaderValue(%q) = %v", v, err)
		}
	}
}

// A header value that cannot be sent is refused before any card, on the
// request tool and on operation tools alike.
func TestDecideRefusesBadHeaderValues(t *testing.T) {
	rt := requestTool(t)
	op := &Tool{Name: "billing__payInvoice", Kind: KindOperation,
		Connection: rt.Connections["billing"], Operation: &Operation{Method: "POST", Template: "/invoices/{id}/pay"}}
	for _, v := range []string{"a\r\nX-Injected: 1", "a\nb", "a\u0000b"} {
		h, _ := json.Marshal(map[string]string{"X-Note": v})
		for _, c := range []Call{
			{Name: RequestToolName, Tool: rt, Arguments: json.RawMessage(`{"connection":"billing","method":"POST","endpoint":"/invoices/1/pay","data":{"amount":5},"intent":"write","headers":` + string(h) + `}`)},
			{Name: RequestToolName, Tool: rt, Mode: ModeDurable, Arguments: json.RawMessage(`{"connection":"billing","method":"POST","endpoint":"/invoices/1/pay","data":{"amount":5},"intent":"write","headers":` + string(h) + `}`)},
			{Name: op.Name, Tool: op, Arguments: json.RawMessage(`{"path":{"id":"1"},"body":{"amount":5},"header":` + string(h) + `}`)},
		} {
			d := Classify(c)
			if !d.Refused || !d.Invalid || d.Tier != agentd.TierNever || d.Preview || d.AllowedDecisions != nil ||
				!strings.Contains(d.Reason, `header "X-Note"`) || !strings.Contains(d.Reason, "control character") {
				t.Errorf("%s with %q: %+v", c.Name, v, d)
			}
		}
	}
}
