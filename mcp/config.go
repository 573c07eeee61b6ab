package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/strictjson"
)

// File is the name of the MCP configuration at the project root.
const File = "mcp.json"

// maxTimeout bounds a server's timeout_ms.
const maxTimeout = time.Hour

var (
	// idPattern is an MCP server id: it is the server_id of its tools and
	// the prefix of their names, so it may not hold "__" nor end in "_"
	// (then <id>__<tool> names one server's tool: "a___x" is a's "_x",
	// never a_'s "x"), checked with validID.
	idPattern      = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerPattern  = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Config is a project's mcp.json (SPEC §4.2): its servers and how their
// tools are gated.
type Config struct {
	Servers []ServerConfig
	// Tiers are mcp.json "tiers": a tier ("auto" or "confirm") by tool
	// name (<id>__<tool>). They win over every other rule.
	Tiers map[string]agentd.Tier
	// Trust are the ids of mcp.json "trust_annotations": the servers whose
	// readOnlyHint annotations may make a tool auto.
	Trust map[string]bool
	// Approval are mcp.json "approval": an approval rule (SPEC §11.1) by
	// tool name (<id>__<tool>).
	Approval map[string]*agentd.ApprovalRule
}

// ServerConfig is one entry of mcp.json "servers": a stdio server
// (Command) or a streamable HTTP server (URL).
type ServerConfig struct {
	ID string
	// Command is the program and its arguments of a stdio server, started
	// in the project folder (Dir).
	Command []string
	Dir     string
	// Env names the environment variables passed on to a stdio server
	// (besides PATH, HOME and TMPDIR).
	Env []string
	// URL is a streamable HTTP server's endpoint.
	URL string
	// Headers are sent with every request to an HTTP server, their values
	// read from the environment when mcp.json is loaded (headers_env).
	Headers map[string]string
	// Timeout bounds one tool call (timeout_ms; default
	// agentd.DefaultMCPCallTimeout).
	Timeout time.Duration
	// TenantIDs are the tenants that see the server's tools (tenant_ids);
	// nil: every tenant.
	TenantIDs []string
}

type fileConfig struct {
	Servers          []json.RawMessage          `json:"servers"`
	Tiers            map[string]string          `json:"tiers"`
	TrustAnnotations []string                   `json:"trust_annotations"`
	Approval         map[string]json.RawMessage `json:"approval"`
}

type fileServer struct {
	ID         string            `json:"id"`
	Command    []string          `json:"command"`
	Env        []string          `json:"env"`
	URL        string            `json:"url"`
	HeadersEnv map[string]string `json:"headers_env"`
	TimeoutMS  *int64            `json:"timeout_ms"`
	TenantIDs  json.RawMessage   `json:"tenant_ids"`
}

// Load reads mcp.json in projectDir; no file is no servers (nil, nil).
// getenv reads headers_env (nil means os.Getenv). Errors name the file and
// the field: `mcp.json: field "servers[1].url": ...`.
func Load(projectDir string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(projectDir, File))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	cfg, err := Parse(data, projectDir, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return cfg, nil
}

// Parse checks the content of an mcp.json; stdio servers run in dir.
func Parse(data []byte, dir string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var f fileConfig
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return nil, err
	}
	cfg := &Config{Tiers: map[string]agentd.Tier{}, Trust: map[string]bool{}}
	ids := map[string]bool{}
	for i, raw := range f.Servers {
		field := fmt.Sprintf("servers[%d]", i)
		var s fileServer
		if err := strictjson.DecodeStrict(raw, &s, field); err != nil {
			return nil, err
		}
		sc, err := parseServer(s, field, dir, getenv)
		if err != nil {
			return nil, err
		}
		if ids[sc.ID] {
			return nil, strictjson.FieldErr(field+".id", "server id %q is used twice", sc.ID)
		}
		ids[sc.ID] = true
		cfg.Servers = append(cfg.Servers, sc)
	}
	for i, id := range f.TrustAnnotations {
		if !ids[id] {
			return nil, strictjson.FieldErr(fmt.Sprintf("trust_annotations[%d]", i), "no server has id %q", id)
		}
		cfg.Trust[id] = true
	}
	names := make([]string, 0, len(f.Tiers))
	for name := range f.Tiers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		field := "tiers." + name
		id, tool, ok := strings.Cut(name, "__")
		if !ok || tool == "" || !ids[id] {
			return nil, strictjson.FieldErr(field, "must name a tool as <server id>__<tool> of a server of \"servers\"")
		}
		switch t := agentd.Tier(f.Tiers[name]); t {
		case agentd.TierAuto, agentd.TierConfirm:
			cfg.Tiers[name] = t
		default:
			return nil, strictjson.FieldErr(field, "must be \"auto\" or \"confirm\", got %q", f.Tiers[name])
		}
	}
	return cfg, parseApprovals(cfg, f.Approval, ids)
}

