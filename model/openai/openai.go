// Package openai is the model provider for OpenAI's Chat Completions API and
// the servers that speak it (Ollama, vLLM, llama.cpp, LM Studio), built on
// the official SDK github.com/openai/openai-go/v3. Each model step is one
// streamed request (stream_options.include_usage): text deltas reach the
// loop as they arrive, parallel tool calls are assembled from their
// fragments by index, usage and finish_reason come back with the step.
// Failed attempts are retried by model/internal/provider, not by the SDK
// (docs/models.md).
//
//	"model": {"provider": "openai", "model": "gpt-4o-mini"}
//	"model": {"provider": "openai", "model": "llama3.1", "base_url": "http://localhost:11434/v1"}
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/model/internal/provider"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// Provider is the value of "provider" this package reads.
const Provider = "openai"

// DefaultAPIKeyEnv holds the API key unless "api_key_env" names another variable.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// DefaultBaseURL is the endpoint used without "base_url".
const DefaultBaseURL = "https://api.openai.com/v1/"

// maxToolCallID is the longest tool call id sent: some OpenAI-compatible
// servers reject longer ones; agentd's own ids (41 bytes) are mapped.
const maxToolCallID = 40

// Model is an OpenAI-compatible chat model. It is safe for concurrent use.
type Model struct {
	cfg    provider.Config
	svc    sdk.ChatCompletionService
	retry  provider.Retry
	custom bool // base_url set: an OpenAI-compatible server, not OpenAI
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
//	{"provider": "openai", "model": NAME, "base_url"?: URL,
//	 "api_key_env"?: "OPENAI_API_KEY", "max_tokens"?: N, "temperature"?: 0..2,
//	 "max_attempts"?: 1..10 (4), "timeout"?: DURATION (5m, one attempt)}
//
// The key is read through getenv (os.Getenv when nil) from the variable
// api_key_env names; without base_url a missing key is an error naming
// that variable, with base_url (a local server) the request goes without
// one. Errors name the field ("model.max_tokens") and never contain the
// key. The SDK reads no OPENAI_* variable of its own.
func New(raw json.RawMessage, getenv func(string) string, opts ...Option) (*Model, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := provider.Load(raw, getenv, provider.Defaults{Provider: Provider, APIKeyEnv: DefaultAPIKeyEnv, MaxTemperature: 2})
	if err != nil {
		return nil, err
	}
	o := provider.Apply(opts)
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	// The service is built from explicit options only: sdk.NewClient would
	// also read OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_ORG_ID and more.
	reqOpts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(o.Client),
		option.WithMaxRetries(0), // provider.Retry retries
	}
	if cfg.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(cfg.APIKey))
	}
	return &Model{
		cfg:    *cfg,
		svc:    sdk.NewChatCompletionService(reqOpts...),
		custom: cfg.BaseURL != "",
		retry: provider.Retry{
			Provider: Provider, MaxAttempts: cfg.MaxAttempts, Timeout: cfg.Timeout,
			Sleep: o.Sleep, Secrets: []string{cfg.APIKey},
		},
	}, nil
}

// Generate streams one model step. Text deltas go to onDelta in order as
// they arrive; the response carries their concatenation, every tool call
// of the step (assembled from fragments by index, in index order, with the
// provider's id, name and exact argument text; "{}" for empty arguments; a
// fragment with a new id at an index already used starts a new call),
// usage (prompt and completion tokens) and finish_reason as StopReason.
// Failed attempts are retried as provider.Retry.Do promises; a cancelled
// ModelName is the model id agent.json names (gen_ai.request.model).
func (m *Model) ModelName() string { return m.cfg.Model }

