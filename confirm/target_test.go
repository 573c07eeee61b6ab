package confirm

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
)

// recorded is the call as the loop stores it after Decide (loop's
// classify): the fields CallTarget reads.
func recorded(d Classification) agentd.ToolCall {
	return agentd.ToolCall{ID: "call_1", Arguments: d.Arguments, Method: d.Method, Endpoint: d.Endpoint,
		ConnectionName: d.Connection, PathTemplate: d.PathTemplate, Params: d.Params}
}

// The request recorded on a call is the request Decide resolved, field by
// field and the body byte for byte: execution needs nothing else.
func TestCallTargetIsTheDecidedTarget(t *testing.T) {
	rt := requestTool(t)
	conn := &ConnectionPolicy{Name: "billing", Policy: mustPolicy(t, specPolicy)}
	pay := &Tool{Name: "billing__payInvoice", ServerID: "billing", Kind: KindOperation,
		Connection: conn, Operation: &Operation{Method: "POST", Template: "/invoices/{invoice_id}/pay"}}
	calls := []struct {
		tool *Tool
		args string
	}{
		{rt, `{"connection":"billing","method":"GET","endpoint":"/invoices/42","intent":"read"}`},
		{rt, `{"connection":"billing","method":"POST","endpoint":"invoices/a b/pay","params":{"q":"x y","tag":["a","b"],"one":["z"],"n":1.50,"ok":true},` +
			`"data":{"text":"hi <b> & \u00e9 \u2028","n":1.50,"list":[1,2],"z":null},"headers":{"X-Trace":"t-1"},"intent":"write"}`},
		{rt, `{"connection":"plain","method":"DELETE","endpoint":"/x","data":null,"headers":{},"intent":"write"}`},
		{rt, `{"connection":"open","method":"PUT","endpoint":"/x","data":"a string body","intent":"confirmed_write"}`},
		{pay, `{"path":{"invoice_id":"in 1"},"query":{"dry":false},"header":{"X-Request-Id":"r"},"body":{"amount":700}}`},
		{pay, `{"path":{"invoice_id":"7"},"body":[1,"<&>"]}`},
	}
	for _, c := range calls {
		d := Classify(Call{Name: c.tool.Name, Tool: c.tool, Arguments: json.RawMessage(c.args)})
		if d.Refused || d.Target == nil {
			t.Fatalf("%s: refused: %s", c.args, d.Reason)
		}
		got, err := CallTarget(recorded(d))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		want := *d.Target
		want.Intent = "" // not part of the request
		if len(want.Header) == 0 {
			want.Header = nil
		}
		if string(got.Body) != string(want.Body) {
			t.Errorf("%s: body %s, want %s", c.args, got.Body, want.Body)
		}
		got.Body, want.Body = nil, nil
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.args, *got, want)
		}
	}
}

// CallTarget reads the recorded request, not the arguments: a call whose
// arguments say otherwise still sends what was recorded.
func TestCallTargetReadsTheRecord(t *testing.T) {
	rt := requestTool(t)
	d := Classify(Call{Name: rt.Name, Tool: rt, Arguments: json.RawMessage(`{"connection":"billing","method":"GET","endpoint":"/invoices/42","intent":"read"}`)})
	c := recorded(d)
	c.Arguments = json.RawMessage(`{"connection":"open","method":"DELETE","endpoint":"/elsewhere","intent":"write"}`)
	tg, err := CallTarget(c)
	if err != nil || tg.Connection != "billing" || tg.Method != "GET" || tg.Path != "/invoices/42" || tg.Template != "/invoices/{id}" {
		t.Fatalf("target %+v, %v", tg, err)
	}
	if tg.Query != nil || tg.Header != nil || tg.Body != nil {
		t.Errorf("empty groups must be absent: %+v", tg)
	}
}

func TestCallTargetRefusesCallsWithoutARecord(t *testing.T) {
	good := agentd.ToolCall{ConnectionName: "billing", Method: "GET", Endpoint: "/a", Params: json.RawMessage(`{"query":{"a":["1","2"]}}`)}
	if tg, err := CallTarget(good); err != nil || !reflect.DeepEqual(tg.Query, url.Values{"a": {"1", "2"}}) {
		t.Fatalf("good: %+v %v", tg, err)
	}
	for name, mutate := range map[string]func(*agentd.ToolCall){
		"a custom tool call": func(c *agentd.ToolCall) {
			*c = agentd.ToolCall{Method: MethodTool, Endpoint: "lookup", Arguments: json.RawMessage(`{}`)}
		},
		"no connection":      func(c *agentd.ToolCall) { c.ConnectionName = "" },
		"no method":          func(c *agentd.ToolCall) { c.Method = "" },
		"no endpoint":        func(c *agentd.ToolCall) { c.Endpoint = "" },
		"no params":          func(c *agentd.ToolCall) { c.Params = nil },
		"params not grouped": func(c *agentd.ToolCall) { c.Params = json.RawMessage(`[1]`) },
		"query not strings":  func(c *agentd.ToolCall) { c.Params = json.RawMessage(`{"query":{"a":{"b":1}}}`) },
		"header not strings": func(c *agentd.ToolCall) { c.Params = json.RawMessage(`{"header":{"a":1}}`) },
	} {
		c := good
		mutate(&c)
		if tg, err := CallTarget(c); err == nil {
			t.Errorf("%s: target %+v", name, tg)
		} else if !strings.Contains(err.Error(), "nothing was sent") && !strings.Contains(err.Error(), "recorded request is not valid") {
			t.Errorf("%s: error %q", name, err)
		}
	}
}
