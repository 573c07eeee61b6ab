package confirm

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
)

// Policy is a connection's endpoint policy (policy.json, SPEC §3). It is
// immutable after ParsePolicy and safe for concurrent use.
type Policy struct {
	// Endpoints in the order of the file's keys, sorted.
	Endpoints []*Endpoint
	// DefaultRead and DefaultWrite are the tiers of unmatched calls.
	DefaultRead, DefaultWrite agentd.Tier
	// EscalateConfirm turns confirm into review in delegated conversations.
	EscalateConfirm bool
}

// Endpoint is one entry of policy.json's "endpoints".
type Endpoint struct {
	Key      string // as written: "POST /invoices/{id}/pay"
	Method   string // upper case, or "*" for any method
	Template string // "/invoices/{id}/pay"
	Tier     agentd.Tier
	Reason   string
	// IntentRead lets POST/PUT/PATCH/DELETE declare intent "read".
	IntentRead bool
	// AllowEdit lets an approver replace the arguments.
	AllowEdit  bool
	Thresholds []Threshold
	// ApprovalTimeout overrides the agent's deadline for calls it parks; 0
	// means the agent's.
	ApprovalTimeout time.Duration
	// Approval is the endpoint's approval rule (SPEC §11.1); nil: the
	// agent's.
	Approval *agentd.ApprovalRule

	segs []segment
}

// Threshold raises the tier of a call whose numeric field is strictly above
// Above.
type Threshold struct {
	Field    string // dot path into the grouped arguments: "body.amount"
	Above    float64
	Escalate agentd.Tier // review or never
	Reason   string
}

type segKind int

// Segment kinds, least specific first.
const (
	segRest    segKind = iota // **
	segWild                   // {param} or *
	segLiteral                // a literal segment
)

type segment struct {
	kind  segKind
	value string // literal text, or the parameter name ("" for *)
}

// The files as written.
type (
	policyFile struct {
		Endpoints   map[string]json.RawMessage `json:"endpoints"`
		Defaults    *defaultsFile              `json:"defaults"`
		Delegations *delegationsFile           `json:"delegations"`
	}
	defaultsFile struct {
		Read  *string `json:"read"`
		Write *string `json:"write"`
	}
	delegationsFile struct {
		EscalateConfirm bool `json:"escalateConfirm"`
	}
	endpointFile struct {
		Confirm         json.RawMessage   `json:"confirm"`
		Reason          string            `json:"reason"`
		Intent          string            `json:"intent"`
		AllowEdit       bool              `json:"allow_edit"`
		Thresholds      []json.RawMessage `json:"thresholds"`
		ApprovalTimeout string            `json:"approval_timeout"`
		Approval        json.RawMessage   `json:"approval"`
	}
	thresholdFile struct {
		Field    string   `json:"field"`
		Above    *float64 `json:"above"`
		Escalate string   `json:"escalate"`
		Reason   string   `json:"reason"`
	}
)

// Methods a policy key may name ("*" matches any of them).
var policyMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// ParsePolicy reads a policy.json document. Errors name the field; two
// equally specific keys that can match the same request are an error.
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return nil, err
	}
	p := &Policy{DefaultRead: agentd.TierAuto, DefaultWrite: agentd.TierConfirm}
	if f.Defaults != nil {
		var err error
		if f.Defaults.Read != nil {
			if p.DefaultRead, err = parseTierName(*f.Defaults.Read); err != nil {
				return nil, strictjson.FieldErr("defaults.read", "%v", err)
			}
		}
		if f.Defaults.Write != nil {
			if p.DefaultWrite, err = parseTierName(*f.Defaults.Write); err != nil {
				return nil, strictjson.FieldErr("defaults.write", "%v", err)
			}
		}
	}
	if f.Delegations != nil {
		p.EscalateConfirm = f.Delegations.EscalateConfirm
	}
	keys := make([]string, 0, len(f.Endpoints))
	for k := range f.Endpoints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ep, err := parseEndpoint(k, f.Endpoints[k])
		if err != nil {
			return nil, err
		}
		p.Endpoints = append(p.Endpoints, ep)
	}
	for i, a := range p.Endpoints {
		for _, b := range p.Endpoints[i+1:] {
			if conflict(a, b) {
				return nil, strictjson.FieldErr("endpoints."+b.Key,
					"conflicts with %q: equally specific keys that can match the same request", a.Key)
			}
		}
	}
	return p, nil
}

