package gofunc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/tools/gofunc"
)

// A result of exactly MaxToolResultBytes bytes (as JSON) is returned; one
// byte more is refused.
func TestResultLimitBoundary(t *testing.T) {
	for _, tc := range []struct {
		size int // of the JSON result: the string's length plus its quotes
		ok   bool
	}{{agentd.MaxToolResultBytes, true}, {agentd.MaxToolResultBytes + 1, false}} {
		tool := gofunc.MustNew("sized", "A result of a given size.", func(context.Context, struct{}) (string, error) {
			return strings.Repeat("x", tc.size-2), nil
		})
		out, err := source(t, tool).Execute(context.Background(), agentd.ToolCall{Name: "sized"})
		if tc.ok && (err != nil || len(out) != tc.size) {
			t.Errorf("a result of %d bytes: %d bytes, %v; want it returned", tc.size, len(out), err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "result too large")) {
			t.Errorf("a result of %d bytes: %v; want result too large", tc.size, err)
		}
	}
}
