// Package project loads a project folder (SPEC §1.1): agent.json (the
// default agent), the optional agentd.json (server settings), the custom
// tools under tools/ and the optional mcp.json (package mcp reads it). Loading checks everything it reads; every error names
// the file and the field, and syntax errors the line and column
// (docs/project.md). Connections (connections/<name>/) load with package
// connections. The tool registry (tools/registry), not this package,
// checks that no tool name is defined twice across sources and that
// agent.json's "tools" name tools the model may see.
package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/hooks"
	"github.com/agentd-dev/agentd/internal/origin"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/agentd-dev/agentd/mcp"
	"github.com/agentd-dev/agentd/tools"
	"github.com/agentd-dev/agentd/webhook"
)

// Model providers an agent may name.
const (
	ProviderScript    = "script"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Project is a loaded project folder.
type Project struct {
	Dir    string // absolute
	Agent  Agent
	Server Server
	Tools  map[string]*tools.Tool // every registered command tool, by name (tools.NewSource)
	// Connections are the project's connections (connections/<name>/),
	// sorted by name; connections.Sources gives their tools.
	Connections []*connections.Connection
	// Hooks are the project's hooks (hooks/<name>/hook.json), in name
	// order: the order they run in.
	Hooks []*hooks.Hook
	// MCP is mcp.json (SPEC §4.2): the MCP servers whose tools the agent
	// gets; nil when the project has none. package server starts them.
	MCP      *mcp.Config
	Warnings []string
}

// Agent is the default agent of agent.json.
type Agent struct {
	Name         string
	SystemPrompt string
	// Model is the raw "model" object; its provider reads the rest.
	Model    json.RawMessage
	Provider string // model.provider: script, openai or anthropic
	// Tools names the tools the model sees, as agent.json lists them; nil
	// means every llm_callable tool of the project. The tool registry
	// (tools/registry) checks the names.
	Tools           []string
	ApprovalTimeout time.Duration
	// Approval is agent.json "approval" (SPEC §11.1): the rule of every
	// tool whose tool.json, mcp.json or policy.json endpoint has none; nil:
	// agentd.DefaultApprovalRule.
	Approval *agentd.ApprovalRule
	MaxTurns int
	// Workspace is the absolute folder of the file tools (agent.json
	// "workspace", relative to the project folder); "" means none.
	Workspace string
	// Subagents are agent.json's "subagents", in the order written.
	Subagents []Subagent
	// Inputs is agent.json "inputs" (SPEC §12.3): the ask_user tool and
	// the agent's input rule; nil when absent.
	Inputs *agentd.InputRule
}

// Server holds the settings of agentd.json.
type Server struct {
	APIKeys []agentd.APIKey
	// Webhooks are the endpoints of the "webhooks" array, with their
	// secrets read from the environment (webhook.ParseConfig).
	Webhooks     []webhook.Endpoint
	MaxBodyBytes int64 // limits.max_body_bytes
	// MaxStreamsPerKey is limits.max_streams_per_key: the streams one API
	// key may hold open at once.
	MaxStreamsPerKey int
	// CORSOrigins are the web origins, besides the server's own, whose
	// pages may call the API (cors_origins), normalized by origin.Normalize.
	CORSOrigins []string
	// PublicURL is the server's base URL as its users reach it
	// (public_url: an http or https URL without query, fragment or
	// trailing slash); decision links start with it (SPEC §11.4).
	PublicURL string
}

var (
	namePattern   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	idPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Load reads and checks the project in dir. A project needs agent.json;
// agentd.json, tools/, connections/ and mcp.json are optional. getenv
// reads the connections' secrets and mcp.json's headers_env (nil means
// os.Getenv).
func Load(dir string, getenv func(string) string) (*Project, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("project folder %s: %w", dir, err)
	}
	if info, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("project folder %s: %w", dir, err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("project folder %s: not a directory", dir)
	}
	p := &Project{Dir: abs}

	loaded, warnings, err := tools.LoadDir(filepath.Join(abs, "tools"))
	if err != nil {
		return nil, err
	}
	p.Tools = loaded
	p.Warnings = append(p.Warnings, warnings...)
	if p.Connections, err = connections.Load(abs, getenv); err != nil {
		return nil, err
	}
	for _, c := range p.Connections {
		p.Warnings = append(p.Warnings, c.Warnings()...)
	}
	if p.Hooks, err = hooks.LoadDir(filepath.Join(abs, "hooks")); err != nil {
		return nil, err
	}
	if p.MCP, err = mcp.Load(abs, getenv); err != nil {
		return nil, err
	}

	data, err := os.ReadFile(filepath.Join(abs, "agent.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent.json: not found in %s (a project needs one)", dir)
	} else if err != nil {
		return nil, fmt.Errorf("agent.json: %w", err)
	}
	if p.Agent, err = parseAgent(data, abs); err != nil {
		return nil, fmt.Errorf("agent.json: %w", err)
	}

	p.Server = defaultServer()
	data, err = os.ReadFile(filepath.Join(abs, "agentd.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("agentd.json: %w", err)
	default:
		if p.Server, err = parseServer(data, getenv); err != nil {
			return nil, fmt.Errorf("agentd.json: %w", err)
		}
	}
	return p, nil
}

// workspace resolves agent.json's "workspace": a folder, relative to the
// project folder or absolute, that must exist.
func workspace(projectDir string, raw json.RawMessage) (string, error) {
	if strictjson.IsNull(raw) {
		return "", nil
	}
	var dir string
	if err := json.Unmarshal(raw, &dir); err != nil || dir == "" {
		return "", strictjson.FieldErr("workspace", "must be a folder name, relative to the project folder or absolute")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(projectDir, dir)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return "", strictjson.FieldErr("workspace", "%v", err)
	} else if !info.IsDir() {
		return "", strictjson.FieldErr("workspace", "%s is not a folder", dir)
	}
	return dir, nil
}

type agentFile struct {
	Name            *string         `json:"name"`
	SystemPrompt    string          `json:"system_prompt"`
	Model           json.RawMessage `json:"model"`
	Tools           []string        `json:"tools"`
	ApprovalTimeout *string         `json:"approval_timeout"`
	Approval        json.RawMessage `json:"approval"`
	MaxTurns        *int            `json:"max_turns"`
	Workspace       json.RawMessage `json:"workspace"`
	Subagents       json.RawMessage `json:"subagents"`
	Inputs          json.RawMessage `json:"inputs"`
}

// parseAgent parses agent.json of the project in dir.
func parseAgent(data []byte, dir string) (Agent, error) {
	var f agentFile
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return Agent{}, err
	}
	a := Agent{
		SystemPrompt:    f.SystemPrompt,
		ApprovalTimeout: agentd.DefaultApprovalTimeout,
		MaxTurns:        agentd.DefaultMaxTurns,
	}

	switch {
	case f.Name == nil:
		return Agent{}, strictjson.FieldErr("name", "required")
	case !namePattern.MatchString(*f.Name):
		return Agent{}, strictjson.FieldErr("name", "must be 1 to 64 letters, digits, '_' or '-', got %q", *f.Name)
	}
	a.Name = *f.Name

	if strictjson.IsNull(f.Model) {
		return Agent{}, strictjson.FieldErr("model", `required, e.g. {"provider": "script", "script": "script.json"}`)
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(f.Model, &model); err != nil {
		return Agent{}, strictjson.FieldErr("model", "must be an object")
	}
	var provider string
	if raw, ok := model["provider"]; !ok {
		return Agent{}, strictjson.FieldErr("model.provider", "required: one of %s, %s, %s", ProviderScript, ProviderOpenAI, ProviderAnthropic)
	} else if err := json.Unmarshal(raw, &provider); err != nil {
		return Agent{}, strictjson.FieldErr("model.provider", "must be a string")
	}
	switch provider {
	case ProviderScript, ProviderOpenAI, ProviderAnthropic:
	default:
		return Agent{}, strictjson.FieldErr("model.provider", "must be one of %s, %s, %s, got %q", ProviderScript, ProviderOpenAI, ProviderAnthropic, provider)
	}
	a.Model, a.Provider = compact(f.Model), provider

	// The names are checked against every tool source by the tool
	// registry (tools/registry), not here.
	a.Tools = f.Tools

	if f.ApprovalTimeout != nil {
		d, err := time.ParseDuration(*f.ApprovalTimeout)
		if err != nil {
			return Agent{}, strictjson.FieldErr("approval_timeout", "%v", err)
		}
		if d <= 0 {
			return Agent{}, strictjson.FieldErr("approval_timeout", "must be positive, got %q", *f.ApprovalTimeout)
		}
		a.ApprovalTimeout = d
	}

	var err error
	if a.Approval, err = confirm.ParseApproval(f.Approval, "approval"); err != nil {
		return Agent{}, err
	}
	if a.Approval != nil {
		if err := a.Approval.CheckTimeout(a.ApprovalTimeout); err != nil {
			return Agent{}, strictjson.FieldErr("approval", "%v", err)
		}
	}
	if f.MaxTurns != nil {
		if *f.MaxTurns <= 0 {
			return Agent{}, strictjson.FieldErr("max_turns", "must be at least 1, got %d", *f.MaxTurns)
		}
		a.MaxTurns = *f.MaxTurns
	}
	if a.Workspace, err = workspace(dir, f.Workspace); err != nil {
		return Agent{}, err
	}
	if a.Subagents, err = parseSubagents(f.Subagents); err != nil {
		return Agent{}, err
	}
	if a.Inputs, err = parseInputs(f.Inputs); err != nil {
		return Agent{}, err
	}
	return a, nil
}

// Subagent is one entry of agent.json's "subagents" (SPEC §4.5).
type Subagent struct {
	Name         string
	Description  string
	SystemPrompt string
	// Model is the raw "model" object; nil means the parent's model.
	Model json.RawMessage
	// Tools names the tools its model sees; nil means every llm_callable
	// tool but the task tool. The tool registry checks the names.
	Tools    []string
	MaxTurns int
}

// DefaultSubagentMaxTurns is a subagent's max_turns when agent.json gives none.
const DefaultSubagentMaxTurns = 6

type subagentFile struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	SystemPrompt string          `json:"system_prompt"`
	Model        json.RawMessage `json:"model"`
	Tools        []string        `json:"tools"`
	MaxTurns     *int            `json:"max_turns"`
}

func parseSubagents(raw json.RawMessage) ([]Subagent, error) {
	if strictjson.IsNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, strictjson.FieldErr("subagents", "must be an array of objects")
	}
	var out []Subagent
	seen := map[string]bool{}
	for i, item := range list {
		prefix := fmt.Sprintf("subagents[%d]", i)
		var f subagentFile
		if err := strictjson.DecodeStrict(item, &f, prefix); err != nil {
			return nil, err
		}
		switch {
		case !namePattern.MatchString(f.Name):
			return nil, strictjson.FieldErr(prefix+".name", "must be 1 to 64 letters, digits, '_' or '-', got %q", f.Name)
		case seen[f.Name]:
			return nil, strictjson.FieldErr(prefix+".name", "%q is used by another subagent", f.Name)
		case f.MaxTurns != nil && *f.MaxTurns <= 0:
			return nil, strictjson.FieldErr(prefix+".max_turns", "must be at least 1, got %d", *f.MaxTurns)
		}
		seen[f.Name] = true
		s := Subagent{Name: f.Name, Description: f.Description, SystemPrompt: f.SystemPrompt, Model: compact(f.Model),
			Tools: f.Tools, MaxTurns: DefaultSubagentMaxTurns}
		if f.MaxTurns != nil {
			s.MaxTurns = *f.MaxTurns
		}
		out = append(out, s)
	}
	return out, nil
}