func parseEndpoint(key string, raw json.RawMessage) (*Endpoint, error) {
	field := "endpoints." + key
	method, tmpl, ok := strings.Cut(key, " ")
	if !ok {
		return nil, strictjson.FieldErr(field, `key must be "METHOD /path/template"`)
	}
	method = strings.ToUpper(method)
	if method != "*" && !slices.Contains(policyMethods, method) {
		return nil, strictjson.FieldErr(field, "unknown method %q (want one of %s or *)", method, strings.Join(policyMethods, ", "))
	}
	segs, err := parseTemplate(tmpl)
	if err != nil {
		return nil, strictjson.FieldErr(field, "%v", err)
	}
	var f endpointFile
	if err := strictjson.DecodeStrict(raw, &f, field); err != nil {
		return nil, err
	}
	ep := &Endpoint{Key: key, Method: method, Template: tmpl, Reason: f.Reason, AllowEdit: f.AllowEdit, segs: segs}
	if ep.Tier, err = parseConfirm(f.Confirm); err != nil {
		return nil, strictjson.FieldErr(field+".confirm", "%v", err)
	}
	switch f.Intent {
	case "":
	case "read":
		ep.IntentRead = true
	default:
		return nil, strictjson.FieldErr(field+".intent", `must be "read" when set, got %q`, f.Intent)
	}
	if f.ApprovalTimeout != "" {
		d, err := time.ParseDuration(f.ApprovalTimeout)
		if err != nil || d <= 0 {
			return nil, strictjson.FieldErr(field+".approval_timeout", "must be a positive Go duration such as \"15m\", got %q", f.ApprovalTimeout)
		}
		ep.ApprovalTimeout = d
	}
	if ep.Approval, err = ParseApproval(f.Approval, field+".approval"); err != nil {
		return nil, err
	}
	if ep.Approval != nil {
		if err := ep.Approval.CheckTimeout(ep.ApprovalTimeout); err != nil {
			return nil, strictjson.FieldErr(field+".approval", "%v", err)
		}
	}
	for i, raw := range f.Thresholds {
		tf := fmt.Sprintf("%s.thresholds[%d]", field, i)
		var t thresholdFile
		if err := strictjson.DecodeStrict(raw, &t, tf); err != nil {
			return nil, err
		}
		if t.Field == "" {
			return nil, strictjson.FieldErr(tf+".field", "is required")
		}
		if root, _, _ := strings.Cut(t.Field, "."); !slices.Contains([]string{"path", "query", "header", "body"}, root) {
			return nil, strictjson.FieldErr(tf+".field", `must start with "path.", "query.", "header." or "body.", got %q`, t.Field)
		}
		if t.Above == nil {
			return nil, strictjson.FieldErr(tf+".above", "is required")
		}
		esc := agentd.Tier(t.Escalate)
		if esc != agentd.TierReview && esc != agentd.TierNever {
			return nil, strictjson.FieldErr(tf+".escalate", `must be "review" or "never", got %q`, t.Escalate)
		}
		ep.Thresholds = append(ep.Thresholds, Threshold{Field: t.Field, Above: *t.Above, Escalate: esc, Reason: t.Reason})
	}
	return ep, nil
}

