package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
)

// `agentd demo-api` serves the demo billing API alone on loopback and
// refuses other addresses (it has no authentication).
func TestDemoAPICommand(t *testing.T) {
	if err := run(context.Background(), []string{"demo-api", "--addr", "0.0.0.0:0"}, func(string) string { return "" },
		io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("non-loopback address: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo-api", "--addr", "127.0.0.1:0"}, func(string) string { return "" }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	must(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := strings.TrimSpace(strings.TrimPrefix(line, "demo billing API on "))
	resp, err := testClient.Get(base + "/orders/A-1001")
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"A-1001"`) {
		t.Fatalf("GET order: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo-api: %v", err)
	}
}
