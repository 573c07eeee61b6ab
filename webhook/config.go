package webhook

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentd-dev/agentd/internal/strictjson"
)

// Defaults of an endpoint's settings (agentd.json webhooks[]).
const (
	// DefaultTimeout bounds one attempt: connecting, sending and the answer's
	// headers and body.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxInFlight bounds the attempts in flight to one endpoint, so
	// a slow receiver holds only its own deliveries back.
	DefaultMaxInFlight = 4
	// maxSecrets bounds the secrets of one endpoint (rotation needs two).
	maxSecrets = 8
	// maxEndpoints bounds the endpoints of a configuration.
	maxEndpoints = 64
)

// DefaultRetrySchedule is the delays between attempts after the first,
// before jitter (SPEC §7): eight attempts over about 28 hours.
var DefaultRetrySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Endpoint is one configured receiver of webhooks.
type Endpoint struct {
	ID  string
	URL string
	// SecretEnv names the environment variable that held the secrets.
	SecretEnv string
	// Events are the event names the endpoint receives; nil means all.
	Events []string
	// TenantID and ProjectID, when set, keep only that tenant's (and
	// project's) events.
	TenantID, ProjectID string
	RetrySchedule       []time.Duration
	Timeout             time.Duration
	MaxInFlight         int
	// IncludeDecisionLinks puts decision links (SPEC §11.4), minted as
	// the key LinksKeyID, in llm.tool_call_approval_required
	// (include_decision_links, links_key_id; the key is checked against
	// the configured API keys by package project).
	IncludeDecisionLinks bool
	LinksKeyID           string
	// keys are the decoded signing secrets; a pointer, so that printing an
	// Endpoint never prints them.
	keys *keyring
}

// keyring holds an endpoint's signing secrets, in the order configured.
type keyring struct{ secrets []string }

// Wants reports whether the endpoint receives the event named name of a
// call of tenant and project.
func (e *Endpoint) Wants(name, tenant, project string) bool {
	if e.TenantID != "" && e.TenantID != tenant || e.ProjectID != "" && e.ProjectID != project {
		return false
	}
	return e.Events == nil || slices.Contains(e.Events, name)
}

type endpointFile struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	SecretEnv     string   `json:"secret_env"`
	Events        []string `json:"events"`
	TenantID      string   `json:"tenant_id"`
	ProjectID     string   `json:"project_id"`
	RetrySchedule []string `json:"retry_schedule"`
	Timeout       *string  `json:"timeout"`
	MaxInFlight   *int     `json:"max_in_flight"`
	// IncludeDecisionLinks and LinksKeyID: Endpoint's.
	IncludeDecisionLinks bool   `json:"include_decision_links"`
	LinksKeyID           string `json:"links_key_id"`
}

var (
	idPattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ParseConfig reads agentd.json's "webhooks" array (raw; empty or null means
// none) and the secrets its endpoints name through getenv. Errors name the
// field ("webhooks[0].url") and never hold a secret: an invalid URL, a
// missing or malformed whsec_ secret, an unknown event name, an invalid
// retry_schedule, timeout or max_in_flight, a duplicate id.
func ParseConfig(raw json.RawMessage, getenv func(string) string) ([]Endpoint, error) {
	if strictjson.IsNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, strictjson.FieldErr("webhooks", "must be an array of objects")
	}
	if len(list) > maxEndpoints {
		return nil, strictjson.FieldErr("webhooks", "at most %d endpoints, got %d", maxEndpoints, len(list))
	}
	var out []Endpoint
	seen := map[string]bool{}
	for i, item := range list {
		prefix := fmt.Sprintf("webhooks[%d]", i)
		e, err := parseEndpoint(item, prefix, getenv)
		if err != nil {
			return nil, err
		}
		if seen[e.ID] {
			return nil, strictjson.FieldErr(prefix+".id", "%q is used by another endpoint", e.ID)
		}
		seen[e.ID] = true
		out = append(out, e)
	}
	return out, nil
}

