package confirm

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
)

// refuseTenant refuses a connection call of a tenant the connection does
// not allow (tenant_ids), before anything else about the call is classified.
func refuseTenant(c Call, d Classification, eff json.RawMessage) (Classification, bool) {
	conn := c.Tool.Connection
	if c.Tool.Kind == KindRequest {
		var a struct {
			Connection string `json:"connection"`
		}
		_ = json.Unmarshal(eff, &a) // eff passed the schema; a bad one names no connection
		conn = c.Tool.Connections[a.Connection]
	}
	if conn == nil || conn.AllowsTenant(c.TenantID) {
		return d, false
	}
	d.Tier, d.Refused, d.Connection = agentd.TierNever, true, conn.Name
	d.Why = fmt.Sprintf("connection %q is not available to this tenant", conn.Name)
	d.Reason = refusal(agentd.TierNever, d.Why)
	d.AllowedDecisions = nil
	return d, true
}

// classifyConnection classifies a request-tool or operation call whose
// arguments passed the schema: the endpoint's policy tier (or the default
// for reads or writes), raised by thresholds and delegation, never lowered.
func classifyConnection(c Call, d Classification, eff json.RawMessage) Classification {
	tg, err := Resolve(c.Tool, eff)
	if err == nil {
		err = checkKeys(eff)
	}
	if err != nil {
		d.Invalid = true
		return refuse(d, agentd.TierNever, false, err.Error())
	}
	conn := c.Tool.Connection
	if c.Tool.Kind == KindRequest {
		conn = c.Tool.Connections[tg.Connection]
	}
	ep := describeTarget(&d, c.Tool, conn, tg)

	write, err := writes(c.Tool.Kind, tg, ep)
	if err == nil && c.Tool.Kind == KindRequest && c.Mode == ModeLoop && tg.Intent == IntentConfirmedWrite {
		d, err = demoteConfirmedWrite(d, tg, eff)
	}
	if err != nil {
		return refuse(d, agentd.TierNever, false, err.Error())
	}

	var reason string
	d.Tier, reason = policyTier(conn.Policy, ep, write)
	if ep != nil {
		d.ApprovalTimeout = ep.ApprovalTimeout
		d.Approval = ep.Approval
	}
	subject := fmt.Sprintf("%s %s on connection %q", tg.Method, tg.Path, conn.Name)
	base := d.Tier
	d.Tier, reason = escalateByThreshold(ep, tg.Grouped, d.Tier, reason, subject)
	if c.Delegated {
		d.Tier, reason = escalateDelegated(conn.Policy, d.Tier, reason, subject)
	}
	d.Escalated = d.Tier.Rank() > base.Rank()
	return completeAtTier(c, d, tg, ep, reason, subject)
}

// refuse returns d refused at tier because of why: the call does not run,
// the model reads the refusal, and no decision is offered to an approver.
func refuse(d Classification, tier agentd.Tier, escalated bool, why string) Classification {
	d.Tier, d.Refused, d.Escalated = tier, true, escalated
	d.Why, d.Reason = strings.TrimSuffix(why, "."), refusal(tier, why)
	d.AllowedDecisions = nil
	return d
}

// describeTarget returns the endpoint policy of conn that governs tg (nil
// when none matches) and records on d what the call reaches: connection,
// method, path, template, grouped arguments and the target itself. A
// request tool's target takes the matched endpoint's template; path
// parameters are unescaped in the grouped arguments.
func describeTarget(d *Classification, t *Tool, conn *ConnectionPolicy, tg *Target) *Endpoint {
	d.Connection = conn.Name
	d.Method = tg.Method
	d.Endpoint = tg.Path
	ep, params := matchEndpoint(conn.Policy, tg.Method, tg.Path)
	if ep != nil && t.Kind == KindRequest {
		tg.Template = ep.Template
	}
	if t.Kind == KindOperation {
		// The model named the operation's own parameters.
		params = operationPathParams(t.Operation.Template, tg.Path)
	}
	for k, v := range params {
		if u, err := url.PathUnescape(v); err == nil {
			params[k] = u
		}
	}
	d.PathTemplate = tg.Template
	tg.Grouped = grouped(tg, params)
	d.Params = tg.Grouped
	d.Target = tg
	return ep
}