// parseConfirm maps policy.json's confirm value to a tier: omitted or false
// → auto, true → confirm, "review", "never".
func parseConfirm(raw json.RawMessage) (agentd.Tier, error) {
	if strictjson.IsNull(raw) {
		return agentd.TierAuto, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		if b {
			return agentd.TierConfirm, nil
		}
		return agentd.TierAuto, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && (s == "review" || s == "never") {
		return agentd.Tier(s), nil
	}
	return "", fmt.Errorf(`must be true, false, "review" or "never", got %s`, raw)
}

func parseTierName(s string) (agentd.Tier, error) {
	switch t := agentd.Tier(s); t {
	case agentd.TierAuto, agentd.TierConfirm, agentd.TierReview, agentd.TierNever:
		return t, nil
	}
	return "", fmt.Errorf(`must be "auto", "confirm", "review" or "never", got %q`, s)
}

// parseTemplate splits "/a/{id}/*/**" into segments. "**" may only be last.
func parseTemplate(tmpl string) ([]segment, error) {
	if !strings.HasPrefix(tmpl, "/") {
		return nil, fmt.Errorf("path template %q must start with /", tmpl)
	}
	parts := splitPath(tmpl)
	segs := make([]segment, 0, len(parts))
	for i, s := range parts {
		seg, err := parseSegment(tmpl, s, i == len(parts)-1)
		if err != nil {
			return nil, err
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// parseSegment parses s, a segment of the path template tmpl; last says
// whether it is the template's last.
func parseSegment(tmpl, s string, last bool) (segment, error) {
	if s == "**" {
		if !last {
			return segment{}, fmt.Errorf("path template %q: ** must be the last segment", tmpl)
		}
		return segment{kind: segRest}, nil
	}
	if s == "*" {
		return segment{kind: segWild}, nil
	}
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		name := s[1 : len(s)-1]
		if name == "" || strings.ContainsAny(name, "{}/") {
			return segment{}, fmt.Errorf("path template %q: bad parameter %q", tmpl, s)
		}
		return segment{kind: segWild, value: name}, nil
	}
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "{}*?#") {
		return segment{}, fmt.Errorf("path template %q: bad segment %q", tmpl, s)
	}
	// Literals are kept in the form CleanEndpoint gives request paths, so
	// "/café" matches the request "/caf%C3%A9".
	dec, err := url.PathUnescape(s)
	if err != nil || strings.ContainsAny(dec, `/\%`) {
		return segment{}, fmt.Errorf("path template %q: bad segment %q", tmpl, s)
	}
	return segment{kind: segLiteral, value: url.PathEscape(dec)}, nil
}

// splitPath splits a path on "/" without the leading slash; "/" is no
// segments. A trailing slash is ignored.
func splitPath(p string) []string {
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// Match returns the most specific endpoint matching method and a clean
// path (as returned by CleanEndpoint), with the values of its {params};
// nil when none matches.
//
// HEAD falls back to the GET keys when no key names HEAD (servers answer
// HEAD with their GET handler).
func (p *Policy) Match(method, path string) (*Endpoint, map[string]string) {
	ep, params := p.match(method, path, false)
	if ep == nil && strings.EqualFold(method, "HEAD") {
		ep, params = p.match("GET", path, false)
	}
	return ep, params
}

// MatchFold is Match with literal segments compared regardless of case:
// the endpoint a case-insensitive server would route the request to.
func (p *Policy) MatchFold(method, path string) (*Endpoint, map[string]string) {
	ep, params := p.match(method, path, true)
	if ep == nil && strings.EqualFold(method, "HEAD") {
		ep, params = p.match("GET", path, true)
	}
	return ep, params
}

func (p *Policy) match(method, path string, fold bool) (*Endpoint, map[string]string) {
	if p == nil {
		return nil, nil
	}
	method = strings.ToUpper(method)
	parts := splitPath(path)
	var best *Endpoint
	var bestParams map[string]string
	for _, ep := range p.Endpoints {
		if ep.Method != "*" && ep.Method != method {
			continue
		}
		params, ok := ep.match(parts, fold)
		if !ok {
			continue
		}
		if best == nil || moreSpecific(ep, best) {
			best, bestParams = ep, params
		}
	}
	return best, bestParams
}

func (ep *Endpoint) match(parts []string, fold bool) (map[string]string, bool) {
	var params map[string]string
	for i, s := range ep.segs {
		if s.kind == segRest {
			return params, true // ** matches any rest, none included
		}
		if i >= len(parts) {
			return nil, false
		}
		switch s.kind {
		case segLiteral:
			if parts[i] != s.value && !(fold && strings.EqualFold(parts[i], s.value)) {
				return nil, false
			}
		case segWild:
			if s.value != "" {
				if params == nil {
					params = map[string]string{}
				}
				params[s.value] = parts[i]
			}
		}
	}
	if len(parts) != len(ep.segs) {
		return nil, false
	}
	return params, true
}

// moreSpecific orders endpoints: segment by segment, literal beats
// {param}/* beats **; then the longer template; then a named method beats *.
func moreSpecific(a, b *Endpoint) bool {
	if c := compareSpecificity(a, b); c != 0 {
		return c > 0
	}
	return a.Method != "*" && b.Method == "*"
}

func compareSpecificity(a, b *Endpoint) int {
	for i := 0; i < len(a.segs) && i < len(b.segs); i++ {
		if a.segs[i].kind != b.segs[i].kind {
			return int(a.segs[i].kind) - int(b.segs[i].kind)
		}
	}
	return len(a.segs) - len(b.segs)
}

// conflict reports whether a and b are equally specific and some request
// matches both.
func conflict(a, b *Endpoint) bool {
	if compareSpecificity(a, b) != 0 || (a.Method == "*") != (b.Method == "*") {
		return false
	}
	if a.Method != b.Method && a.Method != "*" {
		return false
	}
	// Same shape, so a request matches both unless two literals differ.
	for i := range a.segs {
		if a.segs[i].kind == segLiteral && a.segs[i].value != b.segs[i].value {
			return false
		}
	}
	return true
}
