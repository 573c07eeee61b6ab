package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's ten lines of curl really work: its shell blocks run, in
// order, against a server on the embedded demo, and the stream they print
// shows the card, the approval and the result.
func TestReadmeCurlSession(t *testing.T) {
	runReadmeSection(t, "## Ten lines of curl", []string{"event: run_started", "event: confirmation_required",
		`"tool_name":"refund_payment"`, `"decision":"approved"`, "event: confirmation_resolved", "event: tool_call_started",
		"event: tool_call_result", "Done, the refund went through", "event: run_finished"})
}

// The tour's curl session (docs/quickstart.md) works step by step, with
// the call read back while it is parked.
func TestQuickstartCurlSession(t *testing.T) {
	runDocSection(t, filepath.Join("docs", "quickstart.md"), "## A session with curl", []string{"event: run_started",
		"event: confirmation_required", `"tool_name":"refund_payment"`, `"status":"requires_confirmation"`,
		`"decision":"approved"`, "event: tool_call_started", "event: tool_call_result", "Done, the refund went through",
		"event: run_finished"})
}

// The tour's connection session works too: the request tool parks a
// billing refund, the approval runs it against the demo billing API, a
// big refund is refused by the threshold, and the durable path previews
// then performs a write.
func TestQuickstartConnectionSession(t *testing.T) {
	runDocSection(t, filepath.Join("docs", "quickstart.md"), "## A connection: the request-tool handshake with curl", []string{
		`"connection_name":"billing"`, `"path_template":"/refunds"`, `"method":"POST"`, `"decision":"approved"`,
		`"status":201`, "Done, the billing request went through", "event: tool_call_refused", "Refunds over 10,000 need a finance review",
		`"preview":{`, `"instruction":"Nothing was sent.`, `"idempotency_key":"`})
}

// The curl session of docs/api.md works: it parks two refunds, lists them
// with a filter, decides both in one atomic batch, reads the audit log and
// the metrics.
func TestAPIDocCurlSession(t *testing.T) {
	runDocSection(t, filepath.Join("docs", "api.md"), "## Bulk decisions, audit and metrics with curl", []string{
		`"tool_name":"refund_payment"`, `"status":"applied"`, `"via":"bulk"`, `"decision":"denied"`, `"kind":"decision"`,
		`"reason":"duplicate"`, `agentd_approval_decisions_total{decision="approved",source="bulk"} 1`, "agentd_parked_tool_calls 0"})
}

// The curl line of docs/api.md's OpenAPI section works: the document is
// served, without a key, and is OpenAPI 3.1.
func TestAPIDocOpenAPICurl(t *testing.T) {
	runDocSection(t, filepath.Join("docs", "api.md"), "## The OpenAPI document", []string{`"openapi": "3.1.0"`})
}

// The curl session of docs/protocols.md works: an AG-UI run to the
// interrupt, its resume, and an AI SDK denial.
func TestProtocolsDocCurlSession(t *testing.T) {
	runDocSection(t, filepath.Join("docs", "protocols.md"), "## With curl", []string{
		`"type":"interrupt"`, `"reason":"tool_call"`, `"type":"TOOL_CALL_RESULT"`, `"delta":"Done, the "`,
		`"outcome":{"type":"success"}`, `"type":"tool-approval-request"`, `"type":"tool-output-denied"`,
		`"delta":"did not "`, "data: [DONE]"})
}

func runReadmeSection(t *testing.T, heading string, wants []string) {
	t.Helper()
	runDocSection(t, "README.md", heading, wants)
}

// runDocSection runs the shell blocks of one section of a file of the
// repository, in order, against a server on the embedded demo, and checks
// their output has every one of wants.
func runDocSection(t *testing.T, file, heading string, wants []string) {
	t.Helper()
	blocks := docBlocks(t, file, heading)
	base, _, stop := serveWithLog(t, "--addr", "127.0.0.1:0", "--data", t.TempDir())
	defer stop()
	// curl talks to the server through a proxy that validates every
	// exchange against the API's OpenAPI document.
	base = validatingProxy(t, base)

	var script strings.Builder
	script.WriteString("set -e\n")
	for k, b := range blocks {
		body := strings.ReplaceAll(b, "A=http://127.0.0.1:8787", "A="+base)
		script.WriteString(body)
		if k < len(blocks)-1 {
			script.WriteString("\nsleep 1\n") // the model runs while the reader looks at the card
		}
	}
	script.WriteString("\nsleep 1\nkill %1 2>/dev/null || true\n") // the stream in the background, if any
	runShell(t, file, script.String(), nil, wants)
}

// docBlocks are the shell blocks (```sh) of one section of a file of the
// repository, from its heading to the next "## " heading, in order; it
// skips the test when curl is missing and fails it when there is none.
func docBlocks(t *testing.T, file, heading string) []string {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", file))
	must(t, err)
	section := string(doc)
	i := strings.Index(section, heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", file, heading)
	}
	section = section[i+1:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 1 {
		t.Fatalf("found no shell blocks in %q of %s", heading, file)
	}
	return blocks
}

// runShell runs script with bash (env, NAME=value, added to the test's
// environment) and checks its output has every one of wants.
func runShell(t *testing.T, file, script string, env []string, wants []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s session failed: %v\n%s", file, err, out)
	}
	got := string(out)
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s session output lacks %q:\n%s", file, want, got)
		}
	}
}

// The curl session of docs/inputs.md works: the demo's model asks with
// ask_user, the input is listed, a wrong answer is 422 naming each field,
// the answer is taken once and the run goes on with it.
func TestInputsDocCurlSession(t *testing.T) {
	runDocSection(t, filepath.Join("docs", "inputs.md"), "## A session with curl", []string{
		"event: input_required", `"status":"pending"`, `"code":"invalid_input"`, `"field":"colour"`,
		`"field":"count","message":"must be at least 1"`, `"status":"answered"`, `"content":{"count":12,"size":"s"}`,
		"event: input_resolved", `Thanks, noted: {\"action\":\"accept\",\"content\":{\"count\":12,\"size\":\"s\"}}`,
		"event: run_finished"})
}
