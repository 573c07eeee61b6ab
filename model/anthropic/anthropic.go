// Package anthropic is the model provider for Anthropic's Messages API,
// built on the official SDK github.com/anthropics/anthropic-sdk-go/v2. Each
// model step is one streamed request: text deltas reach the loop as they
// arrive, tool_use blocks are assembled from their input_json_delta
// fragments (message.Accumulate), usage and stop_reason come back with the
// step. Failed attempts are retried by model/internal/provider, not by the
// SDK (docs/models.md).
//
//	"model": {"provider": "anthropic", "model": "claude-sonnet-4-5"}
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/model/internal/provider"
	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// Provider is the value of "provider" this package reads.
const Provider = "anthropic"

// DefaultAPIKeyEnv holds the API key unless "api_key_env" names another variable.
const DefaultAPIKeyEnv = "ANTHROPIC_API_KEY"

// DefaultBaseURL is the endpoint used without "base_url"; requests go to
// <base_url>/v1/messages.
const DefaultBaseURL = "https://api.anthropic.com/"

// DefaultMaxTokens is max_tokens when "max_tokens" is omitted (the Messages
// API requires one).
const DefaultMaxTokens = 4096

// maxToolUseID bounds tool_use ids sent; Anthropic accepts ^[a-zA-Z0-9_-]+$.
const maxToolUseID = 64

// Model is an Anthropic Messages model. It is safe for concurrent use.
type Model struct {
	cfg   provider.Config
	svc   sdk.MessageService
	retry provider.Retry
}

var _ agentd.Model = (*Model)(nil)

// Option changes how a Model is built.
type Option = provider.Option

// WithSleep replaces the wait between attempts (tests assert the waited
// duration without waiting). sleep must return ctx.Err() when ctx ends first.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return provider.WithSleep(sleep)
}

// WithHTTPClient sends requests through client instead of a client of the
// Model's own.
func WithHTTPClient(client *http.Client) Option { return provider.WithHTTPClient(client) }

// New builds a Model from agent.json's "model" object raw:
//
//	{"provider": "anthropic", "model": NAME, "base_url"?: URL,
//	 "api_key_env"?: "ANTHROPIC_API_KEY", "max_tokens"?: N (4096),
//	 "temperature"?: 0..1, "max_attempts"?: 1..10 (4), "timeout"?: DURATION (5m)}
//
// The key is read through getenv (os.Getenv when nil) from the variable
// api_key_env names; without base_url a missing key is an error naming
// that variable, with base_url (a proxy) the request goes without one.
// Errors name the field ("model.max_tokens") and never contain the key.
// The SDK reads no ANTHROPIC_* variable or profile of its own.
func New(raw json.RawMessage, getenv func(string) string, opts ...Option) (*Model, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := provider.Load(raw, getenv, provider.Defaults{Provider: Provider, APIKeyEnv: DefaultAPIKeyEnv, MaxTokens: DefaultMaxTokens, MaxTemperature: 1})
	if err != nil {
		return nil, err
	}
	o := provider.Apply(opts)
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	// The service is built from explicit options only: sdk.NewClient would
	// also read ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles and more.
	reqOpts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(o.Client),
		option.WithMaxRetries(0), // provider.Retry retries
	}
	if cfg.APIKey != "" {
		// This SDK version sends the key as a bearer token; the Messages API
		// documents x-api-key, so send both.
		reqOpts = append(reqOpts, option.WithAPIKey(cfg.APIKey), option.WithHeader("x-api-key", cfg.APIKey))
	}
	return &Model{
		cfg: *cfg,
		svc: sdk.NewMessageService(reqOpts...),
		retry: provider.Retry{
			Provider: Provider, MaxAttempts: cfg.MaxAttempts, Timeout: cfg.Timeout,
			Sleep: o.Sleep, Secrets: []string{cfg.APIKey},
		},
	}, nil
}

// Generate streams one model step. Text deltas go to onDelta in order as
// they arrive; the response carries their concatenation, every tool_use
// block of the step in order (id, name, input; an input that arrived
// unparseable becomes {}), usage (input tokens, cache reads and writes
// included, and output tokens) and stop_reason as StopReason. Failed
// attempts are retried as provider.Retry.Do promises; a cancelled ctx
// ModelName is the model id agent.json names (gen_ai.request.model).
func (m *Model) ModelName() string { return m.cfg.Model }

