package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// BenchmarkApprovalRules measures what approval rules (docs/governance.md)
// add to a decision: Engine.Decide of a parked call, from the call to its
// return (the rule check, the plan and the commit), on two engines in the
// same run, interleaved. "rules" parks its calls with {"approvers":
// ["owner"], "requester_may_approve": false}, the rule that costs the
// most: the decider is an admin, so only the owner entry can cover it and
// the conversation is read, and the run is read for its requester (the
// message is sent by an operator, the decision made by the owner). "none"
// parks them with the default rule, which an admin's role covers without a
// read. "rules" also has allow_remember, so each of its calls looks up
// remembered grants when it is classified (none applies: the card parks);
// the park — Send to confirmation_required — is measured beside the
// decision.
//
// Metrics: p50/p99 of both in ms and their ratio (target ≤ 1.05), and the
// park's p50 ratio. ns/op is the wall time of one pair of samples with
// their preparation.
//
//	go test -run '^$' -bench ApprovalRules -benchtime 1x ./bench/
func BenchmarkApprovalRules(b *testing.B) {
	helper := markHelper(b)
	dir := benchDir(b)
	b.Setenv(markEnv, dir+"/mark")
	rules := startAgentd(b, dir+"/rules", approvalRules, []toolDef{{name: "mark", command: []string{helper}, confirm: true,
		approval: `{"approvers":["owner"],"requester_may_approve":false,"allow_remember":true}`}})
	none := startAgentd(b, dir+"/none", approvalRules, []toolDef{{name: "mark", command: []string{helper}, confirm: true}})
	sender := agentd.Principal{TenantID: "default", ProjectID: "default", Role: agentd.RoleOperator, KeyID: "op"}
	ctx := context.Background()

	var parkRules, parkNone []time.Duration
	sample := func(inst *instance) time.Duration {
		conv, err := inst.engine.CreateConversation(ctx, devPrincipal, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		events := inst.w.watch(conv.ID)
		defer inst.w.unwatch(conv.ID)
		p0 := time.Now()
		if _, err := inst.engine.Send(ctx, sender, conv.ID, "go"); err != nil {
			b.Fatal(err)
		}
		callID := field(b, waitEvent(b, events, agentd.EventConfirmationRequired), "tool_call_id")
		if inst == rules {
			parkRules = append(parkRules, time.Since(p0))
		} else {
			parkNone = append(parkNone, time.Since(p0))
		}
		waitEvent(b, events, agentd.EventRunWaiting)
		t0 := time.Now()
		if _, err := inst.engine.Decide(ctx, devPrincipal, callID, agentd.DecisionRequest{Decision: "approve"}); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		waitEvent(b, events, agentd.EventRunFinished)
		return d
	}
	for range 5 {
		sample(rules)
		sample(none)
	}
	parkRules, parkNone = nil, nil
	n := iterations(b, "AGENTD_BENCH_SAMPLES", 200)
	var withRules, without []time.Duration
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		if i%2 == 0 {
			withRules = append(withRules, sample(rules))
			without = append(without, sample(none))
		} else {
			without = append(without, sample(none))
			withRules = append(withRules, sample(rules))
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	r, f := summarize(withRules), summarize(without)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(ms(r.p50), "rules-p50-ms")
	b.ReportMetric(ms(f.p50), "none-p50-ms")
	b.ReportMetric(float64(r.p50)/float64(f.p50), "ratio-p50")
	b.ReportMetric(float64(r.p99)/float64(f.p99), "ratio-p99")
	pr, pf := summarize(parkRules), summarize(parkNone)
	b.ReportMetric(float64(pr.p50)/float64(pf.p50), "park-ratio-p50")

	var t strings.Builder
	fmt.Fprintf(&t, "Engine.Decide of a parked call, %d samples each, interleaved\n", n)
	fmt.Fprintf(&t, "  %-40s %9s %9s %9s %9s\n", "", "p50 ms", "p90 ms", "p99 ms", "mean ms")
	row := func(name string, s summary) {
		fmt.Fprintf(&t, "  %-40s %9.3f %9.3f %9.3f %9.3f\n", name, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.mean))
	}
	row("rules: owner only, requester may not", r)
	row("none: the default rule", f)
	fmt.Fprintf(&t, "  %-40s %9.2f %9.2f %9.2f   (target p50 ≤ 1.05)\n", "ratio rules / none",
		float64(r.p50)/float64(f.p50), float64(r.p90)/float64(f.p90), float64(r.p99)/float64(f.p99))
	row("park, rules with a grant lookup", pr)
	row("park, the default rule", pf)
	fmt.Fprintf(&t, "  %-40s %9.2f %9.2f %9.2f   (target p50 ≤ 1.05)\n", "ratio park rules / none",
		float64(pr.p50)/float64(pf.p50), float64(pr.p90)/float64(pf.p90), float64(pr.p99)/float64(pf.p99))
	report(b, t.String())
}