// parseApprovals sets cfg.Approval from mcp.json "approval".
func parseApprovals(cfg *Config, raw map[string]json.RawMessage, ids map[string]bool) error {
	cfg.Approval = map[string]*agentd.ApprovalRule{}
	for name, r := range raw {
		field := "approval." + name
		if id, tool, ok := strings.Cut(name, "__"); !ok || tool == "" || !ids[id] {
			return strictjson.FieldErr(field, "must name a tool as <server id>__<tool> of a server of \"servers\"")
		}
		rule, err := confirm.ParseApproval(r, field)
		if err != nil {
			return err
		}
		cfg.Approval[name] = rule
	}
	return nil
}

func parseServer(s fileServer, field, dir string, getenv func(string) string) (ServerConfig, error) {
	sc := ServerConfig{ID: s.ID, Dir: dir, Timeout: agentd.DefaultMCPCallTimeout}
	if !validID(s.ID) {
		return sc, strictjson.FieldErr(field+".id", "must match %s without \"__\" and not end in '_' (lower case letters, digits, '_' or '-', starting with a letter, at most 40), got %q", idPattern, s.ID)
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return sc, strictjson.FieldErr(field, "has both \"command\" (a stdio server) and \"url\" (an HTTP server): give one")
	case len(s.Command) > 0:
		if s.Command[0] == "" {
			return sc, strictjson.FieldErr(field+".command[0]", "must name a program")
		}
		if len(s.HeadersEnv) > 0 {
			return sc, strictjson.FieldErr(field+".headers_env", "is for HTTP servers (\"url\"); a stdio server gets \"env\"")
		}
		for j, name := range s.Env {
			if !envNamePattern.MatchString(name) {
				return sc, strictjson.FieldErr(fmt.Sprintf("%s.env[%d]", field, j), "must be an environment variable name, got %q", name)
			}
		}
		sc.Command, sc.Env = s.Command, s.Env
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return sc, strictjson.FieldErr(field+".url", "must be an http or https URL, got %q", s.URL)
		}
		if len(s.Env) > 0 {
			return sc, strictjson.FieldErr(field+".env", "is for stdio servers (\"command\"); an HTTP server gets \"headers_env\"")
		}
		sc.URL, sc.Headers = s.URL, map[string]string{}
		for h, name := range s.HeadersEnv {
			hf := field + ".headers_env." + h
			if !headerPattern.MatchString(h) {
				return sc, strictjson.FieldErr(hf, "must be an HTTP header name")
			}
			if !envNamePattern.MatchString(name) {
				return sc, strictjson.FieldErr(hf, "must be an environment variable name, got %q", name)
			}
			v := getenv(name)
			if v == "" {
				return sc, strictjson.FieldErr(hf, "environment variable %s is not set", name)
			}
			sc.Headers[h] = v
		}
	default:
		return sc, strictjson.FieldErr(field, "needs \"command\" (a stdio server) or \"url\" (a streamable HTTP server)")
	}
	if s.TimeoutMS != nil {
		ms := *s.TimeoutMS
		if ms < 1 || ms > maxTimeout.Milliseconds() {
			return sc, strictjson.FieldErr(field+".timeout_ms", "must be between 1 and %d, got %d", maxTimeout.Milliseconds(), ms)
		}
		sc.Timeout = time.Duration(ms) * time.Millisecond
	}
	if !strictjson.IsNull(s.TenantIDs) {
		ids, err := parseTenantIDs(s.TenantIDs, field+".tenant_ids")
		if err != nil {
			return sc, err
		}
		sc.TenantIDs = ids
	}
	return sc, nil
}

// validID reports whether id may be a server's id (idPattern).
func validID(id string) bool {
	return idPattern.MatchString(id) && !strings.Contains(id, "__") && !strings.HasSuffix(id, "_")
}

// parseTenantIDs checks a server's tenant_ids: a non-empty array of
// distinct, non-empty tenant ids.
func parseTenantIDs(raw json.RawMessage, field string) ([]string, error) {
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, strictjson.FieldErr(field, `must be an array of tenant ids, e.g. ["acme"]`)
	}
	if len(ids) == 0 {
		return nil, strictjson.FieldErr(field, "lists no tenant: omit it to let every tenant see the server's tools")
	}
	seen := map[string]bool{}
	for i, id := range ids {
		switch {
		case id == "":
			return nil, strictjson.FieldErr(fmt.Sprintf("%s[%d]", field, i), "is empty")
		case seen[id]:
			return nil, strictjson.FieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", id)
		}
		seen[id] = true
	}
	return ids, nil
}