// stops the stream and returns ctx.Err().
func (m *Model) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(delta string)) (*agentd.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	var reqOpts []option.RequestOption
	if m.cfg.Temperature != nil {
		// The v2 SDK has no temperature field; the API still reads it.
		reqOpts = append(reqOpts, option.WithJSONSet("temperature", *m.cfg.Temperature))
	}
	var resp *agentd.ModelResponse
	err = m.retry.Do(ctx, onDelta, func(ctx context.Context, emit func(string)) error {
		r, err := m.attempt(ctx, params, reqOpts, emit)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// attempt makes one streamed request and assembles its response.
func (m *Model) attempt(ctx context.Context, params sdk.MessageNewParams, reqOpts []option.RequestOption, emit func(string)) (*agentd.ModelResponse, error) {
	var httpResp *http.Response
	stream := m.svc.NewStreaming(ctx, params, append(reqOpts, option.WithResponseInto(&httpResp))...)
	defer stream.Close()

	budget := provider.Budget{Provider: Provider}
	var msg sdk.Message
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				if err := budget.Call(); err != nil {
					return nil, err
				}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if err := budget.Text(len(ev.Delta.Text)); err != nil {
					return nil, err
				}
			case "input_json_delta":
				if err := budget.Args(len(ev.Delta.PartialJSON)); err != nil {
					return nil, err
				}
			}
		case "message_stop":
			stopped = true
		}
		if err := msg.Accumulate(ev); err != nil {
			return nil, &provider.Failure{Message: "malformed stream: " + provider.Clip(err.Error()), Cause: err}
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			emit(ev.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, classify(ctx, err, httpResp)
	}
	if !stopped {
		return nil, provider.Incomplete()
	}
	resp := &agentd.ModelResponse{
		StopReason: string(msg.StopReason),
		Usage: agentd.Usage{
			InputTokens:  msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens,
			OutputTokens: msg.Usage.OutputTokens,
		},
	}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, agentd.ModelToolCall{ID: b.ID, Name: b.Name, Arguments: provider.ArgumentsObject(b.Input)})
		}
	}
	resp.Text = text.String()
	return resp, nil
}

// retryableTypes are the error types of an "error" event in a stream that
// another attempt may not meet.
var retryableTypes = map[string]bool{"overloaded_error": true, "api_error": true, "rate_limit_error": true, "timeout_error": true}

// classify turns an error of the SDK into a provider.Failure.
func classify(ctx context.Context, err error, httpResp *http.Response) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		msg := apiErr.Message
		if msg == "" {
			msg = provider.MessageFromBody([]byte(apiErr.RawJSON()))
		}
		typ := string(apiErr.Type())
		if apiErr.StatusCode < 400 {
			// An "error" event in a 200 stream: the server failed mid-stream.
			if typ != "" {
				msg = fmt.Sprintf("%s (%s)", msg, typ)
			}
			return &provider.Failure{Message: "error in the stream: " + provider.Clip(msg), Retryable: retryableTypes[typ], Cause: err}
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return provider.HTTPFailure(apiErr.StatusCode, h, provider.Clip(msg), err)
	case httpResp != nil && httpResp.StatusCode >= 400:
		return provider.HTTPFailure(httpResp.StatusCode, httpResp.Header, bodyMessage(httpResp), err)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return &provider.Failure{Message: fmt.Sprintf("malformed event in the stream: %v", err), Cause: err}
	}
	if strings.HasPrefix(err.Error(), "received error while streaming: ") {
		return &provider.Failure{Message: "error in the stream: " + provider.MessageFromBody([]byte(strings.TrimPrefix(err.Error(), "received error while streaming: "))), Retryable: true, Cause: err}
	}
	return provider.TransportFailure(err)
}

// bodyMessage reads the provider's message from an error response whose
// body the SDK left readable.
func bodyMessage(r *http.Response) string {
	if r.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	return provider.MessageFromBody(b)
}

// params maps a model request to the SDK's request parameters.
func (m *Model) params(req agentd.ModelRequest) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:     sdk.Model(m.cfg.Model),
		MaxTokens: m.cfg.MaxTokens,
		Messages:  messages(req.Messages),
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema, err := provider.Schema(t.Parameters)
		if err != nil {
			return p, agentd.Errorf(agentd.EINTERNAL, "anthropic: tool %q: %v", t.Name, err)
		}
		in := sdk.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, v := range schema {
			switch k {
			case "type":
			case "properties":
				in.Properties = v
			case "required":
				in.Required = asStrings(v)
			default:
				in.ExtraFields[k] = v
			}
		}
		tool := sdk.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	return p, nil
}

func asStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// messages maps the history to Messages API messages: a user message to a
// user text block; an assistant message to an assistant message with its
// text block (when not empty) and one tool_use block per call (id, name,
// the stored arguments as input, {} when they are not a JSON object); the
// tool messages that follow it to ONE user message of tool_result blocks
// in order, each with the text it reads as (provider.ResultText) and
// is_error for every status but completed. Consecutive messages of one
// role are merged into one (a user text after tool results joins their
// message, after them), and empty ones are left out, as the API requires
// alternating, non-empty turns.
func messages(history []agentd.ModelMessage) []sdk.MessageParam {
	var out []sdk.MessageParam
	add := func(user bool, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 {
			last := &out[n-1]
			if user && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			}
			if !user && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
		}
		if user {
			out = append(out, sdk.NewUserMessage(blocks...))
		} else {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		}
	}
	for _, msg := range history {
		switch msg.Role {
		case agentd.ModelRoleUser:
			if msg.Content != "" {
				add(true, sdk.NewTextBlock(msg.Content))
			}
		case agentd.ModelRoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if msg.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Content))
			}
			for _, c := range msg.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(provider.ToolCallID(c.ID, maxToolUseID), provider.ArgumentsObject(c.Arguments), c.Name))
			}
			add(false, blocks...)
		case agentd.ModelRoleTool:
			r := sdk.ToolResultBlockParam{
				ToolUseID: provider.ToolCallID(msg.ToolCallID, maxToolUseID),
				Content:   []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: provider.ResultText(msg)}}},
			}
			if provider.IsError(msg) {
				r.IsError = sdk.Bool(true)
			}
			add(true, sdk.ContentBlockParamUnion{OfToolResult: &r})
		}
	}
	return out
}