type serverFile struct {
	APIKeys     []json.RawMessage `json:"api_keys"`
	Webhooks    json.RawMessage   `json:"webhooks"`
	Limits      json.RawMessage   `json:"limits"`
	CORSOrigins []string          `json:"cors_origins"`
	PublicURL   string            `json:"public_url"`
}

type apiKeyFile struct {
	ID        string   `json:"id"`
	SHA256    string   `json:"sha256"`
	TenantID  string   `json:"tenant_id"`
	ProjectID string   `json:"project_id"`
	Role      string   `json:"role"`
	Groups    []string `json:"groups"`
}

type limitsFile struct {
	MaxBodyBytes     *int64 `json:"max_body_bytes"`
	MaxStreamsPerKey *int   `json:"max_streams_per_key"`
}

// defaultServer is the settings of a project without agentd.json.
func defaultServer() Server {
	return Server{MaxBodyBytes: agentd.DefaultMaxBodyBytes, MaxStreamsPerKey: agentd.DefaultMaxStreamsPerKey}
}

func parseServer(data []byte, getenv func(string) string) (Server, error) {
	var f serverFile
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return Server{}, err
	}
	s := defaultServer()

	ids, digests := map[string]bool{}, map[string]string{}
	for i, raw := range f.APIKeys {
		prefix := fmt.Sprintf("api_keys[%d]", i)
		var k apiKeyFile
		if err := strictjson.DecodeStrict(raw, &k, prefix); err != nil {
			return Server{}, err
		}
		for _, c := range []struct{ field, value string }{{"id", k.ID}, {"tenant_id", k.TenantID}, {"project_id", k.ProjectID}} {
			if c.value == "" {
				return Server{}, strictjson.FieldErr(prefix+"."+c.field, "required")
			}
			if !idPattern.MatchString(c.value) {
				return Server{}, strictjson.FieldErr(prefix+"."+c.field, "must be 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit, got %q", c.value)
			}
		}
		if slices.Contains(agentd.ReservedKeyIDs, k.ID) {
			return Server{}, strictjson.FieldErr(prefix+".id", "%q is a principal id the server uses itself (%s): choose another",
				k.ID, strings.Join(agentd.ReservedKeyIDs, ", "))
		}
		if ids[k.ID] {
			return Server{}, strictjson.FieldErr(prefix+".id", "%q is used by another key", k.ID)
		}
		ids[k.ID] = true
		if !sha256Pattern.MatchString(k.SHA256) {
			return Server{}, strictjson.FieldErr(prefix+".sha256", `must be 64 lowercase hex characters, the SHA-256 of the key: printf %%s "$KEY" | sha256sum`)
		}
		if other, ok := digests[k.SHA256]; ok {
			return Server{}, strictjson.FieldErr(prefix+".sha256", "the same key as %q", other)
		}
		digests[k.SHA256] = k.ID
		switch k.Role {
		case agentd.RoleClient, agentd.RoleDelegate, agentd.RoleOperator, agentd.RoleAdmin:
		case "":
			return Server{}, strictjson.FieldErr(prefix+".role", "required: one of client, delegate, operator, admin")
		default:
			return Server{}, strictjson.FieldErr(prefix+".role", "must be one of client, delegate, operator, admin, got %q", k.Role)
		}
		for j, g := range k.Groups {
			if !idPattern.MatchString(g) {
				return Server{}, strictjson.FieldErr(fmt.Sprintf("%s.groups[%d]", prefix, j), "must be 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit, got %q", g)
			}
		}
		s.APIKeys = append(s.APIKeys, agentd.APIKey(k))
	}

	cors, err := parseCORSOrigins(f.CORSOrigins)
	if err != nil {
		return Server{}, err
	}
	s.CORSOrigins = cors
	if !strictjson.IsNull(f.Webhooks) {
		if t := bytes.TrimSpace(f.Webhooks); t[0] != '[' {
			return Server{}, strictjson.FieldErr("webhooks", "must be an array")
		}
		if s.Webhooks, err = webhook.ParseConfig(f.Webhooks, getenv); err != nil {
			return Server{}, err
		}
	}
	if s.PublicURL, err = parsePublicURL(f.PublicURL); err != nil {
		return Server{}, err
	}
	if err := checkLinksKeys(s); err != nil {
		return Server{}, err
	}

	if err := parseLimits(f.Limits, &s); err != nil {
		return Server{}, err
	}
	return s, nil
}