// matchEndpoint returns the endpoint of p that governs method and path,
// with its path parameters: the exact match, unless a case-insensitive
// match has a stricter tier.
func matchEndpoint(p *Policy, method, path string) (*Endpoint, map[string]string) {
	ep, params := p.Match(method, path)
	if fold, foldParams := p.MatchFold(method, path); fold != nil && (ep == nil || fold.Tier.Rank() > ep.Tier.Rank()) {
		// A case-insensitive server would route the request to fold's
		// endpoint: its stricter tier applies.
		return fold, foldParams
	}
	return ep, params
}

// writes reports whether the policy treats the call as a write. For a
// request tool that is its declared intent, except that intent "read" only
// counts where the endpoint allows it (ep.IntentRead); a method that
// changes data declaring "read" anywhere else is an error.
func writes(kind string, tg *Target, ep *Endpoint) (bool, error) {
	write := tg.Write()
	if kind != KindRequest {
		return write, nil
	}
	if write && tg.Intent == IntentRead && (ep == nil || !ep.IntentRead) {
		return false, fmt.Errorf(
			`%s %s changes data, so it must declare intent "write"; intent "read" is only accepted where the endpoint policy sets "intent": "read"`,
			tg.Method, tg.Path)
	}
	if tg.Intent != IntentRead {
		return true, nil
	}
	if ep != nil && ep.IntentRead {
		return false, nil
	}
	return write, nil
}

// demoteConfirmedWrite turns a loop call's intent confirmed_write into
// write, in tg and in d's effective arguments and digest: the model can
// never skip the gate. The error is the digest's.
func demoteConfirmedWrite(d Classification, tg *Target, eff json.RawMessage) (Classification, error) {
	eff = setIntent(eff, IntentWrite)
	tg.Intent = IntentWrite
	d.Arguments = eff
	var err error
	d.Digest, err = Digest(eff)
	return d, err
}

// policyTier is a connection call's tier and reason before thresholds and
// delegation: the matching endpoint's, else the policy's default for
// writes or reads.
func policyTier(p *Policy, ep *Endpoint, write bool) (agentd.Tier, string) {
	if ep != nil {
		return ep.Tier, ep.Reason
	}
	if write {
		return p.defaultWrite(), ""
	}
	return p.defaultRead(), ""
}

// escalateByThreshold returns tier and reason after ep's thresholds over
// the grouped arguments: the strictest threshold exceeded raises the tier
// and gives the reason; a tier is never lowered.
func escalateByThreshold(ep *Endpoint, grouped json.RawMessage, tier agentd.Tier, reason, subject string) (agentd.Tier, string) {
	hit, val := strictestThreshold(ep, grouped)
	if hit == nil || hit.Escalate.Rank() <= tier.Rank() {
		return tier, reason
	}
	reason = hit.Reason
	if reason == "" {
		reason = fmt.Sprintf("%s is %s, above the limit of %s for %s", hit.Field,
			strconv.FormatFloat(val, 'f', -1, 64), strconv.FormatFloat(hit.Above, 'f', -1, 64), subject)
	}
	return hit.Escalate, fmt.Sprintf("%s (escalated to %s)", strings.TrimSuffix(reason, "."), hit.Escalate)
}

// strictestThreshold returns the threshold of ep (nil if none or ep is nil)
// that the grouped arguments exceed with the strictest tier, among equals
// the one with the highest limit, and the value that exceeded it.
func strictestThreshold(ep *Endpoint, grouped json.RawMessage) (*Threshold, float64) {
	if ep == nil {
		return nil, 0
	}
	var hit *Threshold
	var hitVal float64
	for i := range ep.Thresholds {
		th := &ep.Thresholds[i]
		v, ok := lookupNumber(grouped, th.Field)
		if !ok || v <= th.Above {
			continue
		}
		if hit == nil || th.Escalate.Rank() > hit.Escalate.Rank() ||
			(th.Escalate == hit.Escalate && th.Above > hit.Above) {
			hit, hitVal = th, v
		}
	}
	return hit, hitVal
}

