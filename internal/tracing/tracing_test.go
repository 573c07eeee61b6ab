package tracing

import (
	"context"
	"testing"
)

func TestParseFormat(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := Parse(tp)
	if !ok || !sc.IsSampled() || !sc.IsRemote() || Format(sc) != tp {
		t.Fatalf("Parse(%q) = %v, %v; Format = %q", tp, sc, ok, Format(sc))
	}
	for _, bad := range []string{"", "00-abc", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0G", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestIDGeneratorHonoursWithIDs(t *testing.T) {
	tid, sid := NewIDs()
	ctx := WithIDs(context.Background(), tid, sid)
	var g IDGenerator
	if gt, gs := g.NewIDs(ctx); gt != tid || gs != sid {
		t.Errorf("NewIDs = %s %s, want %s %s", gt, gs, tid, sid)
	}
	if gs := g.NewSpanID(ctx, tid); gs != sid {
		t.Errorf("NewSpanID = %s, want %s", gs, sid)
	}
	other, _ := NewIDs()
	if gs := g.NewSpanID(ctx, other); gs == sid || !gs.IsValid() {
		t.Errorf("NewSpanID of another trace = %s", gs)
	}
	if gt, gs := g.NewIDs(context.Background()); gt == tid || gs == sid || !gt.IsValid() || !gs.IsValid() {
		t.Errorf("NewIDs without WithIDs = %s %s", gt, gs)
	}
}

func TestTraceID(t *testing.T) {
	if got := TraceID("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("TraceID = %q", got)
	}
	if got := TraceID("not a traceparent"); got != "" {
		t.Errorf("TraceID of garbage = %q", got)
	}
}