func parseEndpoint(raw json.RawMessage, prefix string, getenv func(string) string) (Endpoint, error) {
	var f endpointFile
	if err := strictjson.DecodeStrict(raw, &f, prefix); err != nil {
		return Endpoint{}, err
	}
	e := Endpoint{ID: f.ID, SecretEnv: f.SecretEnv, TenantID: f.TenantID, ProjectID: f.ProjectID,
		Timeout: DefaultTimeout, MaxInFlight: DefaultMaxInFlight, RetrySchedule: DefaultRetrySchedule}
	if !idPattern.MatchString(f.ID) {
		return Endpoint{}, strictjson.FieldErr(prefix+".id", "required: 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	u, err := checkURL(f.URL)
	if err != nil {
		return Endpoint{}, strictjson.FieldErr(prefix+".url", "%v", err)
	}
	e.URL = u
	if f.ProjectID != "" && f.TenantID == "" {
		return Endpoint{}, strictjson.FieldErr(prefix+".project_id", "needs tenant_id (project ids are scoped by their tenant)")
	}
	if e.keys, err = readSecrets(f.SecretEnv, getenv); err != nil {
		return Endpoint{}, strictjson.FieldErr(prefix+".secret_env", "%v", err)
	}
	if f.Events != nil {
		if len(f.Events) == 0 {
			return Endpoint{}, strictjson.FieldErr(prefix+".events", "must name at least one event (omit it for all)")
		}
		for j, name := range f.Events {
			if !slices.Contains(EventNames, name) {
				return Endpoint{}, strictjson.FieldErr(fmt.Sprintf("%s.events[%d]", prefix, j), "unknown event %q: use one of %s", name, strings.Join(EventNames, ", "))
			}
		}
		e.Events = slices.Compact(slices.Sorted(slices.Values(f.Events)))
	}
	if f.RetrySchedule != nil {
		if e.RetrySchedule, err = parseSchedule(f.RetrySchedule); err != nil {
			return Endpoint{}, strictjson.FieldErr(prefix+".retry_schedule", "%v", err)
		}
	}
	if f.Timeout != nil {
		d, err := time.ParseDuration(*f.Timeout)
		if err != nil || d <= 0 || d > 5*time.Minute {
			return Endpoint{}, strictjson.FieldErr(prefix+".timeout", "must be a Go duration between 1ms and 5m, got %q", *f.Timeout)
		}
		e.Timeout = d
	}
	if f.MaxInFlight != nil {
		if *f.MaxInFlight < 1 || *f.MaxInFlight > 64 {
			return Endpoint{}, strictjson.FieldErr(prefix+".max_in_flight", "must be between 1 and 64, got %d", *f.MaxInFlight)
		}
		e.MaxInFlight = *f.MaxInFlight
	}
	switch {
	case f.IncludeDecisionLinks && f.LinksKeyID == "":
		return Endpoint{}, strictjson.FieldErr(prefix+".links_key_id", "required with include_decision_links: the id of the API key whose approval rules the links follow")
	case !f.IncludeDecisionLinks && f.LinksKeyID != "":
		return Endpoint{}, strictjson.FieldErr(prefix+".links_key_id", "only with include_decision_links: true")
	}
	e.IncludeDecisionLinks, e.LinksKeyID = f.IncludeDecisionLinks, f.LinksKeyID
	return e, nil
}

// checkURL returns u if it is an absolute http or https URL with a host.
func checkURL(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("required: the receiver's http or https URL")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("not a URL: %v", err.(*url.Error).Err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("must be an http or https URL, got scheme %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("must name a host")
	case u.Fragment != "":
		return "", fmt.Errorf("must not have a fragment")
	}
	return raw, nil
}

// readSecrets reads the space-separated whsec_ secrets in the environment
// variable name (several while a secret rotates: each delivery carries one
// signature per secret).
func readSecrets(name string, getenv func(string) string) (*keyring, error) {
	if name == "" {
		return nil, fmt.Errorf("required: the environment variable that holds the endpoint's whsec_ secret")
	}
	if !envPattern.MatchString(name) {
		return nil, fmt.Errorf("%q is not an environment variable name", name)
	}
	fields := strings.Fields(getenv(name))
	if len(fields) == 0 {
		return nil, fmt.Errorf("environment variable %s is not set or empty", name)
	}
	if len(fields) > maxSecrets {
		return nil, fmt.Errorf("environment variable %s holds %d secrets, at most %d", name, len(fields), maxSecrets)
	}
	for i, s := range fields {
		if err := checkSecret(s); err != nil {
			return nil, fmt.Errorf("environment variable %s, secret %d: %v", name, i+1, err)
		}
	}
	return &keyring{secrets: fields}, nil
}

// checkSecret validates one secret without ever quoting it.
func checkSecret(s string) error {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return fmt.Errorf(`must start with "whsec_" followed by the base64 of the key`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf(`the part after "whsec_" is not standard base64`)
	}
	if len(key) < 16 || len(key) > 128 {
		return fmt.Errorf("the key must be 16 to 128 bytes (24 to 64 recommended), got %d", len(key))
	}
	return nil
}

// parseSchedule parses retry_schedule: 0 to 20 positive Go durations of at
// most 24h.
func parseSchedule(list []string) ([]time.Duration, error) {
	if len(list) > 20 {
		return nil, fmt.Errorf("at most 20 delays, got %d", len(list))
	}
	out := make([]time.Duration, len(list))
	for i, s := range list {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > 24*time.Hour {
			return nil, fmt.Errorf("entry %d: must be a Go duration between 1ns and 24h, got %q", i, s)
		}
		out[i] = d
	}
	return out, nil
}