// escalateDelegated returns tier and reason for a call of a delegated
// conversation: where the policy sets escalate_confirm, confirm becomes
// review, since no one there can confirm it; any other tier is unchanged.
func escalateDelegated(p *Policy, tier agentd.Tier, reason, subject string) (agentd.Tier, string) {
	if p == nil || !p.EscalateConfirm || tier != agentd.TierConfirm {
		return tier, reason
	}
	if reason == "" {
		reason = subject + " needs confirmation"
	}
	return agentd.TierReview, fmt.Sprintf("%s, and this conversation is delegated: no one can confirm it here (escalated to review)", strings.TrimSuffix(reason, "."))
}

// completeAtTier completes d at its final tier: review and never are refused,
// confirm offers approve and deny (and edit where ep allows it) and, in
// ModeDurable without confirmed_write, a preview; each gets reason, or a
// sentence about subject when the policy gave none.
func completeAtTier(c Call, d Classification, tg *Target, ep *Endpoint, reason, subject string) Classification {
	switch d.Tier {
	case agentd.TierReview, agentd.TierNever:
		if reason == "" {
			reason = fmt.Sprintf("the policy of %s is %q", subject, d.Tier)
		}
		return refuse(d, d.Tier, d.Escalated, reason)
	case agentd.TierConfirm:
		if reason == "" {
			reason = fmt.Sprintf("%s requires user confirmation", subject)
		}
		d.Reason = reason
		d.AllowedDecisions = []string{"approve", "deny"}
		if ep != nil && ep.AllowEdit {
			d.AllowedDecisions = append(d.AllowedDecisions, "edit")
		}
		if c.Mode == ModeDurable && tg.Intent != IntentConfirmedWrite {
			d.Preview = true
		}
	default:
		d.Reason = reason
	}
	return d
}

// operationPathParams reads the {params} of an operation template back from
// the concrete path.
func operationPathParams(tmpl, path string) map[string]string {
	ts, ps := splitPath(tmpl), splitPath(path)
	if len(ts) != len(ps) {
		return nil
	}
	out := map[string]string{}
	for i, s := range ts {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			out[s[1:len(s)-1]] = ps[i]
		}
	}
	return out
}

func setIntent(args json.RawMessage, intent string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return args
	}
	m["intent"], _ = json.Marshal(intent)
	b, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return b
}

// refusal is the plain-words tool result of a refused call.
func refusal(tier agentd.Tier, why string) string {
	why = strings.TrimSuffix(why, ".")
	if tier == agentd.TierReview {
		return fmt.Sprintf("The call was not performed: %s. It needs human review outside this conversation.", why)
	}
	return fmt.Sprintf("The call was not performed: %s.", why)
}

func (p *Policy) defaultRead() agentd.Tier {
	if p == nil {
		return agentd.TierAuto
	}
	return p.DefaultRead
}

func (p *Policy) defaultWrite() agentd.Tier {
	if p == nil {
		return agentd.TierConfirm
	}
	return p.DefaultWrite
}

// Deadline returns when a call parked at now must be decided: the
// endpoint's approval_timeout if the classification carries one, else def.
func (d Classification) Deadline(now time.Time, def time.Duration) time.Time {
	if d.ApprovalTimeout > 0 {
		return now.Add(d.ApprovalTimeout)
	}
	return now.Add(def)
}

// OperationTier is an operation tool's tier before thresholds and
// delegation: its endpoint's policy tier, or the default for its method.
func (t *Tool) OperationTier() agentd.Tier {
	if t.Connection == nil || t.Operation == nil {
		return agentd.TierNever
	}
	return OperationTier(t.Connection.Policy, t.Operation.Method, t.Operation.Template)
}

// OperationTier is the base tier of an OpenAPI operation (method and path
// template) under policy p, before thresholds and delegation: the matching
// endpoint's tier, else the policy's default for reads or writes. Without a
// policy (p nil) the defaults of SPEC §3 apply: reads auto, writes confirm.
func OperationTier(p *Policy, method, template string) agentd.Tier {
	if ep, _ := p.Match(method, template); ep != nil {
		return ep.Tier
	}
	if safeMethod(method) {
		return p.defaultRead()
	}
	return p.defaultWrite()
}
