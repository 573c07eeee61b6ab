package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/mcptest"
	"github.com/agentd-dev/agentd/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// BenchmarkMCPCall measures what agentd adds to a call of an MCP tool: the
// test server of package mcp (mcp/testdata/server, the SDK's own server)
// runs as two stdio subprocesses, one behind agentd's MCP source
// (mcp.Server.Execute, what the loop calls for notes__lookup: the bounded
// text of the result, as JSON) and one behind the SDK's client alone
// (ClientSession.CallTool of lookup). Samples alternate between the two,
// AGENTD_BENCH_SAMPLES of each (default 200).
//
//	go test -run '^$' -bench MCPCall -benchtime 1x ./bench/
func BenchmarkMCPCall(b *testing.B) {
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	dir := b.TempDir()
	server := mcptest.Server(b)
	b.Setenv("NOTES_FILE", filepath.Join(dir, "notes"))
	cfg, err := mcp.Parse([]byte(`{"servers":[{"id":"notes","command":["`+server+`"],"env":["NOTES_FILE"]}],"trust_annotations":["notes"]}`), dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	src := mcp.NewServers(cfg, zerolog.Nop())[0]
	defer src.Close()
	ctx := context.Background()
	if err := src.Start(ctx); err != nil {
		b.Fatal(err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &sdk.CommandTransport{Command: exec.Command(server)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()

	call := agentd.ToolCall{ID: "call_bench", Name: "notes__lookup", Arguments: json.RawMessage(`{"q":"tea"}`)}
	viaAgentd := func() error {
		out, err := src.Execute(ctx, call)
		if err == nil && !strings.Contains(string(out), "found tea") {
			err = fmt.Errorf("agentd: %s", out)
		}
		return err
	}
	direct := func() error {
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "lookup", Arguments: map[string]any{"q": "tea"}})
		if err == nil && (res.IsError || len(res.Content) == 0) {
			err = fmt.Errorf("direct: %+v", res)
		}
		return err
	}
	for range 20 { // warm both sessions
		if err := viaAgentd(); err != nil {
			b.Fatal(err)
		}
		if err := direct(); err != nil {
			b.Fatal(err)
		}
	}
	a, d := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		t0 := time.Now()
		if err := viaAgentd(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := direct(); err != nil {
			b.Fatal(err)
		}
		a, d = append(a, t1.Sub(t0)), append(d, time.Since(t1))
	}
	b.StopTimer()
	sa, sd := summarize(a), summarize(d)
	b.ReportMetric(float64(sa.p50)/float64(sd.p50), "ratio-p50")
	b.ReportMetric(float64(sa.p99)/float64(sd.p99), "ratio-p99")
	report(b, fmt.Sprintf("BenchmarkMCPCall: a stdio MCP tool call, %d samples each, alternated (ms)\n"+
		"  %-40s %9s %9s %9s\n  %-40s %9.3f %9.3f %9.3f\n  %-40s %9.3f %9.3f %9.3f\n  %-40s %9.2f %9.2f %9.2f\n",
		n, "", "p50", "p99", "mean",
		"agentd: mcp.Server.Execute", ms(sa.p50), ms(sa.p99), ms(sa.mean),
		"the SDK's client alone", ms(sd.p50), ms(sd.p99), ms(sd.mean),
		"ratio agentd / SDK", float64(sa.p50)/float64(sd.p50), float64(sa.p99)/float64(sd.p99), float64(sa.mean)/float64(sd.mean)))
}