// parseLimits sets s's limits from agentd.json's "limits" (null or absent:
// the defaults stay).
func parseLimits(raw json.RawMessage, s *Server) error {
	if strictjson.IsNull(raw) {
		return nil
	}
	var l limitsFile
	if err := strictjson.DecodeStrict(raw, &l, "limits"); err != nil {
		return err
	}
	if l.MaxBodyBytes != nil {
		if *l.MaxBodyBytes <= 0 {
			return strictjson.FieldErr("limits.max_body_bytes", "must be at least 1, got %d", *l.MaxBodyBytes)
		}
		s.MaxBodyBytes = *l.MaxBodyBytes
	}
	if l.MaxStreamsPerKey != nil {
		if *l.MaxStreamsPerKey <= 0 {
			return strictjson.FieldErr("limits.max_streams_per_key", "must be at least 1, got %d", *l.MaxStreamsPerKey)
		}
		s.MaxStreamsPerKey = *l.MaxStreamsPerKey
	}
	return nil
}

// parseCORSOrigins validates and normalizes agentd.json's cors_origins.
func parseCORSOrigins(list []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for i, o := range list {
		n, err := origin.Normalize(o)
		if err != nil {
			return nil, strictjson.FieldErr(fmt.Sprintf("cors_origins[%d]", i), "%v", err)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// compact returns raw compacted, or nil for absent or null.
func compact(raw json.RawMessage) json.RawMessage {
	if strictjson.IsNull(raw) {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// parsePublicURL validates agentd.json public_url ("" when absent) and
// drops a trailing slash.
func parsePublicURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", strictjson.FieldErr("public_url", "must be an http or https URL with a host and no user, query or fragment, got %q", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// checkLinksKeys checks each webhook endpoint's links_key_id names a
// configured API key ("dev" without keys, the development server's), and
// that public_url is set for them: a webhook's links have no request to
// take a host from.
func checkLinksKeys(s Server) error {
	for i, e := range s.Webhooks {
		if !e.IncludeDecisionLinks {
			continue
		}
		known := len(s.APIKeys) == 0 && e.LinksKeyID == agentd.DevKeyID
		for _, k := range s.APIKeys {
			known = known || k.ID == e.LinksKeyID
		}
		if !known {
			return strictjson.FieldErr(fmt.Sprintf("webhooks[%d].links_key_id", i), "%q is not the id of a key of api_keys", e.LinksKeyID)
		}
		if s.PublicURL == "" {
			return strictjson.FieldErr(fmt.Sprintf("webhooks[%d].include_decision_links", i), "needs public_url in agentd.json: the links' base URL")
		}
	}
	return nil
}
