package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/agentd-dev/agentd/schedule"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// toolFile is tool.json as written. Nested objects and values with several
// shapes stay raw and are decoded field by field.
type toolFile struct {
	Name        *string         `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Exposure    json.RawMessage `json:"exposure"`
	LLMCallable *bool           `json:"llm_callable"`
	Confirm     json.RawMessage `json:"confirm"`
	Command     []string        `json:"command"`
	Env         []string        `json:"env"`
	TimeoutMS   *int64          `json:"timeout_ms"`
	Idempotent  bool            `json:"idempotent"`
	Uses        json.RawMessage `json:"uses"`
	Approval    json.RawMessage `json:"approval"`
	Triggers    json.RawMessage `json:"triggers"`
	Execution   *string         `json:"execution"`
}

// triggersFile is tool.json's "triggers": what may start the tool outside
// the agent loop (docs/runtime.md).
type triggersFile struct {
	Invoke    bool    `json:"invoke"`
	Schedule  *string `json:"schedule"`
	TenantID  *string `json:"tenant_id"`
	ProjectID *string `json:"project_id"`
}

type usesFile struct {
	Tools []string `json:"tools"`
}

type exposureFile struct {
	Kind   *string `json:"kind"`
	Prompt string  `json:"prompt"`
}

// LoadDir loads every <toolsDir>/<name>/tool.json. A missing toolsDir is
// no tools and no error. Errors name the file (relative to toolsDir's
// parent, e.g. tools/refund/tool.json) and the field. Warnings report
// what was skipped: tools with confirm "never", folders without tool.json,
// commands not found in PATH.
func LoadDir(toolsDir string) (map[string]*Tool, []string, error) {
	loaded := map[string]*Tool{}
	entries, err := os.ReadDir(toolsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return loaded, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("read tools folder: %w", err)
	}
	var warnings []string
	base := filepath.Base(toolsDir)
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(toolsDir, name)
		if strings.HasPrefix(name, ".") {
			continue
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue // a stray file, e.g. a README
		}
		display := filepath.ToSlash(filepath.Join(base, name, "tool.json"))
		data, err := os.ReadFile(filepath.Join(dir, "tool.json"))
		if errors.Is(err, fs.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("%s/%s: no tool.json, folder ignored", base, name))
			continue
		} else if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", display, err)
		}
		absDir, err := filepath.Abs(dir)
		if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", display, err)
		}
		tool, warning, err := parseTool(data, name, absDir)
		if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", display, err)
		}
		if warning != "" {
			warnings = append(warnings, display+": "+warning)
		}
		if tool != nil {
			loaded[tool.Name] = tool
		}
	}
	return loaded, warnings, nil
}

// parseTool checks one tool.json. It returns a nil tool and a warning for
// a tool that is not registered (confirm "never").
func parseTool(data []byte, folder, dir string) (*Tool, string, error) {
	var f toolFile
	if err := strictjson.DecodeStrict(data, &f, ""); err != nil {
		return nil, "", err
	}
	t := &Tool{Description: f.Description, LLMCallable: true, Timeout: defaultTimeout, Idempotent: f.Idempotent, Dir: dir}
	var err error
	if t.Name, err = parseName(f.Name, folder); err != nil {
		return nil, "", err
	}
	if t.Parameters, t.schema, err = parseParameters(t.Name, f.Parameters); err != nil {
		return nil, "", err
	}
	if t.Exposure, err = parseExposure(f.Exposure); err != nil {
		return nil, "", err
	}
	if t.Approval, err = confirm.ParseApproval(f.Approval, "approval"); err != nil {
		return nil, "", err
	}
	if f.LLMCallable != nil {
		t.LLMCallable = *f.LLMCallable
	}
	confirm, never, err := parseConfirm(f.Confirm)
	if err != nil {
		return nil, "", err
	} else if never {
		return nil, `confirm is "never": the tool is not registered`, nil
	}
	t.Confirm = confirm

	if len(f.Command) == 0 || f.Command[0] == "" {
		return nil, "", strictjson.FieldErr("command", `required: the program and its arguments, e.g. ["./run.sh"]`)
	}
	t.Command = f.Command
	warning, err := checkProgram(f.Command[0], dir)
	if err != nil {
		return nil, "", err
	}
	if err := checkEnv(f.Env); err != nil {
		return nil, "", err
	}
	t.Env = f.Env
	if t.Durable, err = parseExecution(f.Execution, t.Name); err != nil {
		return nil, "", err
	}
	if t.Uses, err = parseUses(f.Uses, t.Name); err != nil {
		return nil, "", err
	}
	if t.Triggers, err = parseTriggers(f.Triggers, t.Exposure.Kind); err != nil {
		return nil, "", err
	}
	if f.TimeoutMS != nil {
		ms := *f.TimeoutMS
		if ms <= 0 || time.Duration(ms)*time.Millisecond > maxTimeout {
			return nil, "", strictjson.FieldErr("timeout_ms", "must be between 1 and %d (%s), got %d", maxTimeout.Milliseconds(), maxTimeout, ms)
		}
		t.Timeout = time.Duration(ms) * time.Millisecond
	}
	return t, warning, nil
}

// parseExecution checks tool.json's "execution": "inline" (the default)
// or "durable" (docs/runtime.md#durable-tools), and reports durable.
func parseExecution(raw *string, name string) (bool, error) {
	switch {
	case raw == nil || *raw == ExecutionInline:
		return false, nil
	case *raw == ExecutionDurable:
		return true, nil
	}
	return false, strictjson.FieldErr("execution", "tool %q: must be %q or %q, got %q", name, ExecutionInline, ExecutionDurable, *raw)
}

// parseName checks tool.json's "name": required, a valid tool name, and
// the folder's.
func parseName(name *string, folder string) (string, error) {
	switch {
	case name == nil:
		return "", strictjson.FieldErr("name", "required (the folder name, %q)", folder)
	case !agentd.ValidToolName(*name):
		return "", strictjson.FieldErr("name", "must be 1 to 64 letters, digits, '_' or '-', got %q", *name)
	case *name != folder:
		return "", strictjson.FieldErr("name", "must equal the folder name %q, got %q", folder, *name)
	}
	return *name, nil
}

// parseParameters checks tool.json's "parameters" (absent:
// defaultParameters), a JSON Schema whose "type", when set, is "object",
// and returns it compacted, with its compiled schema.
func parseParameters(name string, raw json.RawMessage) (json.RawMessage, *jsonschema.Schema, error) {
	params := defaultParameters
	if !strictjson.IsNull(raw) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, nil, strictjson.FieldErr("parameters", "%v", err)
		}
		var probe struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(buf.Bytes(), &probe); err != nil {
			return nil, nil, strictjson.FieldErr("parameters", "must be a JSON Schema object")
		}
		if probe.Type != nil && probe.Type != "object" {
			return nil, nil, strictjson.FieldErr("parameters", `"type" must be "object": arguments are always a JSON object`)
		}
		params = buf.Bytes()
	}
	sch, err := compileSchema(name, params)
	if err != nil {
		return nil, nil, strictjson.FieldErr("parameters", "%v", err)
	}
	return params, sch, nil
}

// parseExposure checks tool.json's "exposure" (absent: open).
func parseExposure(raw json.RawMessage) (Exposure, error) {
	x := Exposure{Kind: ExposureOpen}
	if strictjson.IsNull(raw) {
		return x, nil
	}
	var e exposureFile
	if err := strictjson.DecodeStrict(raw, &e, "exposure"); err != nil {
		return Exposure{}, err
	}
	if e.Kind != nil {
		switch *e.Kind {
		case ExposureOpen, ExposureRequiresConfirmation, ExposureOperatorGated:
			x.Kind = *e.Kind
		default:
			return Exposure{}, strictjson.FieldErr("exposure.kind", "must be one of %s, %s, %s", ExposureOpen, ExposureRequiresConfirmation, ExposureOperatorGated)
		}
	}
	x.Prompt = strings.TrimSpace(e.Prompt)
	return x, nil
}

// parseConfirm checks tool.json's "confirm" and returns Tool.Confirm's
// value ("" for absent or false, "true", "review"), or never for "never".
func parseConfirm(raw json.RawMessage) (confirm string, never bool, err error) {
	if strictjson.IsNull(raw) {
		return "", false, nil
	}
	var b bool
	var s string
	switch {
	case json.Unmarshal(raw, &b) == nil:
		if b {
			return "true", false, nil
		}
		return "", false, nil
	case json.Unmarshal(raw, &s) == nil && s == "review":
		return "review", false, nil
	case json.Unmarshal(raw, &s) == nil && s == "never":
		return "", true, nil
	default:
		return "", false, strictjson.FieldErr("confirm", `must be false, true, "review" or "never", got %s`, bytes.TrimSpace(raw))
	}
}

// parseUses checks tool.json's "uses": {"tools": [NAME, …]}, the tools
// the command may call (each a tool name, listed once, not the tool
// itself). Whether each may be a composite's child is the registry's
// check, which knows every source.
func parseUses(raw json.RawMessage, self string) ([]string, error) {
	if strictjson.IsNull(raw) {
		return nil, nil
	}
	var u usesFile
	if err := strictjson.DecodeStrict(raw, &u, "uses"); err != nil {
		return nil, err
	}
	if len(u.Tools) == 0 {
		return nil, strictjson.FieldErr("uses.tools", `must list the tools the command calls, e.g. ["lookup_order"]`)
	}
	seen := map[string]bool{}
	for i, name := range u.Tools {
		field := fmt.Sprintf("uses.tools[%d]", i)
		switch {
		case !agentd.ValidToolName(name):
			return nil, strictjson.FieldErr(field, "must be a tool name, got %q", name)
		case name == self:
			return nil, strictjson.FieldErr(field, "a tool cannot use itself")
		case seen[name]:
			return nil, strictjson.FieldErr(field, "%q is listed twice", name)
		}
		seen[name] = true
	}
	return u.Tools, nil
}

// idPattern is a tenant's or project's id (as in agentd.json api_keys).
var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// parseTriggers checks tool.json's "triggers": {"invoke": bool,
// "schedule": EXPR, "tenant_id", "project_id"}; unknown keys are errors.
// A schedule must parse (schedule.Parse), and a tool that requires
// confirmation cannot have one: no one is there to confirm its runs.
// tenant_id and project_id (default "default") are whom a scheduled run
// acts for, and only go with a schedule.
func parseTriggers(raw json.RawMessage, exposure string) (Triggers, error) {
	var tr Triggers
	if strictjson.IsNull(raw) {
		return tr, nil
	}
	var f triggersFile
	if err := strictjson.DecodeStrict(raw, &f, "triggers"); err != nil {
		return tr, err
	}
	tr.Invoke = f.Invoke
	if f.Schedule == nil {
		if f.TenantID != nil || f.ProjectID != nil {
			return tr, strictjson.FieldErr("triggers", "tenant_id and project_id name whom a scheduled run acts for: they need a schedule")
		}
		return tr, nil
	}
	s, err := schedule.Parse(*f.Schedule)
	if err != nil {
		return tr, strictjson.FieldErr("triggers.schedule", "%v", err)
	}
	if confirm.ExposureTier(exposure) != agentd.TierAuto {
		return tr, strictjson.FieldErr("triggers.schedule", "a tool whose exposure is %q cannot be scheduled: no one is there to confirm its runs", exposure)
	}
	tr.Schedule, tr.TenantID, tr.ProjectID = s, agentd.DefaultTenantID, agentd.DefaultProjectID
	for _, c := range []struct {
		field string
		v     *string
		dst   *string
	}{{"tenant_id", f.TenantID, &tr.TenantID}, {"project_id", f.ProjectID, &tr.ProjectID}} {
		if c.v == nil {
			continue
		}
		if !idPattern.MatchString(*c.v) {
			return tr, strictjson.FieldErr("triggers."+c.field, "must be 1 to 128 of a-z A-Z 0-9 _ . -, starting with a letter or digit, got %q", *c.v)
		}
		*c.dst = *c.v
	}
	return tr, nil
}

// checkEnv checks tool.json's "env": valid variable names, each once.
func checkEnv(names []string) error {
	seen := map[string]bool{}
	for i, name := range names {
		field := fmt.Sprintf("env[%d]", i)
		if !envNamePattern.MatchString(name) {
			return strictjson.FieldErr(field, "not a valid environment variable name: %q", name)
		}
		if seen[name] {
			return strictjson.FieldErr(field, "%q is listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

// checkProgram checks the command's program: a path (relative ones resolve
// against the tool folder) must be an executable file; a bare name not
// found in PATH is only a warning, since it may be installed later.
func checkProgram(prog, dir string) (warning string, err error) {
	if !strings.Contains(prog, "/") {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Sprintf("command %q not found in PATH", prog), nil
		}
		return "", nil
	}
	path := prog
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return "", strictjson.FieldErr("command", "program %q not found", prog)
	case info.IsDir():
		return "", strictjson.FieldErr("command", "program %q is a directory", prog)
	case info.Mode().Perm()&0o111 == 0:
		return "", strictjson.FieldErr("command", "program %q is not executable (chmod +x it)", prog)
	}
	return "", nil
}
