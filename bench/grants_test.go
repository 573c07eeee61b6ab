package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
)

// BenchmarkGrantLookup measures the remembered-grant lookup a call of
// tier confirm makes at classification (docs/governance.md#remembered-grants):
// GrantStore.ActiveGrants on a SQLite file, in a project that holds no
// grant ("empty") beside one that holds 10,000 ("full": 9,900 conversation
// grants of the same tool in 99 other conversations, 99 live project
// grants of other tools, and the looked-up conversation's own grant), in
// the same run, interleaved. The lookup reads two ranges of its index, so
// the grants of other conversations and tools cost nothing.
//
// Metrics: p50 of both in µs and their ratio. ns/op is the wall time of
// one pair of samples.
//
//	go test -run '^$' -bench GrantLookup -benchtime 1x ./bench/
func BenchmarkGrantLookup(b *testing.B) {
	ctx := context.Background()
	dir := benchDir(b)
	empty, err := sqlite.Open(filepath.Join(dir, "empty.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	full, err := sqlite.Open(filepath.Join(dir, "full.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer full.Close()
	now := time.Now().UTC()
	target := fillGrants(b, full, now)
	emptyConv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a", CreatedAt: now}
	if err := empty.CreateConversation(ctx, emptyConv); err != nil {
		b.Fatal(err)
	}
	sample := func(s *sqlite.DB, conv string, want int) time.Duration {
		t0 := time.Now()
		gs, err := s.ActiveGrants(ctx, agentd.GrantQuery{TenantID: "t", ProjectID: "p", ConversationID: conv, ToolName: "lookup", Now: now})
		d := time.Since(t0)
		if err != nil || len(gs) != want {
			b.Fatalf("ActiveGrants: %d grants, %v; want %d", len(gs), err, want)
		}
		return d
	}
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 2000)
	var withGrants, without []time.Duration
	b.ResetTimer()
	start := time.Now()
	for range n {
		withGrants = append(withGrants, sample(full, target, 1))
		without = append(without, sample(empty, emptyConv.ID, 0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	f, e := summarize(withGrants), summarize(without)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(f.p50.Microseconds()), "full-p50-µs")
	b.ReportMetric(float64(e.p50.Microseconds()), "empty-p50-µs")
	b.ReportMetric(float64(f.p50)/float64(e.p50), "ratio-p50")
	var t strings.Builder
	fmt.Fprintf(&t, "GrantStore.ActiveGrants on SQLite, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-44s %9s %9s %9s\n", "", "p50 µs", "p99 µs", "mean µs")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-44s %9.1f %9.1f %9.1f\n", name, us(s.p50), us(s.p99), us(s.mean))
	}
	row("full: 10,000 grants in the project", f)
	row("empty: no grant", e)
	fmt.Fprintf(&t, "  %-44s %9.2f %9.2f\n", "ratio full / empty", float64(f.p50)/float64(e.p50), float64(f.p99)/float64(e.p99))
	report(b, t.String())
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// fillGrants stores 10,000 grants in project p of tenant t (see
// BenchmarkGrantLookup) and returns the looked-up conversation.
func fillGrants(b *testing.B, s *sqlite.DB, now time.Time) string {
	ctx := context.Background()
	var target string
	for i := range 100 {
		conv := &agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: "t", ProjectID: "p", Agent: "a", CreatedAt: now}
		if err := s.CreateConversation(ctx, conv); err != nil {
			b.Fatal(err)
		}
		target = conv.ID
		run := &agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: "t", ProjectID: "p",
			CorrelationID: "c", Status: agentd.RunRunning, CreatedAt: now, UpdatedAt: now}
		msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID, Role: agentd.RoleUser, Content: "x", CreatedAt: now}
		if _, err := s.StartRun(ctx, run, msg, nil); err != nil {
			b.Fatal(err)
		}
		per := 100
		if i == 99 {
			per = 1 // the target conversation: its own grant only
		}
		calls := make([]*agentd.ToolCall, per)
		us := make([]agentd.CallUpdate, per)
		for j := range per {
			c := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: "t", ProjectID: "p", ConversationID: conv.ID, RunID: run.ID,
				CorrelationID: "c", Step: 1, Index: j, Name: "lookup", ServerID: "go", Arguments: json.RawMessage(`{}`), ArgumentsSHA256: "d",
				Tier: agentd.TierConfirm, Status: agentd.StatusRequiresConfirmation, Method: "TOOL", Endpoint: "lookup", CreatedAt: now, UpdatedAt: now}
			calls[j] = c
			g := &agentd.Grant{ID: agentd.NewID(agentd.PrefixGrant), TenantID: "t", ProjectID: "p", Scope: agentd.GrantConversation,
				ConversationID: conv.ID, ToolCallID: c.ID, ToolName: "lookup", ServerID: "go", Match: json.RawMessage(`"exact"`),
				ArgumentsSHA256: "d", CreatedBy: "k", CreatorRole: agentd.RoleOperator, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if j == 0 && i < 99 { // one project grant of another tool per conversation
				g.Scope, g.ToolName = agentd.GrantProject, fmt.Sprintf("tool-%d", i)
			}
			us[j] = agentd.CallUpdate{ID: c.ID, From: []agentd.CallStatus{agentd.StatusRequiresConfirmation}, Status: agentd.StatusApproved,
				Decision: &agentd.Decision{Decision: agentd.DecisionApproved, DecidedBy: "k", ArgumentsSHA256: "d"}, Grant: g, Now: now}
		}
		if _, err := s.CreateToolCalls(ctx, calls, nil); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.UpdateToolCalls(ctx, us, nil); err != nil {
			b.Fatal(err)
		}
	}
	return target
}
