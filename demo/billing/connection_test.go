package billing_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/demo/billing"
)

// demoProject copies the demo's connection files into a new project dir.
func demoProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "connections")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(dir, "connections", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDemoConnectionAgainstDemoAPI(t *testing.T) {
	conns, err := connections.Load(demoProject(t), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 || conns[0].Name != "billing" {
		t.Fatalf("connections = %v", conns)
	}
	conn := conns[0]
	if conn.BaseURL() != "http://127.0.0.1:8091/api" || conn.AuthType() != "" || conn.Description == "" || len(conn.Warnings()) != 0 {
		t.Errorf("billing: %s auth %q, warnings %v", conn.BaseURL(), conn.AuthType(), conn.Warnings())
	}
	tools := map[string]*connections.OperationTool{}
	var names []string
	for _, tool := range conn.OperationTools() {
		tools[tool.Operation().ID] = tool
		names = append(names, tool.Name())
	}
	slices.Sort(names)
	want := []string{"billing__createRefund", "billing__deleteInvoice", "billing__getInvoice", "billing__getOrder",
		"billing__listInvoices", "billing__runReport", "billing__updateInvoice"}
	if !slices.Equal(names, want) {
		t.Fatalf("operation tools = %v, want %v", names, want)
	}
	rt := connections.NewRequestTool(conns)
	if rt == nil {
		t.Fatal("no request tool")
	}

	api := billing.New()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	if err := conn.SetBaseURL(srv.URL + "/api"); err != nil {
		t.Fatal(err)
	}

	type decision = confirm.Classification
	decide := func(tool *confirm.Tool, args string, delegated bool) decision {
		return confirm.Classify(confirm.Call{Name: tool.Name, Arguments: json.RawMessage(args), Tool: tool, Delegated: delegated})
	}
	// run executes a call of the tool name as the loop records it once
	// classified: its arguments and the HTTP request Decide resolved.
	run := func(exec func(context.Context, agentd.ToolCall) (json.RawMessage, error), name, id string, d decision) map[string]any {
		t.Helper()
		out, err := exec(context.Background(), agentd.ToolCall{ID: id, Name: name, Arguments: d.Arguments, Method: d.Method,
			Endpoint: d.Endpoint, ConnectionName: d.Connection, PathTemplate: d.PathTemplate, Params: d.Params})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		var r map[string]any
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Reads run at once.
	d := decide(tools["getOrder"].Confirm(), `{"path":{"id":"A-1001"}}`, false)
	if d.Tier != agentd.TierAuto || d.Refused {
		t.Errorf("getOrder: %+v", d)
	}
	if r := run(tools["getOrder"].Execute, tools["getOrder"].Name(), "c1", d); r["status"] != 200.0 || r["body"].(map[string]any)["id"] != "A-1001" {
		t.Errorf("getOrder result %v", r)
	}

	// A refund waits for the user, then runs once even if executed twice.
	d = decide(tools["createRefund"].Confirm(), `{"body":{"order_id":"A-1001","amount":50,"reason":"damaged"}}`, false)
	if d.Tier != agentd.TierConfirm || d.Reason != "Moves money back to the customer" || d.PathTemplate != "/refunds" {
		t.Errorf("createRefund: %+v", d)
	}
	first := run(tools["createRefund"].Execute, tools["createRefund"].Name(), "call_refund", d)
	again := run(tools["createRefund"].Execute, tools["createRefund"].Name(), "call_refund", d)
	if first["status"] != 201.0 || first["body"].(map[string]any)["id"] != again["body"].(map[string]any)["id"] || len(api.Refunds()) != 1 {
		t.Errorf("refund results %v / %v, %d refunds", first, again, len(api.Refunds()))
	}
	if d := decide(tools["createRefund"].Confirm(), `{"body":{"order_id":"A-1002","amount":15000}}`, false); d.Tier != agentd.TierReview ||
		!d.Refused || !strings.Contains(d.Reason, "Refunds over 10,000 need a finance review") {
		t.Errorf("refund over 10,000: %+v", d)
	}
	if d := decide(tools["createRefund"].Confirm(), `{"body":{"order_id":"A-1003","amount":200000}}`, false); d.Tier != agentd.TierNever || !d.Refused {
		t.Errorf("refund over 100,000: %+v", d)
	}
	if d := decide(tools["createRefund"].Confirm(), `{"body":{"order_id":"A-1001","amount":5}}`, true); d.Tier != agentd.TierReview || !d.Refused {
		t.Errorf("delegated refund: %+v", d)
	}
	if d := decide(tools["createRefund"].Confirm(), `{"body":{"order_id":"A-1001"}}`, false); !d.Refused || !strings.Contains(d.Reason, "amount") {
		t.Errorf("refund without amount: %+v", d)
	}

	// Invoices: edits need approval and may be edited; deletes never run.
	if d := decide(tools["updateInvoice"].Confirm(), `{"path":{"id":"INV-2002"},"body":{"memo":"x"}}`, false); d.Tier != agentd.TierConfirm ||
		!slices.Contains(d.AllowedDecisions, "edit") {
		t.Errorf("updateInvoice: %+v", d)
	}
	if d := decide(tools["deleteInvoice"].Confirm(), `{"path":{"id":"INV-2001"}}`, false); d.Tier != agentd.TierNever ||
		!strings.Contains(d.Reason, "Invoices are never deleted by the agent") {
		t.Errorf("deleteInvoice: %+v", d)
	}

	// The report is a POST that only reads.
	d = decide(tools["runReport"].Confirm(), `{"body":{"kind":"summary"}}`, false)
	if d.Tier != agentd.TierAuto {
		t.Errorf("runReport: %+v", d)
	}
	if r := run(tools["runReport"].Execute, tools["runReport"].Name(), "c2", d); r["status"] != 200.0 || r["body"].(map[string]any)["refunds"] != 1.0 {
		t.Errorf("report %v", r)
	}

	// The request tool reaches the same API.
	d = decide(rt.Confirm(), `{"connection":"billing","method":"get","endpoint":"/invoices","params":{"status":"open"},"intent":"read"}`, false)
	if d.Tier != agentd.TierAuto {
		t.Errorf("request GET /invoices: %+v", d)
	}
	if r := run(rt.Execute, confirm.RequestToolName, "c3", d); r["status"] != 200.0 || len(r["body"].(map[string]any)["invoices"].([]any)) != 2 {
		t.Errorf("invoices %v", r)
	}
	if d := decide(rt.Confirm(), `{"connection":"billing","method":"POST","endpoint":"/reports/run","intent":"read"}`, false); d.Tier != agentd.TierAuto || d.Refused {
		t.Errorf("request POST /reports/run as a read: %+v", d)
	}
	if d := decide(rt.Confirm(), `{"connection":"billing","method":"POST","endpoint":"/refunds","data":{"order_id":"A-1001","amount":1},"intent":"read"}`, false); !d.Refused {
		t.Errorf("a refund declared as a read: %+v", d)
	}

	var paths []string
	for _, r := range api.Requests() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	wantPaths := "GET /api/orders/A-1001,POST /api/refunds,POST /api/refunds,POST /api/reports/run,GET /api/invoices"
	if strings.Join(paths, ",") != wantPaths {
		t.Errorf("the API received %v, want %s", paths, wantPaths)
	}
	if k := api.Requests()[1].Header.Get("Idempotency-Key"); k != "call_refund" {
		t.Errorf("refund Idempotency-Key = %q", k)
	}
}
