// Package provider is the plumbing the hosted model providers (model/openai,
// model/anthropic) share: the agent.json "model" object they both read, the
// retry loop with backoff and Retry-After, the classification of failed
// attempts into client-safe errors, the size limits of a response, and the
// text a tool result reads as. It knows no provider's wire format; those
// live with the SDKs in the provider packages.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/agentd-dev/agentd/internal/strictjson"
)

// Defaults are what a provider package fixes about its "model" object.
type Defaults struct {
	Provider       string  // the required value of "provider"
	APIKeyEnv      string  // the environment variable of the key when "api_key_env" is omitted
	MaxTokens      int64   // used when "max_tokens" is omitted; 0 sends none
	MaxTemperature float64 // the largest "temperature" the provider accepts
}

// Config is a validated "model" object with the key resolved. APIKey is a
// secret: it goes into a request header and nowhere else.
type Config struct {
	Model       string
	BaseURL     string // "" means the provider's own endpoint
	APIKeyEnv   string
	APIKey      string // "" only when BaseURL is set (local servers need none)
	MaxTokens   int64  // 0: not sent
	Temperature *float64
	MaxAttempts int
	Timeout     time.Duration // bounds one attempt, the whole stream included
}

// Limits and defaults of the shared fields.
const (
	DefaultMaxAttempts = 4
	MaxMaxAttempts     = 10
	DefaultTimeout     = 5 * time.Minute
)

// file is the "model" object as written; both providers take the same fields.
type file struct {
	Provider    string   `json:"provider"`
	Model       string   `json:"model"`
	BaseURL     string   `json:"base_url"`
	APIKeyEnv   *string  `json:"api_key_env"`
	MaxTokens   *int64   `json:"max_tokens"`
	Temperature *float64 `json:"temperature"`
	MaxAttempts *int     `json:"max_attempts"`
	Timeout     string   `json:"timeout"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Load decodes and checks the "model" object raw of agent.json and reads
// the API key from the environment through getenv. Unknown fields and bad
// values are errors that name the field ("model.max_tokens"); a missing key
// names the environment variable. No error ever contains the key.
func Load(raw json.RawMessage, getenv func(string) string, d Defaults) (*Config, error) {
	var f file
	if err := strictjson.DecodeStrict(raw, &f, "model"); err != nil {
		return nil, err
	}
	if f.Provider != d.Provider {
		return nil, strictjson.FieldErr("model.provider", "must be %q, got %q", d.Provider, f.Provider)
	}
	if f.Model == "" {
		return nil, strictjson.FieldErr("model.model", "required: the model name, e.g. %q", exampleModel(d.Provider))
	}
	c := &Config{Model: f.Model, APIKeyEnv: d.APIKeyEnv, MaxTokens: d.MaxTokens, MaxAttempts: DefaultMaxAttempts, Timeout: DefaultTimeout}

	if f.BaseURL != "" {
		u, err := url.Parse(f.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, strictjson.FieldErr("model.base_url", "must be an http or https URL, got %q", redactURL(f.BaseURL))
		}
		if u.User != nil {
			return nil, strictjson.FieldErr("model.base_url", "must not carry credentials; put the key in the environment variable named by api_key_env")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, strictjson.FieldErr("model.base_url", "must not have a query or a fragment")
		}
		c.BaseURL = f.BaseURL
	}
	if f.APIKeyEnv != nil {
		if !envName.MatchString(*f.APIKeyEnv) {
			return nil, strictjson.FieldErr("model.api_key_env", "must name an environment variable (letters, digits, _), got %q", *f.APIKeyEnv)
		}
		c.APIKeyEnv = *f.APIKeyEnv
	}
	if f.MaxTokens != nil {
		if *f.MaxTokens < 1 {
			return nil, strictjson.FieldErr("model.max_tokens", "must be at least 1, got %d", *f.MaxTokens)
		}
		c.MaxTokens = *f.MaxTokens
	}
	if f.Temperature != nil {
		if *f.Temperature < 0 || *f.Temperature > d.MaxTemperature {
			return nil, strictjson.FieldErr("model.temperature", "must be between 0 and %g, got %g", d.MaxTemperature, *f.Temperature)
		}
		t := *f.Temperature
		c.Temperature = &t
	}
	if f.MaxAttempts != nil {
		if *f.MaxAttempts < 1 || *f.MaxAttempts > MaxMaxAttempts {
			return nil, strictjson.FieldErr("model.max_attempts", "must be between 1 and %d, got %d", MaxMaxAttempts, *f.MaxAttempts)
		}
		c.MaxAttempts = *f.MaxAttempts
	}
	if f.Timeout != "" {
		t, err := time.ParseDuration(f.Timeout)
		if err != nil {
			return nil, strictjson.FieldErr("model.timeout", "%v", err)
		}
		if t <= 0 {
			return nil, strictjson.FieldErr("model.timeout", "must be greater than zero, got %q", f.Timeout)
		}
		c.Timeout = t
	}

	if getenv != nil {
		c.APIKey = getenv(c.APIKeyEnv)
	}
	if c.APIKey == "" && c.BaseURL == "" {
		return nil, strictjson.FieldErr("model.api_key_env", "the environment variable %s is not set; it must hold the %s API key (only a model with a base_url, such as a local server, may run without one)", c.APIKeyEnv, d.Provider)
	}
	return c, nil
}

func exampleModel(provider string) string {
	switch provider {
	case "anthropic":
		return "claude-sonnet-4-5"
	default:
		return "gpt-4o-mini"
	}
}

// redactURL hides a password an invalid URL may carry.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return fmt.Sprintf("<%d bytes>", len(s))
}

// Option changes how a provider's Model is built; the provider packages
// re-export it with WithSleep and WithHTTPClient.
type Option func(*Options)

// Options are the optional dependencies of a provider's Model.
type Options struct {
	// Sleep waits between attempts (Retry's default when nil).
	Sleep func(ctx context.Context, d time.Duration) error
	// Client sends the requests; NewHTTPClient's when nil.
	Client *http.Client
}

// WithSleep replaces the wait between attempts (tests assert the waited
// duration without waiting). sleep must return ctx.Err() when ctx ends first.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *Options) { o.Sleep = sleep }
}

// WithHTTPClient sends requests through client instead of a client of the
// Model's own.
func WithHTTPClient(client *http.Client) Option {
	return func(o *Options) { o.Client = client }
}

// Apply returns opts applied, with a client of the provider's own
// (NewHTTPClient) when none was given.
func Apply(opts []Option) Options {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if o.Client == nil {
		o.Client = NewHTTPClient()
	}
	return o
}