// ctx stops the stream and returns ctx.Err().
func (m *Model) Generate(ctx context.Context, req agentd.ModelRequest, onDelta func(delta string)) (*agentd.ModelResponse, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	var resp *agentd.ModelResponse
	err = m.retry.Do(ctx, onDelta, func(ctx context.Context, emit func(string)) error {
		r, err := m.attempt(ctx, params, emit)
		resp = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// call is a tool call being assembled.
type call struct {
	index    int64
	id, name string
	args     []byte
}

// attempt makes one streamed request and assembles its response.
func (m *Model) attempt(ctx context.Context, params sdk.ChatCompletionNewParams, emit func(string)) (*agentd.ModelResponse, error) {
	var httpResp *http.Response
	stream := m.svc.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
	defer stream.Close()

	budget := provider.Budget{Provider: Provider}
	resp := &agentd.ModelResponse{}
	var text []byte
	var calls []*call
	latest := map[int64]int{} // index → position in calls of the latest call with it
	finished := false
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			resp.Usage = agentd.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
		}
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue // n is 1; ignore any other choice
			}
			d := choice.Delta
			for _, s := range []string{d.Content, d.Refusal} {
				if s == "" {
					continue
				}
				if err := budget.Text(len(s)); err != nil {
					return nil, err
				}
				text = append(text, s...)
				emit(s)
			}
			for _, tc := range d.ToolCalls {
				pos, ok := latest[tc.Index]
				// A new id at a known index is a new call: some servers
				// send whole calls without distinct indexes.
				if !ok || (tc.ID != "" && calls[pos].id != "" && tc.ID != calls[pos].id) {
					if err := budget.Call(); err != nil {
						return nil, err
					}
					calls = append(calls, &call{index: tc.Index})
					pos = len(calls) - 1
					latest[tc.Index] = pos
				}
				c := calls[pos]
				if c.id == "" {
					c.id = tc.ID
				}
				// The name comes whole in the first fragment; a server that
				// repeats it in later fragments must not double it.
				if n := tc.Function.Name; n != "" && n != c.name {
					c.name += n
				}
				if err := budget.Args(len(tc.Function.Arguments)); err != nil {
					return nil, err
				}
				c.args = append(c.args, tc.Function.Arguments...)
			}
			if choice.FinishReason != "" {
				resp.StopReason = choice.FinishReason
				finished = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, classify(ctx, err, httpResp)
	}
	if !finished {
		return nil, provider.Incomplete()
	}
	resp.Text = string(text)
	sort.SliceStable(calls, func(a, b int) bool { return calls[a].index < calls[b].index })
	for _, c := range calls {
		args := json.RawMessage(c.args)
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		resp.ToolCalls = append(resp.ToolCalls, agentd.ModelToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	return resp, nil
}

// classify turns an error of the SDK into a provider.Failure.
func classify(ctx context.Context, err error, httpResp *http.Response) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var apiErr *sdk.Error
	var streamErr *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		msg := apiErr.Message
		if msg == "" && apiErr.Response != nil {
			msg = bodyMessage(apiErr.Response)
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return provider.HTTPFailure(apiErr.StatusCode, h, provider.Clip(msg), err)
	case errors.As(err, &streamErr):
		// {"error": {...}} in place of a chunk: the server failed mid-stream.
		return &provider.Failure{Message: "error in the stream: " + provider.MessageFromBody(streamErr.Event.Data), Retryable: true, Cause: err}
	case httpResp != nil && httpResp.StatusCode >= 400:
		// An error body the SDK could not decode (a string "error", HTML
		// from a proxy): the status and the body still say what happened.
		return provider.HTTPFailure(httpResp.StatusCode, httpResp.Header, bodyMessage(httpResp), err)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return &provider.Failure{Message: fmt.Sprintf("malformed chunk in the stream: %v", err), Retryable: false, Cause: err}
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
func (m *Model) params(req agentd.ModelRequest) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.cfg.Model),
		Messages:      messages(req),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if m.cfg.MaxTokens > 0 {
		// OpenAI's newer models take only max_completion_tokens; the
		// compatible servers know max_tokens.
		if m.custom {
			p.MaxTokens = sdk.Int(m.cfg.MaxTokens)
		} else {
			p.MaxCompletionTokens = sdk.Int(m.cfg.MaxTokens)
		}
	}
	if m.cfg.Temperature != nil {
		p.Temperature = sdk.Float(*m.cfg.Temperature)
	}
	for _, t := range req.Tools {
		schema, err := provider.Schema(t.Parameters)
		if err != nil {
			return p, agentd.Errorf(agentd.EINTERNAL, "openai: tool %q: %v", t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return p, nil
}

// messages maps the system prompt and the history to Chat Completions
// messages: the system prompt (if any) as a system message; a user message
// as a user message; an assistant message as an assistant message with its
// text (omitted when empty) and its tool calls (id, function name, the
// stored arguments as the arguments string, "{}" when empty); a tool
// message as a tool message for its call with the text it reads as
// (provider.ResultText). Tool call ids longer than 40 bytes, like agentd's,
// are mapped to a stable 40-byte form, the same in a call and its result.
func messages(req agentd.ModelRequest) []sdk.ChatCompletionMessageParamUnion {
	var out []sdk.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, sdk.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case agentd.ModelRoleUser:
			out = append(out, sdk.UserMessage(msg.Content))
		case agentd.ModelRoleAssistant:
			a := sdk.ChatCompletionAssistantMessageParam{}
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = sdk.String(msg.Content)
			}
			for _, c := range msg.ToolCalls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       provider.ToolCallID(c.ID, maxToolCallID),
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
					},
				})
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case agentd.ModelRoleTool:
			out = append(out, sdk.ToolMessage(provider.ResultText(msg), provider.ToolCallID(msg.ToolCallID, maxToolCallID)))
		}
	}
	return out
}
